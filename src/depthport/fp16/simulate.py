"""Predict, on the CPU, what FP16 compute on a mobile GPU does to a model's output.

A mobile GPU delegate under its default precision policy may run an FP32 file in FP16. This module runs
the PyTorch model twice on the same inputs: once in FP32 (the reference) and once with FP16 arithmetic
simulated op by op, then compares the two and says where the FP16 run first went wrong.

What the FP16 run simulates:
- every parameter and buffer is rounded to float16 (round to nearest even) before the run;
- every torch op's floating-point result is rounded to float16, so a value beyond +-65504 becomes +-inf
  exactly where the GPU would overflow; ops that only move data (reshape, cat, slicing, ReLU...) are exact
  and are left alone;
- matrix products (linear, matmul/@, bmm, conv2d with groups=1) accumulate in float16 when
  ``accumulate="fp16"`` (the default): the reduction is cut into blocks of ``block`` consecutive products
  (whole input channels for a conv), each block is summed in float32 and added to a running sum that is
  rounded to float16 after every addition. Hardware that rounds after every product loses about
  sqrt(block) times more precision than this; overflow of a partial sum is caught either way;
- layer_norm is split into the elementwise ops it becomes in a .tflite graph (mean, sub, mul, mean, add,
  rsqrt, mul, add), each rounded.
Not simulated: other ops' internal accumulation (softmax, mean, gelu, resize compute in float32 from float16
inputs and round once), the GPU's own op fusion and summation order, flushing of float16 subnormals (but in
"xnnpack-arm"), and the accuracy of transcendental functions (ARM's f16 rsqrt, tanh and exp are less exact than
x86's). The prediction is therefore optimistic about precision loss but exact about overflow of any op output.

Four accumulation modes (``ACCUMULATE``), one per kind of FP16 device:
- ``"fp16"``: a mobile GPU under its default precision (blocks of ``block`` products summed in float32, the
  running sum in float16), as above;
- ``"fp32"``: FP16 tensors with FP32 accumulation (LiteRT's ``FP16_WITH_FP32_ACCUM``, WebGPU FP16 storage);
- ``"xnnpack"``: XNNPACK's f16 kernels, as an fp16 ``.pte`` runs on an x86 CPU with avx512_fp16. Their GEMM,
  IGEMM (convolution) and depthwise microkernels start the accumulator from the bias and add one product at a
  time with an FP16 fused multiply-add (``vfmaq_f16`` / ``_mm512_fmadd_ph``): one rounding to float16 per product,
  in order along the reduction. Softmax (``raddstoreexpminusmax``)
  computes exp in FP16 and sums it in FP16 vector lanes (``lanes``, 32 for AVX-512 FP16) before one
  horizontal sum; mean-type reductions accumulate in float32 (the ``f32acc`` rsum kernels) and round once.
  This costs one in-place tensor operation per product along the reduction, about 1.3e10 products a second on
  two Zen 5 cores: 16 s an image for DA-V2-Small at 518x686, minutes for a Large model. x86 keeps FP16
  subnormals;
- ``"xnnpack-arm"``: the same kernels as an ARMv8.2 CPU (NEON fp16) runs them, where XNNPACK flushes FP16
  subnormals to zero: every FP16 result and every weight below 2^-14 in magnitude becomes 0 (one more in-place
  pass per product: about 1.3x the time). Phones compute this way; it is the mode an fp16 ``.pte`` is judged by
  (``check.fp16_compute.PHONE_ACCUMULATE``). Validated against the emulated ARMv8.2-A CPU (``runtimes.arm64``).
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from ..core.metrics import image_metrics, pearson, pooled_rel_l2, public, root_ratio, summarize
from ..models.layers import query_chunks
from ..runtimes.torch import layer_progress
from . import kernels
from .kernels import round_fp16

FP16_MAX = 65504.0
# Above this relative L2 error FP16 compute counts as wrong (same tolerance as the runtime check's FP16 runs).
DEFAULT_TOL = 1e-2
# Module outputs kept from the FP32 run for the per-layer comparison, in bytes; larger outputs are skipped.
STORE_LIMIT = 1 << 30

_EXACT = frozenset({
    "reshape", "view", "view_as", "permute", "transpose", "t", "contiguous", "flatten", "unflatten", "squeeze",
    "unsqueeze", "expand", "expand_as", "repeat", "__getitem__", "cat", "concat", "stack", "split", "chunk",
    "narrow", "select", "flip", "clone", "detach", "unbind", "movedim", "relu", "relu_", "pad", "float", "to",
    "type", "requires_grad_", "__get__", "__set__", "size", "dim",
})
_IN_PLACE_DUNDER = frozenset({"__iadd__", "__isub__", "__imul__", "__itruediv__", "__setitem__"})
_MATMULS = (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm, torch.Tensor.bmm)
_SOFTMAX = (F.softmax, torch.softmax, torch.Tensor.softmax)
ACCUMULATE = ("fp16", "fp32", "xnnpack", "xnnpack-arm")
XNNPACK_MODES = ("xnnpack", "xnnpack-arm")


def flushes(accumulate: str) -> bool:
    """Whether the mode flushes FP16 subnormals to zero (ARM's XNNPACK)."""
    return accumulate == "xnnpack-arm"


def _is_float(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in (torch.float32, torch.float64)


def _tensors(obj) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors(o)]
    return []


def _map_floats(obj, fn):
    if _is_float(obj):
        return fn(obj)
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_map_floats(o, fn) for o in obj)
    if isinstance(obj, list):
        return [_map_floats(o, fn) for o in obj]
    return obj


