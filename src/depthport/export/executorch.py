"""ExecuTorch (.pte) targets: XNNPACK fp32 / fp16 / dynamic int8 and Core ML, all from the re-authored model.

Every file takes and returns float32, so the variants are interchangeable. Before export the model is put in its
*backend form* (``backend_form``), which records what it changed:
- the attention's K^T made by one permute (ExecuTorch does not merge the heads' transpose with K's; exact);
- any norm that still subtracts its mean gets the mean as a (1, C) linear (XNNPACK's mean only reduces the
  spatial axes of 4-D tensors; exact);
- fp16 compute: norms pre-scaled into fp16 range (exact scaling), and for XNNPACK, which has no fp16 GELU, the
  tanh GELU written with sigmoid (a declared approximation, < 5e-4 abs).
At lowering, an edge pass turns ``select`` on a size-1 axis into ``view_copy`` (XNNPACK has no select kernel).
"""

from __future__ import annotations

import copy
import math
import os
import shutil
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..atomic import atomic_path
from ..errors import MissingDependency
from ..fp16.kernels import FP16_TINY
from ..fp16.safe import Fp16SafeScaleNorm, full_scale_stream
from ..models.layers import LOGIT_BOUND, PROB_SCALE, Attention, Mlp, Resize, ScaleNorm
from ..models.depth_anything_v3 import CenteredNorm
from ..models.rope import RopeTables, SplitHeadRopeAttention
from .context import ExportContext, artifact_entry
from .delegation import delegation_report
from .fp32_head import half_except_kept, keep_head_fp32, kept_modules
from .split_k import depth_channels_alone, split_reductions


def fp16_norm_scale(dim: int) -> float:
    """1/k, k the power of two nearest sqrt(dim) (as depthport.fp16.safe): exact in binary, and (d/k)^2 overflows
    fp16 only once a centred activation exceeds 256 k (4096 for C = 384) instead of 256."""
    return 2.0 ** -max(0, round(math.log2(math.sqrt(dim))))


class LinearMeanNorm(nn.Module):
    """ScaleNorm with its mean, if it has one (``centered`` norms do not), as a (1, C) linear map: XNNPACK's mean
    only reduces the spatial axes of 4-D tensors.

    With ``fp16_range`` the input is first multiplied by ``fp16_norm_scale(C)``: the norm is scale-invariant, so
    only the epsilon moves (eps * scale^2), and the squared deviations stay finite in fp16. Its means then weigh
    each value by 2^-round(log2(sqrt C)) (1/16 for C = 384) and scale the sum to the mean after: XNNPACK on ARM
    flushes FP16 subnormals to zero, and with weights of 1/C every product of a token with small deviations
    (d^2 / C < 2^-14) vanished, its variance became 0 and the norm returned inf (measured on the emulated
    ARMv8.2-A CPU, ``runtimes.arm64``). sqrt(C) splits the difference: products sqrt(C) times larger, partial
    sums sqrt(C) times closer to FP16's maximum.
    """

    def __init__(self, norm: ScaleNorm | Fp16SafeScaleNorm, fp16_range: bool = False):
        super().__init__()
        dim = norm.avg.shape[1]
        self.centered = getattr(norm, "centered", False)
        if isinstance(norm, Fp16SafeScaleNorm):  # already pre-scaled (the fp16_safe_norm rewrite): keep its scale
            scale, eps = 1.0 / norm.k, norm.eps.detach()
        elif getattr(norm, "stream_scale", 1) != 1:  # its input is already 1/k (the fp16_safe_stream rewrite)
            scale, eps = 1.0, norm.eps.detach()
        else:
            scale = fp16_norm_scale(dim) if fp16_range else 1.0
            eps = norm.eps.detach() * scale**2
        self.register_buffer("avg", norm.avg.detach().clone(), persistent=False)
        self.register_buffer("eps", eps.clone(), persistent=False)
        self.register_buffer("scale", torch.tensor([scale]), persistent=False)
        self.prescale = scale != 1.0
        self.summed = fp16_range
        if self.summed:
            weight = 2.0 ** -round(math.log2(math.sqrt(dim)))
            self.register_buffer("weights", torch.full_like(self.avg, weight), persistent=False)
            self.register_buffer("to_mean", torch.tensor([1.0 / (weight * dim)]), persistent=False)

    # Set by export.split_k: the means as a rank-4 mean, which XNNPACK's f16 kernels accumulate in float32 (its
    # f16 linear accumulates the (1, C) map's C products in FP16).
    grouped_mean = False

    def _mean(self, x: torch.Tensor, eps: torch.Tensor | None) -> torch.Tensor:
        if not self.grouped_mean:
            if not self.summed:
                return F.linear(x, self.avg, eps)
            m = F.linear(x, self.weights) * self.to_mean
            return m if eps is None else m + eps
        m = x.reshape(1, -1, x.shape[-1], 1).mean(dim=(2, 3), keepdim=True).reshape(*x.shape[:-1], 1)
        return m if eps is None else m + eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.prescale:
            x = x * self.scale
        d = x if self.centered else x - self._mean(x, None)
        return x * torch.rsqrt(self._mean(d * d, self.eps))


