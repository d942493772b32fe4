"""The GEMM probe: this machine's matrix-product peak, measured in the same interleaved run as the files.

The probe is a chain of FULLY_CONNECTED layers alternating 384 -> 1536 -> 384 on 1814 tokens (the MLP shape of
a ViT-S on a 518x686 image: 37 x 49 patches + 1 class token), exported with depthport's LiteRT path. XNNPACK runs
it as large GEMMs back to back, so its GMAC/s is the machine's practical FP32 peak for these shapes; a file's
"% of peak" is its GMAC/s (MACs counted from its graph / its median) over the probe's, both timed in the
same rounds. The same chain quantized by ai-edge-quantizer gives the INT8 figures: ``dynamic_wi8_afp32``
(INT8 weights, activations quantized at run time, what ``litert-int8`` uses) and ``static_wi8_ai8`` (full
integer, calibrated on random inputs); FP32 median / INT8 median is INT8's possible gain on this machine.

The .tflite files are cached in ``cache_folder("probe")``, keyed by the chain's shape and the converter versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cache import cache_folder
from .timing import paired_ratio

KINDS = ("fp32", "int8_dynamic", "int8_static")
KIND_TEXT = {"fp32": "FP32", "int8_dynamic": "dynamic INT8 (dynamic_wi8_afp32)",
             "int8_static": "static INT8 (static_wi8_ai8, calibrated)"}
CALIBRATION_SAMPLES = 4


@dataclass(frozen=True)
class ProbeSpec:
    layers: int = 16
    tokens: int = 1814
    dim: int = 384
    hidden: int = 1536

    @property
    def macs(self) -> int:
        """Every layer is tokens x dim x hidden MACs (384 -> 1536 and 1536 -> 384 alike)."""
        return self.layers * self.tokens * self.dim * self.hidden

    @property
    def key(self) -> str:
        return f"fc{self.layers}_{self.tokens}x{self.dim}x{self.hidden}"

    def describe(self) -> str:
        return f"{self.layers} FULLY_CONNECTED {self.dim}<->{self.hidden} on {self.tokens} tokens"


FULL = ProbeSpec()
SMALL = ProbeSpec(layers=4)  # the export step's short probe: a quarter of the work
SPECS = {"full": FULL, "small": SMALL}


def chain_module(spec: ProbeSpec):
    """(1, 3, tokens, dim/3) -> (1, tokens, dim) through ``spec.layers`` Linear layers, seeded weights.

    The image-shaped input lets ``export_tflite`` (which takes an input H x W) convert it; the reshapes around the
    chain are free (no data movement)."""
    import torch
    from torch import nn

    if spec.dim % 3:
        raise ValueError("probe dim must be divisible by 3 (image-shaped input)")

    class FcChain(nn.Module):
        def __init__(self):
            super().__init__()
            sizes = [spec.dim if i % 2 == 0 else spec.hidden for i in range(spec.layers + 1)]
            self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

        def forward(self, x):
            x = x.reshape(spec.tokens, spec.dim)
            for layer in self.layers:
                x = layer(x)
            return x.reshape(1, spec.tokens, -1)

    torch.manual_seed(0)
    return FcChain().eval()


def input_hw(spec: ProbeSpec) -> tuple[int, int]:
    return spec.tokens, spec.dim // 3


def cache_dir(spec: ProbeSpec) -> Path:
    from ..core.provenance import versions

    v = versions()
    tag = "-".join(v.get(k, "na") for k in ("depthport", "torch", "litert-torch", "ai-edge-quantizer"))
    folder = cache_folder("probe") / f"{spec.key}-{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _calibration(fp32: Path, spec: ProbeSpec) -> dict:
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(fp32)).get_signature_runner()
    name = next(iter(runner.get_input_details()))
    rng = np.random.default_rng(0)
    shape = (1, 3, *input_hw(spec))
    return {"serving_default": [{name: rng.standard_normal(shape).astype(np.float32)}
                                for _ in range(CALIBRATION_SAMPLES)]}


def _static_int8(fp32: Path, spec: ProbeSpec) -> bytes:
    from ai_edge_quantizer import quantizer, recipe

    from ..quiet import native_stderr_muted

    with native_stderr_muted():
        q = quantizer.Quantizer(str(fp32), recipe.static_wi8_ai8())
        calibration = q.calibrate(_calibration(fp32, spec))
        result = q.quantize(calibration, enable_progress_bar=False, enable_progress_report=False)
    return bytes(result.quantized_model)


def probe_files(spec: ProbeSpec = FULL, kinds=KINDS) -> dict[str, Path]:
    """kind -> cached .tflite of the chain (built on first use; the FP32 file always, as the INT8 files' source)."""
    from ..atomic import write_bytes
    from ..export.litert import export_tflite
    from ..quiet import native_stderr_muted

    folder = cache_dir(spec)
    fp32 = folder / "fp32.tflite"
    if not fp32.exists():
        with native_stderr_muted():
            export_tflite(chain_module(spec), input_hw(spec), fp32)
    out = {"fp32": fp32} if "fp32" in kinds else {}
    for kind in (k for k in kinds if k != "fp32"):
        path = folder / f"{kind}.tflite"
        if not path.exists():
            if kind == "int8_dynamic":
                from ai_edge_quantizer import recipe

                from ..export.litert_variants import quantize

                write_bytes(path, quantize(fp32, recipe.dynamic_wi8_afp32()))
            elif kind == "int8_static":
                write_bytes(path, _static_int8(fp32, spec))
        out[kind] = path
    return out


class ChainRunner:
    """LiteRT CompiledModel on the CPU with ``threads`` threads (the options ``runtimes.litert`` uses) that keeps the
    file's input and output dtypes: the full-integer chain takes and returns INT8, as it would in an app that
    feeds it quantized data."""

    runtime = "litert-compiled"

    def __init__(self, path: Path, threads: int):
        from ai_edge_litert.compiled_model import CompiledModel

        from ..core.tflite_graph import read_graph
        from ..runtimes.litert_options import compiled_options

        graph = read_graph(path)
        inp, out = graph.tensors[graph.inputs[0]], graph.tensors[graph.outputs[0]]
        self.path, self.input_shape, self._out_size = Path(path), inp.shape, int(np.prod(out.shape))
        self._dtypes = (np.dtype(inp.dtype.lower()), np.dtype(out.dtype.lower()))
        self._model = CompiledModel.from_file(str(path), options=compiled_options("cpu", threads=threads))
        self._inputs = self._model.create_input_buffers(0)
        self._outputs = self._model.create_output_buffers(0)

    def run(self, x: np.ndarray) -> np.ndarray:
        self._inputs[0].write(np.ascontiguousarray(x, dtype=self._dtypes[0]))
        self._model.run_by_index(0, self._inputs, self._outputs)
        return self._outputs[0].read(self._out_size, self._dtypes[1])


def probe_entries(spec: ProbeSpec, threads: int, kinds=KINDS) -> list:
    """One timing Entry per probe kind (label "probe <kind>"), LiteRT CompiledModel on the CPU."""
    from .timing import Entry, sample_input

    entries = []
    for kind, path in probe_files(spec, kinds).items():
        runner = ChainRunner(path, threads)
        x = sample_input(runner.input_shape)
        entries.append(Entry(f"probe {kind}", runner, np.clip(x * 32, -127, 127) if kind == "int8_static" else x))
    return entries


def summarize(spec: ProbeSpec, records: list[dict], threads: int) -> dict:
    """The probe section: per kind its median/min, GMAC/s; the FP32 peak; INT8's gain over FP32."""
    from .macs import count_macs

    by_kind = {r["label"].removeprefix("probe "): r for r in records if r["label"].startswith("probe ")}
    if "fp32" not in by_kind:
        return {}
    # rates from the MACs counted in each file's graph (equal to spec.macs unless a converter changed the chain)
    files = probe_files(spec, tuple(by_kind))
    counted = {kind: count_macs(files[kind])["total"] for kind in by_kind}
    kinds = {}
    for kind, rec in by_kind.items():
        kinds[kind] = {"what": KIND_TEXT[kind], "median_ms": rec["median"], "min_ms": rec["min"],
                       "gmac": counted[kind] / 1e9, "gmac_per_s": counted[kind] / 1e6 / rec["median"],
                       "gmac_per_s_min": counted[kind] / 1e6 / rec["min"], "round_medians": rec["round_medians"]}
    fp32 = kinds["fp32"]
    out = {"chain": spec.describe(), "gmac": spec.macs / 1e9, "gmac_counted_from_graph": counted["fp32"] / 1e9,
           "threads": threads, "kinds": kinds, "peak_gmac_per_s": fp32["gmac_per_s"],
           "peak_source": "median of the FP32 chain", "int8_gain": {}}
    for kind in ("int8_dynamic", "int8_static"):
        if kind in kinds:
            paired = paired_ratio(fp32, kinds[kind])
            out["int8_gain"][kind] = {"median": fp32["median_ms"] / kinds[kind]["median_ms"], "paired": paired}
    return out