def _layer_norm(x, shape, weight=None, bias=None, eps=1e-5):
    """layer_norm as the elementwise ops of its .tflite lowering (run under the mode: each op is rounded)."""
    dims = tuple(range(-len(shape), 0))
    d = x - x.mean(dim=dims, keepdim=True)
    y = d * torch.rsqrt((d * d).mean(dim=dims, keepdim=True) + eps)
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


@dataclass
class OverflowEvent:
    layer: str
    op: str
    count: int


@dataclass
class _Trace:
    """What one run saw: the module being run, the largest |op output| per module, and overflow events."""

    stack: list[str] = field(default_factory=lambda: ["model"])
    max_abs: dict[str, float] = field(default_factory=dict)
    max_abs_op: dict[str, float] = field(default_factory=dict)  # by op kind (linear, matmul, softmax, mul...)
    events: list[OverflowEvent] = field(default_factory=list)


class Fp16Mode(TorchFunctionMode):
    """Rounds every op's result to float16 (``simulate=True``) or only observes magnitudes (``simulate=False``)."""

    def __init__(self, trace: _Trace, simulate: bool, accumulate: str = "fp16", block: int = 32):
        super().__init__()
        if accumulate not in ACCUMULATE:
            raise ValueError(f"accumulate must be one of {', '.join(ACCUMULATE)}, not {accumulate!r}")
        self.trace, self.simulate, self.accumulate, self.block = trace, simulate, accumulate, block
        self.flush = flushes(accumulate)
        self.paused = False

    @contextlib.contextmanager
    def pause(self):
        self.paused, was = True, self.paused
        try:
            yield
        finally:
            self.paused = was

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if self.paused or name in _EXACT:
            return func(*args, **kwargs)
        if not self.simulate:
            out = func(*args, **kwargs)
            self._observe(name, out)
            return out
        out = self._compute(func, name, args, kwargs)
        if name in _IN_PLACE_DUNDER or (name.endswith("_") and not name.startswith("__")):
            target = args[0]
            if _is_float(target):
                target.copy_(self._round(target))
            out = target if name != "__setitem__" else out
        else:
            out = _map_floats(out, self._round)
        self._check(name, args, kwargs, out)
        return out

    def _round(self, t: torch.Tensor) -> torch.Tensor:
        return round_fp16(t, self.flush)

    def _compute(self, func, name, args, kwargs):
        if func is F.layer_norm or func is torch.layer_norm:
            with self:
                return _layer_norm(*args, **kwargs)
        if self.accumulate in XNNPACK_MODES:
            if func is F.linear:
                return kernels.linear_fma(*args, **kwargs, flush=self.flush)
            if func is F.conv2d:
                return kernels.conv2d_fma(*args, **kwargs, flush=self.flush)
            if func in _MATMULS:
                return kernels.matmul_fma(*args, **kwargs, flush=self.flush)
            if func in _SOFTMAX:
                return kernels.softmax_lanes(*args, **kwargs, flush=self.flush)
        if self.accumulate == "fp16":
            if func is F.linear:
                return kernels.linear_blocked(self.block, *args, **kwargs)
            if func is F.conv2d:
                return kernels.conv2d_blocked(self.block, *args, **kwargs)
            if func in _MATMULS:
                return kernels.matmul_blocked(self.block, *args, **kwargs)
        return func(*args, **kwargs)

    def _observe(self, name, out) -> None:
        layer = self.trace.stack[-1]
        for t in _tensors(out):
            if _is_float(t) and t.numel():
                peak = _peak(t)
                if peak > self.trace.max_abs.get(layer, 0.0):
                    self.trace.max_abs[layer] = peak
                kind = name.strip("_") or "op"
                if peak > self.trace.max_abs_op.get(kind, 0.0):
                    self.trace.max_abs_op[kind] = peak

    def _check(self, name, args, kwargs, out) -> None:
        outs = [t for t in _tensors(out) if _is_float(t) and t.numel()]
        if all(math.isfinite(_peak(t)) for t in outs):
            return
        inputs = [t for t in _tensors(list(args)) + _tensors(kwargs) if _is_float(t) and t.numel()]
        if all(math.isfinite(_peak(t)) for t in inputs):
            bad = sum(int((~torch.isfinite(t)).sum()) for t in outs)
            self.trace.events.append(OverflowEvent(self.trace.stack[-1], name or "op", bad))