class AffineLinearMeanNorm(LinearMeanNorm):
    """``models.depth_anything_v3.CenteredNorm`` (a whole LayerNorm: DA3's final encoder norm, mean, gain and bias
    its own) with ``LinearMeanNorm``'s means: its mean over the channels of rank-2 tokens is not XNNPACK's (a
    portable kernel, a second subgraph)."""

    def __init__(self, norm: CenteredNorm, fp16_range: bool = False):
        super().__init__(norm, fp16_range)
        self.weight = nn.Parameter(norm.weight.detach().clone())
        self.bias = nn.Parameter(norm.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.prescale:
            x = x * self.scale
        d = x - self._mean(x, None)
        return d * torch.rsqrt(self._mean(d * d, self.eps)) * self.weight + self.bias


class SigmoidGeluMlp(nn.Module):
    """Mlp with GELU's tanh approximation written as x * sigmoid(x * (a + b x^2)).

    XNNPACK has no fp16 GELU; this form uses only mul/add/sigmoid, which it runs in fp16. The approximation
    differs from exact GELU by < 5e-4, below fp16's own rounding at the magnitudes where it matters.
    """

    def __init__(self, mlp: Mlp):
        super().__init__()
        self.fc1, self.fc2 = mlp.fc1, mlp.fc2
        c = 2 * math.sqrt(2 / math.pi)
        self.register_buffer("a", torch.tensor([c]), persistent=False)
        self.register_buffer("b", torch.tensor([c * 0.044715]), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        return self.fc2(h * torch.sigmoid(h * (self.a + self.b * (h * h))))


class Fp16IO(nn.Module):
    """Runs ``model`` in fp16 between fp32 input casts (the image, and a prompted model's prompt) and an fp32 output
    cast; modules marked ``keep_fp32`` (``fp32_head``) stay float32."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = half_except_kept(model)

    def forward(self, x: torch.Tensor, *extra: torch.Tensor) -> torch.Tensor:
        return self.model(x.half(), *(e.half() for e in extra)).float()


def backend_form(model: nn.Module, *, fp16_range_norm: bool = False, sigmoid_gelu: bool = False,
                 fp16_io: bool = False, split_k: int | None = None, conv_split_k: int | None = None,
                 prob_scale: float | None = None, lift_weights: bool = False,
                 fp32_head: bool = False) -> tuple[nn.Module, list[str]]:
    """(a copy of ``model`` in the form the ExecuTorch targets export, the changes made to it).

    ``fp16_range_norm`` pre-scales the norms (for fp16 compute), ``sigmoid_gelu`` uses the sigmoid-form tanh GELU
    (for XNNPACK fp16), ``fp16_io`` runs the copy in fp16 between float32 casts, ``split_k`` cuts every long
    reduction into chunks of that many products, convolutions' larger than 1x1 into chunks of ``conv_split_k``
    (default the same)
    (``split_k.split_reductions``: XNNPACK accumulates in FP16), ``prob_scale`` computes the attention weights that
    many times larger and the output projections' weights that many times smaller (``models.layers.scaled_softmax``:
    XNNPACK on ARM flushes small weights to zero), ``lift_weights`` scales up the layers that hold weights in FP16's
    subnormal range (``lift_small_weights``), ``fp32_head`` keeps the depth head in FP32 (``fp32_head``; with
    ``fp16_io``, a second XNNPACK subgraph).
    """
    out = copy.deepcopy(model).eval()
    counts = {"mean": 0, "norm": 0, "gelu": 0, "keys": 0, "clamped": 0, "affine": 0, "rope": 0}
    stream = full_scale_stream(out) if fp16_range_norm else 1
    for attn in (m for m in out.modules() if isinstance(m, Attention)):
        attn.keys_in_one_permute = True
        counts["keys"] += 1
    if hasattr(out, "range_by_pooling"):
        out.range_by_pooling = True
    for attn in (m for m in out.modules() if getattr(m, "guarded", False)):
        attn.logit_mode = "clamp" if fp16_range_norm else "scale"
        counts["clamped"] += fp16_range_norm
    for parent in list(out.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, Fp16SafeScaleNorm) or (
                    isinstance(child, ScaleNorm) and (fp16_range_norm or not getattr(child, "centered", False))):
                norm = LinearMeanNorm(child, fp16_range_norm)
                counts["mean"] += not norm.centered
                counts["norm"] += norm.prescale
                setattr(parent, name, norm)
            elif isinstance(child, CenteredNorm):
                setattr(parent, name, AffineLinearMeanNorm(child, fp16_range_norm))
                counts["affine"] += 1
            elif sigmoid_gelu and isinstance(child, Mlp):
                setattr(parent, name, SigmoidGeluMlp(child))
                counts["gelu"] += 1
    for tables in (m for m in out.modules() if isinstance(m, RopeTables)):
        tables.rotate_by_linear()
        counts["rope"] += 1
    depth_channels_alone(out)
    scaled = _scale_attention_weights(out, prob_scale) if prob_scale else 0
    changes = []
    if counts["affine"]:
        changes.append(f"{counts['affine']} full LayerNorm(s) (DA3's final encoder norm) with their means as a (1, C) "
                       "linear, which XNNPACK runs on rank-2 tokens (exact)")
    if counts["rope"]:
        changes.append("RoPE's rotate-half as a linear map of the head axis instead of a matmul that ExecuTorch "
                       "broadcasts with expand_copy, which XNNPACK does not run (exact)")
    if scaled:
        changes.append(f"{scaled} attention softmaxes as {prob_scale:g} x softmax from max pooling, exp, a sum and a "
                       f"division, their output projections' weights / {prob_scale:g} (exact in real arithmetic): "
                       "XNNPACK on ARM flushes attention weights below 2^-14 to zero, and now only those below "
                       f"2^-14 / {prob_scale:g}")
    if stream != 1:
        changes.append(f"the residual stream at its own scale again (fp16_safe_stream undone, x{stream}: exact), its "
                       "norms pre-scaled instead: XNNPACK on ARM flushes FP16 subnormals, and a stream "
                       f"{stream} times smaller lost its small writes")
    if getattr(out, "range_by_pooling", False):
        changes.append("the prompt's minimum and maximum as max pooling over the whole map, which XNNPACK runs (exact)")
    if counts["keys"]:
        changes.append(f"{counts['keys']} attention keys transposed to (heads, head_dim, N) in one permute, where "
                       "ExecuTorch lowers the heads' transpose and K's as two XNNPACK transposes (exact)")
    if counts["clamped"]:
        changes.append(f"{counts['clamped']} guarded attention logits clamped to +-{LOGIT_BOUND:g} instead of "
                       "shifted by their row max, which XNNPACK cannot reduce (exact while |Q·Kᵀ| < the bound; "
                       "saturating beyond it in FP16)")
    if counts["mean"]:
        changes.append(f"{counts['mean']} norm means as a (1, C) linear (exact)")
    if counts["norm"]:
        changes.append(f"{counts['norm']} norm inputs pre-scaled by 1/k, k = power of two near sqrt(C), for fp16 "
                       "range (exact scaling)")
    if counts["gelu"]:
        changes.append(f"{counts['gelu']} GELUs as tanh approximation x*sigmoid(x*(a+b*x^2)) (approximation, "
                       "< 5e-4 abs)")
    if fp32_head and keep_head_fp32(out):
        changes.append("the depth head in FP32 (its inputs cast up once, its weights float32): its full-resolution "
                       "convolutions were the split file's FP16 error; a second XNNPACK subgraph, FP32, behind "
                       "portable casts (exact)")
    if split_k:
        done = split_reductions(out, split_k, conv_split_k)
        convs = f" ({conv_split_k} for convolutions larger than 1x1)" if conv_split_k not in (None, split_k) else ""
        changes.append(f"reductions longer than {split_k} products{convs} in chunks summed by a float32-accumulated mean "
                       f"({done['linear']} linears, {done['conv']} convolutions, {done['matmul']} attentions, "
                       f"{done['mean']} norms): exact but for float32 reassociation; XNNPACK's FP16 accumulation "
                       "error ~sqrt(chunk) instead of ~sqrt(K)")
    lifted = lift_small_weights(out) if lift_weights else 0
    if lifted:
        changes.append(f"{lifted} layers with weights below 2^-14 (FP16 subnormals, which XNNPACK on ARM reads as 0): "
                       f"weights and bias x 2^k up to max |w| < {LIFT_LIMIT:g}, output x 2^-k (exact)")
    if fp16_io:
        changes.append("fp16 compute between float32 input/output casts")
    return (Fp16IO(out) if fp16_io else out), changes


@torch.no_grad()
def _scale_attention_weights(model: nn.Module, scale: float) -> int:
    """Every attention's weights ``scale`` times larger (``models.layers.scaled_softmax``), its output projection's
    weights ``scale`` times smaller. Returns how many."""
    found = 0
    for attn in model.modules():
        if isinstance(attn, (Attention, SplitHeadRopeAttention)):
            attn.register_buffer("prob_scale", torch.tensor([float(scale)]), persistent=False)
            attn.scaled_weights = True
            attn.proj.weight.mul_(1.0 / scale)
            found += 1
    return found


# lift_small_weights brings a layer's largest weight up to [LIFT_LIMIT / 2, LIFT_LIMIT): DA3-Small 448x252, camera,
# predicted on ARM: 2.42e-3 (3.86e-3 without; 2.46e-3 at 1/32, 2.43e-3 at 1).
LIFT_LIMIT = 0.125


class _Lifted:
    """A layer whose weights and bias are 2^k larger: its output times ``out_scale`` = 2^-k, a one-element buffer (a
    Python scalar would leave the XNNPACK delegate). Mixed into the layer's own class, so that the layer keeps its
    name, type and attributes."""

    def forward(self, *args):
        return super().forward(*args) * self.out_scale


_LIFTED: dict[type, type] = {}


def _lifted_class(cls: type) -> type:
    if cls not in _LIFTED:
        _LIFTED[cls] = type(f"Lifted{cls.__name__}", (_Lifted, cls), {"__module__": __name__})
    return _LIFTED[cls]


@torch.no_grad()
def lift_small_weights(model: nn.Module, limit: float = LIFT_LIMIT) -> int:
    """Every layer with a weight matrix of which some nonzero entries lie below 2^-14 (FP16 subnormals, flushed to
    zero by XNNPACK on ARM): weights and bias times 2^k, the largest k with max |w| 2^k < ``limit``, and its output
    times 2^-k (``_Lifted``). Exact in real arithmetic (powers of two). Returns how many layers."""
    found = 0
    kept = kept_modules(model)
    for child in list(model.modules()):
        w = getattr(child, "weight", None)
        if isinstance(child, _Lifted) or id(child) in kept or not isinstance(w, nn.Parameter) or w.dim() < 2:
            continue
        a = w.abs()
        if not bool(((a > 0) & (a < FP16_TINY)).any()):
            continue
        k = int(math.floor(math.log2(limit / float(a.max()))))
        if k < 1:
            continue
        w.mul_(2.0 ** k)
        if getattr(child, "bias", None) is not None:
            child.bias.mul_(2.0 ** k)
        child.register_buffer("out_scale", torch.tensor([2.0 ** -k]), persistent=False)
        child.__class__ = _lifted_class(type(child))
        found += 1
    return found


# Backend form per target.
FORMS = {
    "fp32": {},
    # The encoder in FP16 with reductions longer than 128 products in chunks (export.split_k), the depth head in FP32
    # (export.fp32_head): 1.2x-1.3x PyTorch half's error on FP16 arithmetic for 1.1x-1.4x the time of the file
    # without them (README, "The fp16 .pte files at the FP16 floor").
    "xnnpack-fp16": {"fp16_range_norm": True, "sigmoid_gelu": True, "fp16_io": True, "split_k": 128,
                     "prob_scale": PROB_SCALE, "lift_weights": True, "fp32_head": True},
    "coreml": {"fp16_range_norm": True},
}
# The finest cut: chunks of 16 products (36 for convolutions larger than 1x1), under PyTorch half's error, for 2x-4x
# the time of xnnpack-fp16.
FORMS["xnnpack-fp16-split"] = {**FORMS["xnnpack-fp16"], "split_k": 16, "conv_split_k": 36}


def quantize_dynamic_int8(model: nn.Module, *samples: torch.Tensor) -> nn.Module:
    """XNNPACK dynamic int8 for the linear layers: per-channel symmetric int8 weights, activations quantized per call.

    Norm statistics and resize band matrices are exact arithmetic, not learned weights: they stay fp32. So do the
    convolutions: in executorch 1.5.1 XNNPACK's ChannelsLastTaggedReshapePass walks a dynamically quantized conv's
    input back past its producers (``input_to_nhwc``, "Trace back to original source node") and fails on the first
    non-4-D tensor it meets, which every DPT-head conv reaches through the 2-D token tensors.
    """
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    for keep in (ScaleNorm, LinearMeanNorm, Resize, nn.Conv2d):
        quantizer.set_module_type(keep, None)
    graph = torch.export.export(model, samples).module()
    prepared = prepare_pt2e(graph, quantizer)
    prepared(*samples)
    return convert_pt2e(prepared)


def lower_xnnpack(module: nn.Module, *samples: torch.Tensor):
    """torch.export -> to_edge_transform_and_lower(XNNPACK) -> (ExecuTorch program manager, delegation report).
    ``samples``: the image, then a prompted model's prompt (the program's inputs, in that order)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.utils.configs import (
        get_transform_passes,
        get_xnnpack_edge_compile_config,
        get_xnnpack_executorch_backend_config,
    )
    from executorch.exir import to_edge_transform_and_lower

    program = torch.export.export(module, samples)
    edge = to_edge_transform_and_lower(
        program, transform_passes=get_transform_passes() + [squeeze_select_pass()], partitioner=[XnnpackPartitioner()],
        compile_config=get_xnnpack_edge_compile_config())
    report = delegation_report(edge.exported_program().graph_module)
    return edge.to_executorch(get_xnnpack_executorch_backend_config()), report


