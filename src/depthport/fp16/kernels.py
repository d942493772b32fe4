"""FP16 kernels in PyTorch, for the simulation (``simulate``): how two kinds of FP16 device accumulate.

- GPU under its default FP16 precision (``*_blocked``): the reduction in blocks of ``block`` products summed in
  float32, the running sum rounded to float16 after every block;
- XNNPACK's f16 kernels (``*_fma``, ``softmax_lanes``): the accumulator starts at the bias and takes one FP16
  fused multiply-add per product, in order (``vfmaq_f16`` / ``_mm512_fmadd_ph``); softmax sums exp in FP16 lanes.
  With ``flush`` every FP16 result below 2^-14 in magnitude (a subnormal) becomes 0, as on ARM, where XNNPACK's
  threadpool sets the FPCR's flush-to-zero bits (measured on the emulated ARMv8.2-A CPU: 0.01 x 0.001 gives 0 there,
  1e-5 on x86 with avx512_fp16).

Inputs are float32 tensors holding float16 values; outputs are float32 tensors holding float16 values.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..models.layers import slices
from ..runtimes.conv_bands import output_hw, row_bands

# FP16 lanes of one vector register in XNNPACK's f16 softmax sum (AVX-512 FP16: 32; NEON: 8, in 4 accumulators).
XNNPACK_LANES = 32


# The smallest normal float16; magnitudes below it are subnormals, which ARM's XNNPACK flushes to zero.
FP16_TINY = 2.0 ** -14


def round_fp16(t: torch.Tensor, flush: bool = False) -> torch.Tensor:
    """t rounded to float16 (round to nearest even), kept in t's dtype; with ``flush`` subnormals become 0."""
    h = t.to(torch.float16)
    return (flush_(h) if flush else h).to(t.dtype)


# The largest float16 subnormal: hardshrink at it keeps exactly the normal values (one pass, 13x masked_fill_).
_LARGEST_SUBNORMAL = FP16_TINY - 2.0 ** -24


def flush_(t: torch.Tensor) -> torch.Tensor:
    """t (float16 values) with its subnormals (|t| < 2^-14) set to 0, in place; inf and nan kept."""
    return torch.ops.aten.hardshrink.out(t, _LARGEST_SUBNORMAL, out=t)


def _accumulate_fp16(parts) -> torch.Tensor:
    """Running float16 sum of float32 partial sums, rounded after every addition. The sum is added to and rounded
    in place (fresh tensors of this size cost more in page faults than the additions)."""
    acc = None
    for part in parts:
        if acc is None:
            acc = round_fp16(part)
        else:
            acc.add_(part)
            acc.copy_(acc.to(torch.float16))
    return acc


# Output bytes of one tile of a blocked product: its rows run through every block while their running sum stays in
# cache, where untiled each block's partial sum is a fresh tensor the size of the whole output. prompt-da-large at
# 756x1008 on a Zen 4 (2 threads): a fusion block's 3x3 conv 4.5 s -> 1.5 s, an MLP's first linear 1.2 s -> 0.65 s,
# a simulated FP16 run 172-179 s -> 131-136 s.
TILE_BYTES = 4 << 20
# A convolution's unfolded input per tile (the im2col form), in bytes.
COLUMN_BYTES = 16 << 20