def _peak(t: torch.Tensor) -> float:
    """max |t| in one pass; inf or nan when t holds any."""
    lo, hi = torch.aminmax(t.detach())
    return max(-float(lo), float(hi)) if not (lo.isnan() or hi.isnan()) else float("nan")


@dataclass
class Fp16Prediction:
    """The verdict for one model and input set; ``as_entry()`` is the artifact entry's ``fp16_compute``."""

    rel_l2: float
    pearson: float
    overflow_layers: list[str]
    first_bad_layer: str | None
    needs_enforce_f32: bool
    max_abs_fp32: float
    max_abs_layer: str | None
    events: list[OverflowEvent]
    worst_layers: list[tuple[str, float]]
    inputs: int
    tol: float
    accumulate: str
    block: int
    mean_abs_worst: float = float("nan")  # the worst input's mean |FP16 - FP32|, in the output's unit
    figures: dict = field(default_factory=dict)  # parity figures vs FP32 (core.metrics.summarize), gate keys
    max_abs_by_op: dict = field(default_factory=dict)  # the FP32 run's largest |output| per op kind
    per_image: list = field(default_factory=list)
    fp32_outputs: list = field(default_factory=list, repr=False)  # the FP32 run's output per input (not reported)

    def as_entry(self) -> dict:
        return {
            "rel_l2": self.rel_l2, "pearson": self.pearson, "overflow_layers": self.overflow_layers,
            "first_bad_layer": self.first_bad_layer, "needs_enforce_f32": self.needs_enforce_f32,
            "max_abs_fp32": self.max_abs_fp32, "max_abs_layer": self.max_abs_layer,
            "fp16_headroom": FP16_MAX / self.max_abs_fp32 if self.max_abs_fp32 > 0 else None,
            "overflow_ops": [vars(e) for e in self.events[:10]],
            "worst_layers": [{"layer": n, "rel_l2": e} for n, e in self.worst_layers],
            "inputs": self.inputs, "tolerance": self.tol, "mean_abs_worst": self.mean_abs_worst,
            "accumulate": self.accumulate, "figures": self.figures, "per_image": self.per_image,
            "headroom_by_op": headroom_table(self.max_abs_by_op),
            "method": method_text(self.accumulate, self.block),
        }


def headroom_table(max_abs_by_op: dict[str, float]) -> list[dict]:
    """[{"op", "max_abs", "headroom"}] largest first: FP16's maximum (65504) over the largest magnitude each op kind
    reached in FP32 (below 1: that op overflows FP16)."""
    rows = sorted(max_abs_by_op.items(), key=lambda kv: -kv[1])
    return [{"op": op, "max_abs": v, "headroom": FP16_MAX / v if v > 0 else None} for op, v in rows]


def method_text(accumulate: str, block: int = 32) -> str:
    what = {"fp16": f"fp16 accumulation in matrix products (blocks of {block} summed in float32), as a GPU "
                    "under its default FP16 precision",
            "fp32": "fp32 accumulation in matrix products (FP16 tensors, FP32 accumulation)",
            "xnnpack": "XNNPACK's f16 kernels: one FP16 fused multiply-add per product in matrix products and "
                       f"convolutions, softmax summed in {kernels.XNNPACK_LANES} FP16 lanes"}
    what["xnnpack-arm"] = what["xnnpack"] + ", FP16 subnormals flushed to zero as on ARM"
    what = what[accumulate]
    return f"PyTorch on CPU, every op output rounded to float16, {what}; vs the same model in float32"