def squeeze_select_pass():
    """An edge pass: select on a size-1 axis (x[0] of a (1, ...) tensor) becomes view_copy, which XNNPACK runs,
    instead of select_copy, which it does not. Built on call so that importing this module skips executorch."""
    from executorch.exir.dialects._ops import ops as exir_ops
    from executorch.exir.pass_base import ExportPass, PassResult

    class SqueezeSelectPass(ExportPass):
        def call(self, graph_module):
            changed = False
            for node in list(graph_module.graph.nodes):
                if node.op != "call_function" or node.target != exir_ops.edge.aten.select_copy.int:
                    continue
                src, dim = node.args[0], node.args[1]
                if src.meta["val"].shape[dim] != 1:
                    continue
                with graph_module.graph.inserting_before(node):
                    view = graph_module.graph.call_function(
                        exir_ops.edge.aten.view_copy.default, (src, list(node.meta["val"].shape)))
                view.meta = dict(node.meta)
                node.replace_all_uses_with(view)
                graph_module.graph.erase_node(node)
                changed = True
            if changed:
                graph_module.recompile()
            return PassResult(graph_module, changed)

    return SqueezeSelectPass()


def write_pte(manager, path: Path) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            manager.write_to_file(f)
    return path


def _samples(ctx: ExportContext) -> tuple[torch.Tensor, ...]:
    """The program's sample inputs: the image, and for a prompted model the prompt (metres, 1 to 5 m)."""
    from ..models.prompt_depth_anything import sample_prompt

    image, prompt_hw = torch.zeros(1, 3, *ctx.built.input_hw), ctx.built.prompt_hw
    return (image, sample_prompt(prompt_hw)) if prompt_hw else (image,)