def _row_tiles(rows: int, row_bytes: int, tile_bytes: int) -> list[slice]:
    return slices(rows, max(1, tile_bytes // max(1, row_bytes)))


def linear_blocked(block: int, x, w, b=None, tile_bytes: int = TILE_BYTES):
    """x @ wᵀ (+ b): the reduction in blocks of ``block`` summed in float32, the running sum in float16; computed
    tile by tile of x's rows (the same sums)."""
    k, n = x.shape[-1], w.shape[0]
    tiles = _row_tiles(x[..., :1].numel(), n * x.element_size(), tile_bytes)
    if len(tiles) == 1:
        out = _accumulate_fp16(F.linear(x[..., s], w[:, s]) for s in slices(k, block))
    else:
        rows = x.reshape(-1, k)
        blocks = [(s, w[:, s].contiguous()) for s in slices(k, block)]
        out = torch.empty(rows.shape[0], n, dtype=x.dtype)
        for r in tiles:
            out[r] = _accumulate_fp16(F.linear(rows[r, s], ws) for s, ws in blocks)
        out = out.reshape(*x.shape[:-1], n)
    return out if b is None else round_fp16(out + b)


def matmul_blocked(block: int, a, b, tile_bytes: int = TILE_BYTES):
    """a @ b as ``linear_blocked`` computes it, tile by tile of a's rows."""
    if a.dim() < 2 or b.dim() < 2:
        return torch.matmul(a, b)
    k = a.shape[-1]
    shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    tiles = _row_tiles(a.shape[-2], math.prod(shape[:-2]) * shape[-1] * a.element_size(), tile_bytes)
    if len(tiles) == 1:
        return _accumulate_fp16(torch.matmul(a[..., s], b[..., s, :]) for s in slices(k, block))
    # a transposed b (keys in Q·Kᵀ) is copied to rows once, not once per tile
    blocks = [(s, b[..., s, :] if b.stride(-1) == 1 else b[..., s, :].contiguous()) for s in slices(k, block)]
    out = torch.empty(shape, dtype=torch.result_type(a, b))
    for r in tiles:
        out[..., r, :] = _accumulate_fp16(torch.matmul(a[..., r, s], bs) for s, bs in blocks)
    return out


def conv2d_blocked(block: int, x, w, b=None, stride=1, padding=0, dilation=1, groups=1,
                   tile_bytes: int = TILE_BYTES, column_bytes: int = COLUMN_BYTES):
    """A convolution (groups=1) whose reduction is cut into blocks of whole input channels, ``block`` products at
    most (3 channels of a 3x3 kernel), each summed in float32, the running sum in float16. Computed band by band of
    output rows (``runtimes.conv_bands.row_bands``): as a convolution per block of channels, or where the output has
    at least as many channels as the input (the fusion blocks' 3x3 convs), as blocked products of the band's unfolded
    input (faster there; a block's float32 sum may differ in its last bit)."""
    if groups != 1 or isinstance(padding, str):
        return _conv2d_whole(block, x, w, b, stride, padding, dilation, groups)
    cout, cin, kh, kw = w.shape
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    ho, wo = output_hw(x, w, stride, padding, dilation)
    out = torch.empty(x.shape[0], cout, ho, wo, dtype=x.dtype)
    step = max(1, block // (kh * kw))
    unfold = cout >= cin
    row_bytes = x.shape[0] * (cin * kh * kw if unfold else cout) * wo * out.element_size()
    weights, rows = w.reshape(cout, -1), max(1, (column_bytes if unfold else tile_bytes) // row_bytes)
    for r, band in row_bands(x, w, stride, padding, dilation, rows):
        if unfold:
            cols = F.unfold(band, (kh, kw), dilation=(dh, dw), stride=(sh, sw)).transpose(1, 2)
            part = _accumulate_fp16(F.linear(cols[..., s], weights[:, s])
                                    for s in slices(cols.shape[-1], step * kh * kw))
            out[:, :, r] = part.transpose(1, 2).reshape(x.shape[0], cout, r.stop - r.start, wo)
        else:
            out[:, :, r] = _accumulate_fp16(F.conv2d(band[:, s], w[:, s], None, (sh, sw), 0, (dh, dw))
                                            for s in slices(cin, step))
    return out if b is None else round_fp16(out + b[None, :, None, None])


def _conv2d_whole(block: int, x, w, b, stride, padding, dilation, groups):
    """``conv2d_blocked`` untiled: grouped convolutions (one FP32 convolution) and string paddings."""
    if groups != 1:
        return F.conv2d(x, w, b, stride, padding, dilation, groups)
    step = max(1, block // (w.shape[2] * w.shape[3]))
    out = _accumulate_fp16(F.conv2d(x[:, s], w[:, s], None, stride, padding, dilation)
                           for s in slices(x.shape[1], step))
    return out if b is None else round_fp16(out + b[None, :, None, None])


def fma_chain(acc: torch.Tensor, pairs, flush: bool = False) -> torch.Tensor:
    """acc + a * b for each (a, b) in order, in float16, one rounding per step (an FP16 fused multiply-add), its
    subnormal results set to 0 with ``flush``. In place: ``acc`` (a fresh float16 tensor of the full output shape)
    is the result. A fresh tensor per step cost 12x the arithmetic at 32 MB (page faults), and attention's Q·Kᵀ is
    larger."""
    for a, b in pairs:
        acc.addcmul_(a, b)
        if flush:
            flush_(acc)
    return acc


def _half(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float16)


def linear_fma(x, w, b=None, flush: bool = False):
    x16, w16 = _half(x).movedim(-1, 0).contiguous(), _half(w).t().contiguous()
    shape = (*x.shape[:-1], w.shape[0])
    acc = _half(b).expand(shape).clone() if b is not None else torch.zeros(shape, dtype=torch.float16)
    return fma_chain(acc, ((x16[k][..., None], w16[k]) for k in range(x16.shape[0])), flush).to(x.dtype)


def matmul_fma(a, b, flush: bool = False):
    if a.dim() < 2 or b.dim() < 2:
        return torch.matmul(a, b)
    a16, b16 = _half(a).movedim(-1, 0).contiguous(), _half(b).movedim(-2, 0).contiguous()
    shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    acc = torch.zeros(shape, dtype=torch.float16)
    pairs = ((a16[k][..., None], b16[k][..., None, :]) for k in range(a16.shape[0]))
    return fma_chain(acc, pairs, flush).to(a.dtype)


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def conv2d_fma(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, flush: bool = False):
    """Convolution as XNNPACK's IGEMM (groups=1) or depthwise kernel: one FP16 FMA per tap and input channel."""
    cout, cin_g, kh, kw = w.shape
    if isinstance(padding, str):
        return F.conv2d(x, w, b, stride, padding, dilation, groups)
    if groups != 1 and cin_g != 1:  # grouped: one IGEMM per group of input channels
        xs, ws = x.chunk(groups, dim=1), w.chunk(groups, dim=0)
        bs = b.chunk(groups) if b is not None else [None] * groups
        return torch.cat([conv2d_fma(xg, wg, bg, stride, padding, dilation, flush=flush)
                          for xg, wg, bg in zip(xs, ws, bs)], 1)
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    xp = F.pad(_half(x), (pw, pw, ph, ph))
    ho = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    wo = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    shape = (x.shape[0], cout, ho, wo)
    acc = _half(b)[None, :, None, None].expand(shape).clone() if b is not None else torch.zeros(
        shape, dtype=torch.float16)
    w16 = _half(w)
    taps = [xp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
            for i in range(kh) for j in range(kw)]
    ij = [(i, j) for i in range(kh) for j in range(kw)]
    if groups == 1:
        pairs = ((tap[:, c: c + 1], w16[:, c, i, j][None, :, None, None])
                 for tap, (i, j) in zip(taps, ij) for c in range(cin_g))
    else:
        mult = cout // x.shape[1]
        pairs = ((tap.repeat_interleave(mult, dim=1) if mult > 1 else tap, w16[:, 0, i, j][None, :, None, None])
                 for tap, (i, j) in zip(taps, ij))
    return fma_chain(acc, pairs, flush).to(x.dtype)


def softmax_lanes(x, dim=-1, *_, lanes: int = XNNPACK_LANES, flush: bool = False, **__):
    """XNNPACK's f16 softmax: max, exp(x - max) in FP16, the sum in FP16 lanes, then one horizontal sum."""
    x16 = _half(x).movedim(dim, -1)
    e = torch.exp(x16 - x16.amax(dim=-1, keepdim=True))
    if flush:
        flush_(e)
    n = e.shape[-1]
    pad = (-n) % lanes
    chunks = F.pad(e, (0, pad)).unflatten(-1, (-1, lanes))
    acc = chunks[..., 0, :].clone()
    for k in range(1, chunks.shape[-2]):
        acc = acc + chunks[..., k, :]
    while acc.shape[-1] > 1:
        half = acc.shape[-1] // 2
        acc = acc[..., :half] + acc[..., half:]
    return (e * (1.0 / acc.float()).to(torch.float16)).movedim(-1, dim).to(x.dtype)