def _named_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(name or "model", m) for name, m in model.named_modules()]


def _hook(model: nn.Module, trace: _Trace, mode: Fp16Mode, on_output) -> list:
    """Keep ``trace.stack`` on the running module and pass each module output to ``on_output(key, out)``."""
    calls: dict[str, int] = {}
    handles = []
    for name, module in _named_modules(model):
        def pre(_m, _a, name=name):
            trace.stack.append(name)

        def post(_m, _a, out, name=name):
            trace.stack.pop()
            calls[name] = calls.get(name, 0) + 1
            with mode.pause():
                on_output((name, calls[name]), out)

        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    return handles


def _floats(out) -> list[torch.Tensor]:
    return [t for t in _tensors(out) if _is_float(t)]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def fp16_copy(model: nn.Module, flush: bool = False) -> nn.Module:
    """A deep copy whose parameters and buffers are rounded to float16 (kept in float32 storage), subnormals set to
    0 with ``flush`` (ARM's XNNPACK reads them as 0); those of modules marked ``keep_fp32`` (an fp16 file's FP32
    part, ``export.fp32_head``) stay as they are."""
    sim = copy.deepcopy(model).eval()
    kept = {id(t) for m in sim.modules() if getattr(m, "keep_fp32", False) for t in (*m.parameters(), *m.buffers())}
    with torch.no_grad():
        for t in list(sim.parameters()) + list(sim.buffers()):
            if _is_float(t) and id(t) not in kept:
                t.copy_(round_fp16(t, flush))
    return sim


def _reference_run(model: nn.Module, x: torch.Tensor, trace: _Trace, store_limit: int):
    """FP32 run: the output, and module outputs by (name, call) up to ``store_limit`` bytes."""
    stored: dict = {}
    budget = [store_limit]
    last: list = [None, None]  # a module often returns its child's output object: store it once

    def keep(key, out):
        outs = _floats(out)
        if last[0] is not None and _same(outs, last[0]):
            stored[key] = last[1]
            return
        size = sum(t.numel() * t.element_size() for t in outs)
        if outs and size <= budget[0]:
            budget[0] -= size
            stored[key] = [t.detach().clone() for t in outs]
            last[:] = outs, stored[key]

    mode = Fp16Mode(trace, simulate=False)
    handles = _hook(model, trace, mode, keep)
    try:
        with mode:
            return model(*_args(x)), stored
    finally:
        for h in handles:
            h.remove()


def _args(x) -> tuple:
    """A model's positional inputs: one tensor, or a tuple of them (image and prompt)."""
    return x if isinstance(x, tuple) else (x,)


def _in_scope(name: str, scopes) -> bool:
    return any(name == s or name.startswith(s + ".") for s in scopes)


def _keep_fp32(sim: nn.Module, mode: Fp16Mode, scopes) -> list:
    """Hooks that pause the FP16 simulation inside the modules named by ``scopes`` (prefixes of module names), and
    from each module marked ``fp32_onward`` (``export.fp32_head.Fp32Entry``) to the end of the run."""
    handles, paused = [], []
    for module in sim.modules():
        if getattr(module, "fp32_onward", False):
            handles.append(module.register_forward_pre_hook(lambda _m, _a: setattr(mode, "paused", True)))
    for name, module in _named_modules(sim):
        if not _in_scope(name, scopes) or _in_scope(name.rpartition(".")[0], scopes):
            continue

        def pre(_m, _a):
            paused.append(mode.paused)
            mode.paused = True

        def post(_m, _a, _out):
            mode.paused = paused.pop()

        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    return handles


def _simulated_run(sim: nn.Module, x: torch.Tensor, trace: _Trace, stored: dict, layer_err: dict[str, float],
                   accumulate: str, block: int, fp32_scopes=()) -> torch.Tensor:
    """FP16 run: the output; each stored module output's relative L2 error goes into ``layer_err`` (max over calls).
    Modules named in ``fp32_scopes`` compute in FP32 (their inputs stay as FP16 left them)."""
    last: list = [None, None]

    def compare(key, out):
        if key not in stored:
            return
        outs, ref = _floats(out), stored.pop(key)
        err = last[1] if last[0] is not None and _same(outs, last[0]) else _layer_rel_l2(outs, ref)
        last[:] = outs, err
        layer_err[key[0]] = max(layer_err.get(key[0], 0.0), err)

    mode = Fp16Mode(trace, simulate=True, accumulate=accumulate, block=block)
    handles = _keep_fp32(sim, mode, fp32_scopes) + _hook(sim, trace, mode, compare)
    try:
        with mode:
            return sim(*_args(x))
    finally:
        for h in handles:
            h.remove()