def _xnnpack(ctx: ExportContext, name: str, precision: str, module: nn.Module, changes: list[str], **extra) -> dict:
    manager, report = lower_xnnpack(module, *_samples(ctx))
    path = write_pte(manager, ctx.out_dir / f"{ctx.stem}_{name.replace('-', '_')}.pte")
    ctx.files[name] = path
    return artifact_entry(ctx, path, name, precision=precision, runtime="executorch", backend="xnnpack",
                          delegation=report, backend_form=changes, **extra)


def xnnpack_fp32(ctx: ExportContext) -> dict:
    return _xnnpack(ctx, "xnnpack-fp32", "fp32", *backend_form(ctx.built.model, **FORMS["fp32"]))


def xnnpack_fp16(ctx: ExportContext) -> dict:
    return _xnnpack(ctx, "xnnpack-fp16", "fp16", *backend_form(ctx.built.model, **FORMS["xnnpack-fp16"]))


def xnnpack_fp16_split(ctx: ExportContext) -> dict:
    return _xnnpack(ctx, "xnnpack-fp16-split", "fp16", *backend_form(ctx.built.model, **FORMS["xnnpack-fp16-split"]))


def xnnpack_int8(ctx: ExportContext) -> dict:
    module, changes = backend_form(ctx.built.model, **FORMS["fp32"])
    return _xnnpack(ctx, "xnnpack-int8", "int8", quantize_dynamic_int8(module, *_samples(ctx)), changes,
                    quantization="XNNPACKQuantizer dynamic int8 activations, per-channel symmetric int8 weights on the "
                                 "linear layers; convolutions, norms and resizes kept fp32")


