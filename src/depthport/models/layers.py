"""Building blocks shared by the model families, written so that the exported graph stays rank <= 4."""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

import torch
import torch.nn.functional as F
from torch import nn


class LayerScale(nn.Module):
    """Per-channel gain on a residual branch; `rewrites.fold_layerscale` folds it into the projection before it."""

    def __init__(self, dim: int, init: float = 1.0):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


# Short FP16 reductions (export.split_k): a dot product cut into G chunks whose partial results are summed by a
# mean, which XNNPACK accumulates in float32 (its f16 GEMMs accumulate in FP16, one rounding per product).
def group_sum(parts: torch.Tensor) -> torch.Tensor:
    """(G, *rest) -> the sum over G, as the mean of G times the parts, a rank-4 (1, X, G, 1) tensor reduced over
    its last two axes: the only mean XNNPACK's partitioner takes, which its f16 kernels accumulate in float32 and
    round once. G times first, not after: a mean G times smaller than the sum falls below FP16's normal range
    (2^-14) for small sums, and XNNPACK on ARM flushes FP16 subnormals to zero."""
    g, rest = parts.shape[0], parts.shape[1:]
    flat = (parts * torch.tensor(float(g), dtype=parts.dtype)).reshape(1, g, 1, -1).permute(0, 3, 1, 2)
    return flat.mean(dim=(2, 3), keepdim=True).reshape(rest)  # (1, X, G, 1): already XNNPACK's NHWC order