def _layer_rel_l2(outs: list[torch.Tensor], refs: list[torch.Tensor]) -> float:
    """Pooled relative L2 of a module's outputs, summed in float64 by torch (numpy's float64 copies of every
    module output cost a fifth of a simulated image)."""
    err = ref = 0.0
    for a, b in zip(outs, refs):
        err += float(torch.sum((a - b).square(), dtype=torch.float64))
        ref += float(torch.sum(b.square(), dtype=torch.float64))
    return root_ratio(err, ref)


def _count_runs(on_layer, before: int, runs: int):
    """``on_layer`` counted over every run: ``before`` runs done of ``runs``."""
    if on_layer is None:
        return None
    return lambda done, layers: on_layer(before * layers + done, runs * layers)


@torch.no_grad()
def simulate_fp16(model: nn.Module, inputs, accumulate: str = "fp16", block: int = 32,
                  tol: float = DEFAULT_TOL, store_limit: int = STORE_LIMIT, fp32_scopes=(),
                  on_layer=None) -> Fp16Prediction:
    """Run ``model`` on each input in FP32 and in simulated FP16 and compare (see the module docstring).

    ``inputs`` is one tensor or a list of tensors. ``needs_enforce_f32`` is True when any op overflowed, the
    output is not finite, or the pooled relative L2 error of the output exceeds ``tol``. ``first_bad_layer``
    is the module of the first overflow, else the first module (in order of completion) whose output is off
    by more than ``tol``. Modules whose names start with one of ``fp32_scopes`` are computed in FP32 (what
    keeping them out of FP16 would buy: ``fp16_ledger``). ``on_layer(done, total)`` is called after each layer of
    each run (two an input: FP32 and FP16; ``runtimes.torch.layers_of``).
    """
    inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
    model = model.eval()
    sim = fp16_copy(model, flush=flushes(accumulate))
    fp32_trace, sim_trace = _Trace(), _Trace()
    layer_err: dict[str, float] = {}
    pairs, fp32_outputs = [], []
    runs = 2 * len(inputs)
    for i, x in enumerate(inputs, 1):
        with layer_progress(model, _count_runs(on_layer, 2 * i - 2, runs)), query_chunks():
            ref, stored = _reference_run(model, x, fp32_trace, store_limit)
        with layer_progress(sim, _count_runs(on_layer, 2 * i - 1, runs)), query_chunks():
            out = _simulated_run(sim, x, sim_trace, stored, layer_err, accumulate, block, fp32_scopes)
        pairs.append((out.double().numpy(), ref.double().numpy()))
        fp32_outputs.append(ref.numpy())
    rel = pooled_rel_l2(pairs)
    per_image = [image_metrics(a, b) for a, b in pairs]
    overflow = list(dict.fromkeys(e.layer for e in sim_trace.events))
    layers = [n for n in layer_err if n != "model"]
    bad = [n for n in layers if layer_err[n] > tol]
    worst = sorted(((n, layer_err[n]) for n in layers), key=lambda p: -p[1])[:5]
    top = max(fp32_trace.max_abs.items(), key=lambda kv: kv[1], default=(None, 0.0))
    return Fp16Prediction(
        rel_l2=rel, pearson=min(pearson(a, b) for a, b in pairs), overflow_layers=overflow,
        first_bad_layer=overflow[0] if overflow else (bad[0] if bad else None),
        needs_enforce_f32=bool(overflow) or not math.isfinite(rel) or rel > tol,
        max_abs_fp32=float(top[1]), max_abs_layer=top[0], events=sim_trace.events, worst_layers=worst,
        inputs=len(inputs), tol=tol, accumulate=accumulate, block=block,
        mean_abs_worst=max(float(abs(a - b).mean()) for a, b in pairs),
        figures=summarize(per_image), per_image=[public(m) for m in per_image],
        max_abs_by_op=dict(fp32_trace.max_abs_op), fp32_outputs=fp32_outputs,
    )