# ----------------------------------------------------------------------------------------------------------- Core ML

COREML_TARGET = "iOS17"


def _coremltools():
    try:
        import coremltools as ct
    except ImportError as exc:
        raise MissingDependency("coremltools", "the coreml target") from exc
    return ct


def lower_coreml(module: nn.Module, *samples: torch.Tensor):
    """Core ML partitioner with fp16 compute; returns (program manager, delegation report)."""
    ct = _coremltools()
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge_transform_and_lower

    specs = CoreMLBackend.generate_compile_specs(
        compute_precision=ct.precision.FLOAT16, compute_unit=ct.ComputeUnit.ALL,
        minimum_deployment_target=getattr(ct.target, COREML_TARGET))
    edge = to_edge_transform_and_lower(torch.export.export(module, samples),
                                       partitioner=[CoreMLPartitioner(compile_specs=specs)])
    return edge.to_executorch(), delegation_report(edge.exported_program().graph_module)


def convert_mlpackage(module: nn.Module, *samples: torch.Tensor):
    """coremltools ML Program (fp16 compute, float32 inputs 'image' and a prompted model's 'prompt', output
    'depth')."""
    import numpy as np

    ct = _coremltools()
    program = torch.export.export(module, samples).run_decompositions({})
    return ct.convert(program, convert_to="mlprogram", compute_precision=ct.precision.FLOAT16,
                      minimum_deployment_target=getattr(ct.target, COREML_TARGET),
                      inputs=[ct.TensorType(name=name, shape=tuple(s.shape), dtype=np.float32)
                              for name, s in zip(("image", "prompt"), samples)],
                      outputs=[ct.TensorType(name="depth", dtype=np.float32)])


