"""Float64 convolutions in bands of output rows, so that a float64 reference runs in bounded memory.

PyTorch's CPU convolution has no oneDNN kernel for float64: it unfolds the input (im2col) into one buffer of
(input channels / groups) x kernel taps x output pixels. For the full-resolution 3x3 convolutions at the end of a
DPT head at 896x504 that buffer alone is 4 GB. Each output row depends only on its own window of input rows, so
the convolution computed band by band, each band from its input rows (with the same zero padding), is the same
convolution: the same products per output element, summed in an order that may differ by float64 rounding (about
1e-16 relative, nine orders below the float32 errors the float64 reference measures). ``BandedConv`` applies this to
every float64 ``conv2d`` whose unfold buffer would exceed a bound; float32 goes through oneDNN, which needs none.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

# The largest unfold buffer a float64 convolution may make (bytes).
BAND_BYTES = 256 << 20

_CONV2D = (F.conv2d, torch.conv2d)


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def band_rows(x: torch.Tensor, weight: torch.Tensor, stride=1, padding=0, dilation=1,
              band_bytes: int = BAND_BYTES) -> int | None:
    """Output rows per band for ``F.conv2d(x, weight, ...)`` to stay within ``band_bytes``; None: no need to split."""
    if isinstance(padding, str) or x.dim() != 4:
        return None
    kh, kw = weight.shape[-2:]
    rows_out, cols_out = output_hw(x, weight, stride, padding, dilation)
    per_row = x.shape[0] * weight.shape[1] * kh * kw * max(cols_out, 1) * x.element_size()
    band = max(1, band_bytes // per_row)
    return band if band < rows_out else None


def conv2d_banded(x: torch.Tensor, weight: torch.Tensor, bias=None, stride=1, padding=0, dilation=1, groups=1,
                  band_bytes: int = BAND_BYTES) -> torch.Tensor:
    """``F.conv2d`` computed in bands of output rows whose unfold buffer stays within ``band_bytes``."""
    band = band_rows(x, weight, stride, padding, dilation, band_bytes)
    if band is None:
        return F.conv2d(x, weight, bias, stride, padding, dilation, groups)
    return _in_bands(x, weight, bias, stride, padding, dilation, groups, band)


def _in_bands(x, weight, bias, stride, padding, dilation, groups, band: int) -> torch.Tensor:
    """``F.conv2d`` in bands of ``band`` output rows, each from its own input rows with the same zero padding."""
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    return torch.cat([F.conv2d(rows, weight, bias, (sh, sw), 0, (dh, dw), groups)
                      for _, rows in row_bands(x, weight, stride, padding, dilation, band)], dim=-2)


def output_hw(x: torch.Tensor, weight: torch.Tensor, stride=1, padding=0, dilation=1) -> tuple[int, int]:
    """The output rows and columns of ``F.conv2d(x, weight, ...)`` (numeric padding)."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    kh, kw = weight.shape[-2:]
    return ((x.shape[-2] + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
            (x.shape[-1] + 2 * pw - dw * (kw - 1) - 1) // sw + 1)


def row_bands(x: torch.Tensor, weight: torch.Tensor, stride, padding, dilation, band: int):
    """(output rows, input rows) for each band of ``band`` output rows of ``F.conv2d(x, weight, ...)``: the input
    rows carry the band's share of the zero padding, so that convolving them with padding 0 gives those output rows."""
    (sh, _), (ph, pw), (dh, _) = _pair(stride), _pair(padding), _pair(dilation)
    kh, height = weight.shape[-2], x.shape[-2]
    rows_out = output_hw(x, weight, stride, padding, dilation)[0]
    for r0 in range(0, rows_out, band):
        r1 = min(rows_out, r0 + band)
        top, end = r0 * sh - ph, (r1 - 1) * sh + dh * (kh - 1) + 1 - ph  # input rows [top, end) with padding
        rows = x[..., max(top, 0):min(end, height), :]
        yield slice(r0, r1), F.pad(rows, (pw, pw, max(0, -top), max(0, end - height)))


class BandedConv(TorchFunctionMode):
    """Every float64 ``conv2d`` run under this mode goes through ``conv2d_banded``; ``bands`` counts the
    convolutions that were split."""

    def __init__(self, band_bytes: int = BAND_BYTES):
        super().__init__()
        self.band_bytes, self.bands = band_bytes, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _CONV2D and args and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.float64:
            names = ("weight", "bias", "stride", "padding", "dilation", "groups")
            call = dict(zip(names, args[1:]), **kwargs)
            geometry = {k: call.get(k, v) for k, v in (("stride", 1), ("padding", 0), ("dilation", 1))}
            band = band_rows(args[0], call["weight"], **geometry, band_bytes=self.band_bytes)
            if band is not None:
                self.bands += 1
                return _in_bands(args[0], call["weight"], call.get("bias"), **geometry,
                                 groups=call.get("groups", 1), band=band)
        return func(*args, **kwargs)