def chunking(n: int, chunk: int) -> tuple[int, int, int]:
    """(groups, size, padding): n cut into ``groups`` equal chunks of ``size`` <= ``chunk``, zero-padded by
    ``padding`` to groups * size."""
    groups = -(-n // chunk)
    size = -(-n // groups)
    return groups, size, groups * size - n


def matmul_split(a: torch.Tensor, b: torch.Tensor, chunk: int | None) -> torch.Tensor:
    """a @ b for rank-3 a (B, M, K) and b (B, K, N), with K cut into chunks of at most ``chunk``: one batched
    matmul over (G * B) short products, their partial results added by ``group_sum``."""
    if not chunk or a.shape[-1] <= chunk:
        return a @ b
    (bsz, m, k), n = a.shape, b.shape[-1]
    g, c, pad = chunking(k, chunk)
    if pad:
        a, b = F.pad(a, (0, pad)), F.pad(b, (0, 0, 0, pad))
    a = a.reshape(bsz, m, g, c).permute(2, 0, 1, 3).reshape(g * bsz, m, c)
    b = b.reshape(bsz, g, c, n).transpose(0, 1).reshape(g * bsz, c, n)
    return group_sum(torch.bmm(a, b).reshape(g, bsz, m, n))


def slices(n: int, step: int) -> list[slice]:
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


# Guarded logits below max - GUARD_FLOOR * guard (-32768 for guard 256) are raised to it: exp of either is 0 in FP32.
GUARD_FLOOR = 128.0


# Where the backend has no max reduction (XNNPACK), the guarded logits are clamped instead: to +-LOGIT_BOUND / guard
# before the guard is restored, an identity for every |Q·Kᵀ| < LOGIT_BOUND.
LOGIT_BOUND = 65472.0
# How much smaller fp16.safe.fp16_safe_attention computes the logits (Q and K each sqrt(LOGIT_GUARD) times).
LOGIT_GUARD = 256.0


def attention_weights(logits: torch.Tensor, guard: torch.Tensor | None = None, mode: str = "shift",
                      prob_scale: torch.Tensor | None = None, split_k: int | None = None) -> torch.Tensor:
    """softmax over the keys (``prob_scale`` times it, by ``scaled_softmax``, when given). With ``guard`` the
    logits z were computed ``guard`` times smaller (``fp16.safe.fp16_safe_attention``) and are restored by ``mode``:
    - "shift": softmax(guard * max(z - max z, -GUARD_FLOOR)): the same numbers in FP32, and every intermediate
      within FP16's range;
    - "clamp" (backends without a max reduction, XNNPACK in FP16): softmax(guard * clamp(z, +-LOGIT_BOUND /
      guard)), the same in FP32 while |Q·Kᵀ| < LOGIT_BOUND, saturating (not inf, not NaN) in FP16 beyond it;
    - "scale" (FP32 compute): softmax(guard * z), exact.
    """
    if guard is not None:
        if mode == "scale":
            logits = logits * guard
        elif mode == "clamp":
            bound = LOGIT_BOUND / LOGIT_GUARD
            logits = F.hardtanh(logits, -bound, bound) * guard
        else:
            logits = (logits - logits.amax(dim=-1, keepdim=True)).clamp_min(-GUARD_FLOOR) * guard
    return logits.softmax(dim=-1) if prob_scale is None else scaled_softmax(logits, prob_scale, split_k)


# Attention weights PROB_SCALE times larger in XNNPACK's FP16 files (export.executorch.backend_form), the output
# projection's weights PROB_SCALE times smaller: exact (a power of two).
PROB_SCALE = 16.0


def scaled_softmax(logits: torch.Tensor, scale: torch.Tensor, split_k: int | None = None) -> torch.Tensor:
    """``scale`` * softmax over the last axis of rank-3 logits (B, M, N), from ops XNNPACK runs: the row max as max
    pooling over a (1, N) window, exp, the row sum as a matrix product with ones (in chunks of ``split_k``, else
    16: a long FP16 sum of values near 1 loses its small terms), a division. No Python scalars: ExecuTorch makes
    them constants that it casts outside the XNNPACK delegate (``scale`` is a one-element tensor, a buffer).

    Why: XNNPACK on ARM flushes FP16 subnormals to zero, and over N = 1813 tokens (DA-V2 at 518x686) a diffuse
    attention row has many weights below 2^-14 that its softmax returns as 0 (DA-V2-Small, camera: 4.7e-3 instead
    of 2.6e-3 predicted). ``scale`` times larger, weights down to 2^-14 / scale survive; the weighted sum of values
    is ``scale`` times larger too, finite while |V| < 65504 / scale."""
    b, m, n = logits.shape
    top = F.max_pool2d(logits.reshape(1, 1, b * m, n), (1, n), (1, n)).reshape(b, m, 1)
    e = torch.exp(logits - top)
    row = logits[:, :1]
    ones = torch.exp(row - row).transpose(1, 2)  # (B, N, 1), exp(0): a created constant (aten.full) would leave
    total = matmul_split(e, ones, split_k or 16)
    return e / (total / scale)


# Eager runs of long token sequences (``query_chunks``): the logits of at most this many bytes at a time.
QUERY_CHUNK_BYTES = 32 << 20
_query_chunk_bytes: ContextVar[int | None] = ContextVar("query_chunk_bytes", default=None)


@contextlib.contextmanager
def query_chunks(max_bytes: int = QUERY_CHUNK_BYTES):
    """Within: attention (``attend``) runs in blocks of query rows, at most ``max_bytes`` of logits each, so no
    (heads, N, N) tensor is made at once (a Large model at 756x1008, 3888 tokens: 1 GB a layer). The same arithmetic:
    a query's logits, softmax and weighted sum read only its own row (the matrix library may block a shorter
    product differently: last-bit differences, 3e-6 of the output's range on prompt-da-large). For eager PyTorch
    runs only (``runtimes.torch.TorchRunner``, the FP16 simulation, the rewrite ledger); an exported graph keeps one
    whole attention."""
    token = _query_chunk_bytes.set(max_bytes)
    try:
        yield
    finally:
        _query_chunk_bytes.reset(token)


def attend(q: torch.Tensor, keys_t: torch.Tensor, v: torch.Tensor, weights, split_k: int | None = None) -> torch.Tensor:
    """``weights(q @ keys_t) @ v`` for q (B, M, d), keys_t (B, d, N), v (B, N, d'), where ``weights`` maps logits to
    attention weights row by row; in blocks of query rows under ``query_chunks``."""
    max_bytes = _query_chunk_bytes.get()
    row_bytes = q.shape[0] * keys_t.shape[-1] * q.element_size()
    rows = q.shape[-2] if max_bytes is None else max(1, max_bytes // row_bytes)
    if rows >= q.shape[-2]:
        return matmul_split(weights(matmul_split(q, keys_t, split_k)), v, split_k)
    return torch.cat([matmul_split(weights(matmul_split(q[:, s], keys_t, split_k)), v, split_k)
                      for s in slices(q.shape[-2], rows)], dim=-2)


class Attention(nn.Module):
    """Multi-head self-attention on one sample's tokens (N, C): separate Q/K/V, no mask, rank <= 3.

    `scale` is applied to the logits until `rewrites.fold_attention_scale` moves it into the Q projection.
    """

    def __init__(self, dim: int, heads: int, qkv_bias: bool = True):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim**-0.5
        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.k = nn.Linear(dim, dim, bias=qkv_bias)
        self.v = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    # K^T in one permute instead of the heads' transpose and then K's: set by export.executorch.backend_form
    keys_in_one_permute = False
    # Set by fp16.safe.fp16_safe_attention: Q and K computed sqrt(guard) times smaller (the ``guard`` buffer), the
    # logits restored in softmax; clamped where the backend has no max reduction (export.executorch.backend_form).
    guarded = False
    logit_mode = "shift"
    split_k: int | None = None  # set by export.split_k: both matmuls' reductions in chunks (see matmul_split)
    # Set by export.executorch.backend_form, with a ``prob_scale`` buffer and ``proj`` that many times smaller: the
    # attention weights that many times larger (scaled_softmax).
    scaled_weights = False

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(t.shape[0], self.heads, self.head_dim).transpose(0, 1)

    def _keys_t(self, x: torch.Tensor) -> torch.Tensor:
        """K as (heads, head_dim, N)."""
        if self.keys_in_one_permute:
            return self.k(x).reshape(x.shape[0], self.heads, self.head_dim).permute(1, 2, 0)
        return self._heads(self.k(x)).transpose(1, 2)

    def _weights(self, logits: torch.Tensor) -> torch.Tensor:
        if self.scale != 1.0:
            logits = logits * self.scale
        return attention_weights(logits, self.guard if self.guarded else None, self.logit_mode,
                                 self.prob_scale if self.scaled_weights else None, self.split_k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, v = self._heads(self.q(x)), self._heads(self.v(x))
        out = attend(q, self._keys_t(x), v, self._weights, self.split_k)
        return self.proj(out.transpose(0, 1).reshape(x.shape[0], -1))


class ScaleNorm(nn.Module):
    """The part of a LayerNorm left after `rewrites.fold_layernorm`: x * rsqrt(mean((x - mean(x))^2) + eps).

    The mean-centering, gain and bias live in the consumer's weights. The variance's mean and the epsilon are
    one constant (1, C) linear map, so the norm costs six ops; four when ``centered`` says the input already
    has zero mean over channels (`rewrites.center_residual_stream`).
    """

    def __init__(self, dim: int, eps: float, centered: bool = False):
        super().__init__()
        self.centered = centered
        self.register_buffer("avg", torch.full((1, dim), 1.0 / dim), persistent=False)
        self.register_buffer("eps", torch.tensor([eps]), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x if self.centered else x - x.mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(F.linear(d * d, self.avg, self.eps))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block (DINOv2 layout) on one sample's tokens (N, C)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0, eps: float = 1e-6):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, heads)
        self.ls1 = LayerScale(dim)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.ls2 = LayerScale(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


def bilinear_matrix(n_in: int, n_out: int, align_corners: bool) -> torch.Tensor:
    """The (n_out, n_in) matrix of 1-D linear interpolation, with the float32 weights F.interpolate uses.

    Taking the weights from the fp32 kernel itself (not computed in fp64) makes the matrix form reproduce the
    upstream model's own rounding of the interpolation weights.
    """
    eye = torch.eye(n_in, dtype=torch.float32).reshape(n_in, 1, n_in, 1)
    rows = F.interpolate(eye, size=(n_out, 1), mode="bilinear", align_corners=align_corners)
    return rows.reshape(n_in, n_out).T.contiguous()


class Resize(nn.Module):
    """Bilinear resize of a fixed-size map to a fixed size, in one of three forms.

    - ``interp``: F.interpolate as upstream calls it (the reference form; emits RESIZE).
    - ``exact``: the same map as constant band matrices applied along W, then H (no RESIZE op). Each output
      index reads at most two inputs, so the matrices are cut into ``chunks`` diagonal blocks that each see
      only the input span they need: FLOPs fall by about the chunk count, results are unchanged.
    - ``approx``: align_corners=False, the GPU-native RESIZE_BILINEAR (an approximation where upstream uses
      align_corners=True, the same map where it does not).

    ``align_corners`` is upstream's: True for the DPT head's upsampling, False for Prompt Depth Anything's prompt.
    """

    def __init__(self, in_hw: tuple[int, int], out_hw: tuple[int, int], mode: str = "interp", chunks: int = 1,
                 align_corners: bool = True):
        super().__init__()
        if mode not in ("interp", "exact", "approx"):
            raise ValueError(f"unknown resize mode {mode!r}")
        self.in_hw, self.out_hw, self.mode = tuple(in_hw), tuple(out_hw), mode
        self.align_corners = align_corners
        self.h_blocks = self._blocks(in_hw[0], out_hw[0], chunks, align_corners) if mode == "exact" else []
        self.w_blocks = self._blocks(in_hw[1], out_hw[1], chunks, align_corners) if mode == "exact" else []
        for axis, blocks in (("h", self.h_blocks), ("w", self.w_blocks)):
            for i, (_, _, mat) in enumerate(blocks):
                self.register_buffer(f"{axis}{i}", mat, persistent=False)

    @staticmethod
    def _blocks(n_in: int, n_out: int, chunks: int, align_corners: bool) -> list[tuple[int, int, torch.Tensor]]:
        """Split the interpolation matrix into row blocks, each with the column span it touches."""
        full = bilinear_matrix(n_in, n_out, align_corners=align_corners)
        chunks = max(1, min(chunks, n_out))
        bounds = [round(i * n_out / chunks) for i in range(chunks + 1)]
        blocks = []
        for r0, r1 in zip(bounds[:-1], bounds[1:]):
            cols = full[r0:r1].abs().sum(0).nonzero().flatten()
            c0, c1 = int(cols.min()), int(cols.max()) + 1
            blocks.append((c0, c1, full[r0:r1, c0:c1].contiguous()))
        return blocks

    def _apply_last(self, x: torch.Tensor, axis: str, blocks) -> torch.Tensor:
        mats = [getattr(self, f"{axis}{i}") for i in range(len(blocks))]
        if len(blocks) == 1:
            c0, c1, _ = blocks[0]
            src = x if (c0, c1) == (0, x.shape[-1]) else x[..., c0:c1]
            return F.linear(src, mats[0])
        return torch.cat([F.linear(x[..., c0:c1], m) for (c0, c1, _), m in zip(blocks, mats)], dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "interp":
            return F.interpolate(x, size=self.out_hw, mode="bilinear", align_corners=self.align_corners)
        if self.mode == "approx":
            return F.interpolate(x, size=self.out_hw, mode="bilinear", align_corners=False)
        x = self._apply_last(x, "w", self.w_blocks)
        x = self._apply_last(x.transpose(2, 3), "h", self.h_blocks)
        return x.transpose(2, 3)


class DeconvAsShuffle(nn.Module):
    """ConvTranspose2d with kernel == stride and no padding, as a 1x1 conv to C*k*k channels + depth-to-space.

    The blocks do not overlap, so this is exact; the depth-to-space is written with rank-4 reshapes in
    channels-last order so that no tensor goes above rank 4.
    """

    def __init__(self, deconv: nn.ConvTranspose2d):
        super().__init__()
        k = deconv.kernel_size[0]
        if deconv.kernel_size != deconv.stride or deconv.kernel_size[0] != deconv.kernel_size[1] or any(deconv.padding):
            raise ValueError("only ConvTranspose2d with square kernel == stride and no padding is supported")
        c_in, c_out = deconv.in_channels, deconv.out_channels
        self.k, self.c_out = k, c_out
        weight = deconv.weight.detach().permute(2, 3, 1, 0).reshape(k * k * c_out, c_in)
        bias = deconv.bias.detach().repeat(k * k) if deconv.bias is not None else None
        self.conv = nn.Conv2d(c_in, k * k * c_out, kernel_size=1, bias=bias is not None)
        with torch.no_grad():
            self.conv.weight.copy_(weight[:, :, None, None])
            if bias is not None:
                self.conv.bias.copy_(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        k, c = self.k, self.c_out
        y = self.conv(x).permute(0, 2, 3, 1)
        y = y.reshape(b * h, w, k, k * c).transpose(1, 2)
        return y.reshape(b, h * k, w * k, c).permute(0, 3, 1, 2)