def mlpackage_summary(mlmodel) -> dict:
    """Op histogram (constants excluded) and I/O types of a converted ML Program."""
    from collections import Counter

    from coremltools.proto.FeatureTypes_pb2 import ArrayFeatureType

    spec = mlmodel.get_spec()
    ops = Counter(op.type for fn in spec.mlProgram.functions.values()
                  for block in fn.block_specializations.values() for op in block.operations if op.type != "const")
    def io(features):
        return {f.name: {"shape": list(f.type.multiArrayType.shape),
                         "dtype": ArrayFeatureType.ArrayDataType.Name(f.type.multiArrayType.dataType).lower()}
                for f in features}

    return {"op_count": sum(ops.values()), "op_histogram": dict(sorted(ops.items())),
            "inputs": io(spec.description.input), "outputs": io(spec.description.output)}


def save_mlpackage(mlmodel, path: Path) -> Path:
    """Write the .mlpackage folder beside ``path`` and swap it in, so a failure never leaves half a package."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        staged = tmp_dir / path.name
        mlmodel.save(str(staged))
        if path.exists():
            shutil.rmtree(path)
        os.replace(staged, path)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return path


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def coreml(ctx: ExportContext) -> dict:
    """Core ML through ExecuTorch (.pte) and coremltools (.mlpackage). Neither runs on Linux: built and checked
    for structure here, parity measured on Apple hardware only."""
    from ..quiet import native_stderr_muted
    from .litert import verbose

    module, changes = backend_form(ctx.built.model, **FORMS["coreml"])
    samples = _samples(ctx)
    with native_stderr_muted(not verbose()):  # coremltools' progress bars and version warnings
        manager, report = lower_coreml(module, *samples)
        mlmodel = convert_mlpackage(module, *samples)
    path = write_pte(manager, ctx.out_dir / f"{ctx.stem}_coreml.pte")
    package = save_mlpackage(mlmodel, ctx.out_dir / f"{ctx.stem}_coreml.mlpackage")
    ctx.files["coreml"] = path
    return artifact_entry(
        ctx, path, "coreml", precision="fp16", runtime="executorch", backend="coreml", delegation=report,
        backend_form=changes,
        coreml={"compute_precision": "float16", "compute_units": "ALL", "minimum_deployment_target": COREML_TARGET},
        mlpackage={"file": package.name, "bytes": _tree_bytes(package), **mlpackage_summary(mlmodel)},
        runnable_here=False,
        parity_note="Core ML runs only on Apple platforms: parity was not measured on this machine")

