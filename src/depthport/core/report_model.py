"""The typed view of report.json that its readers use (the card, the snippets, report.html's latency): dataclasses
for the header, each artifact and its sections, built from the JSON by one generic loader, ``load`` (``dump`` is its
inverse, for a section copied into another file).

The dataclasses are the schema: a field's annotation says what it holds, its default what an older or shorter
report means when it lacks the field, so readers use attributes and need no ``.get(key, {})`` of their own.
Alternatives are explicit types: a file's parity is ``Parity | NotMeasured``, its latency ``Latency |
NotMeasured``. The JSON is unchanged (``schema`` writes and validates it); a field this view does not name is
not read. The GPU sections (a .tflite's GPU check, a web folder's runs in a browser) are in ``report_gpu``, and
importable from here.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field

from .report_gpu import (Browser, BrowserRun, Comparison, Fp16Predicted, GpuCheck, GpuCounters,  # re-exported
                         GpuRuntime, OnGpu, PreprocessCheck, RejectedOp, RunInfo, RunTime, Shown, SmallReexport,
                         Violation, WebFiles, WebFp16)
from .schema import UNVERIFIED, Verdict, not_measured_section


@dataclass(frozen=True)
class NotMeasured:
    """A section that holds no figures: why (``not_measured`` or ``error`` in the JSON), and the cause when the
    section names one (``schema.CAUSES``)."""

    reason: str
    cause: str | None = None

    @staticmethod
    def matches(data) -> bool:
        return isinstance(data, dict) and ("not_measured" in data or "error" in data)

    @classmethod
    def from_json(cls, data: dict) -> NotMeasured:
        return cls(str(data.get("not_measured") or data.get("error")), data.get("cause"))


@dataclass(frozen=True)
class Parity:
    """A file against upstream on the verification images (the worst image's figures, the median image's, pooled
    rel. L2); ``vs_eager`` and ``vs_reference_fp64`` the same figures against depthport's eager model and the
    float64 reference where they were computed."""

    images: int | None = None
    pearson_worst: float | None = None
    pearson_median: float | None = None
    rel_l2_pooled: float | None = None
    max_abs: float | None = None
    delta125_worst: float | None = None
    delta125_median: float | None = None
    mean_abs_worst: float | None = None
    mean_abs_median: float | None = None
    reference: str | None = None
    vs_eager: Parity | NotMeasured | None = None
    vs_reference_fp64: Parity | NotMeasured | None = None
    upstream_fp32_vs_fp64: float | None = None
    fp64_error_ratio: float | None = None
    compute: str | None = None
    compute_reason: str | None = None
    parity_images: str | None = None  # "parity on 2 of 6 images": the evidence budget's subset
    fp64_images: str | None = None  # the same for the float64 reference
    skipped: tuple[str, ...] = ()  # figures not measured on request (the float64 comparison switched off)

    @property
    def measured(self) -> bool:
        return self.pearson_worst is not None


@dataclass(frozen=True)
class MacCount:
    reason: str | None = None


@dataclass(frozen=True)
class Latency:
    """One file's timing (``latency_ms``) or one bench record: medians in ms, and its roofline figures."""

    median: float | None = None
    min: float | None = None
    max: float | None = None
    rounds: int | str = "?"
    iters: int | str = "?"
    threads: int | None = None
    runtime: str | None = None
    gmac: float | None = None
    gmac_per_s: float | None = None
    pct_of_peak: float | None = None
    pct_of_mixed_peak: float | None = None
    macs: MacCount = MacCount()


@dataclass(frozen=True)
class Gain:
    """INT8's gain over FP32 on the probe chain: the ratio of the medians, and the paired ratio."""

    median: float | None = None
    paired: float | None = None


@dataclass(frozen=True)
class ProbeKind:
    """One precision's run of the probe chain."""

    what: str = ""
    median_ms: float | None = None
    gmac_per_s: float | None = None


@dataclass(frozen=True)
class Probe:
    """The GEMM probe (``bench.probe.summarize``): the chain, each precision's rate, the FP32 peak, INT8's gain."""

    chain: str | None = None
    gmac: float | None = None
    threads: int | None = None
    kinds: dict[str, ProbeKind] = field(default_factory=dict)
    peak_gmac_per_s: float | None = None
    skipped: str | None = None
    note: str | None = None
    int8_gain: dict[str, Gain] = field(default_factory=dict)


@dataclass(frozen=True)
class Bench:
    machine: Machine | None = None
    probe: Probe = Probe()
    roofline_method: str | None = None
    method: str = ""
    note: str = ""


@dataclass(frozen=True)
class Delegation:
    """How much of a .pte's graph its backend took (``export.executorch``): ops in its subgraphs, ops left on
    portable kernels (by op), the number of subgraphs and the delegated share."""

    delegated: int = 0
    portable: int = 0
    subgraphs: int | None = None
    coverage: float | None = None
    portable_ops: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Headroom:
    op: str
    max_abs: float
    headroom: float | None = None


@dataclass(frozen=True)
class Fp32Accumulation:
    """LiteRT's FP16_WITH_FP32_ACCUM predicted beside plain FP16."""

    rel_l2: float | None = None
    needs_enforce_f32: bool = True


@dataclass(frozen=True)
class OverflowOp:
    """A layer whose op's output overflowed FP16 in the prediction, and how many values did."""

    layer: str = ""
    op: str = ""
    count: int = 0


@dataclass(frozen=True)
class PredictionFigures:
    rel_l2_pooled: float | None = None
    delta125_worst: float | None = None


@dataclass(frozen=True)
class Fp16Prediction:
    """The FP16-compute prediction of the model on the verification images (``fp16.simulate``)."""

    rel_l2: float | None = None
    pearson: float | None = None
    images: tuple[str, ...] = ()
    first_bad_layer: str | None = None
    overflow_layers: tuple[str, ...] = ()
    overflow_ops: tuple[OverflowOp, ...] = ()
    max_abs_fp32: float | None = None
    max_abs_layer: str | None = None
    needs_enforce_f32: bool = False
    headroom_by_op: tuple[Headroom, ...] = ()
    figures: PredictionFigures = PredictionFigures()
    fp16_with_fp32_accum: Fp32Accumulation | None = None


@dataclass(frozen=True)
class Fp16Arithmetic:
    """What judged an fp16 .pte for devices that compute in FP16: measured here, emulated, or predicted."""

    arithmetic: bool | None = None
    mode: str = "unknown"
    evidence: str = "-"
    cpu: str | None = None
    emulated: PredictionFigures | NotMeasured | None = None
    prediction: Fp16Prediction | None = None


@dataclass(frozen=True)
class Scores:
    """Accuracy against ground truth."""

    abs_rel: float | None = None
    delta1: float | None = None
    valid_pixels: int | None = None
    label: str | None = None


@dataclass(frozen=True)
class ShapeParity(Parity):
    """A dynamic-shape file's figures at one of its other shapes, with that shape's FP32 gate."""

    gate: Verdict | None = None


@dataclass(frozen=True)
class MlPackage:
    """The Core ML package written beside a coreml .pte."""

    file: str = ""
    bytes: int = 0


@dataclass(frozen=True)
class Artifact:
    """One written file and everything measured about it."""

    file: str
    target: str = ""
    bytes: int = 0
    status: str = UNVERIFIED
    status_reason: str = ""
    input_shape: tuple[int, ...] = ()
    output_shape: tuple[int, ...] = ()
    backend: str = "xnnpack"
    precision: str = "fp32"
    op_count: int | None = None
    max_tensor_rank: int | None = None
    input_dims: tuple = ()
    runnable_here: bool = True
    mlpackage: MlPackage | None = None
    web: WebFiles | None = None
    browser: Browser | None = None
    shapes_parity: dict[str, ShapeParity] | NotMeasured | None = None
    gpu_check: GpuCheck | None = None
    gpu_runtime: GpuRuntime | None = None
    accuracy: Scores | None = None
    checks: dict[str, Verdict] = field(default_factory=dict)
    parity: Parity | NotMeasured | None = None
    parity_note: str | None = None
    latency_ms: Latency | NotMeasured | None = None
    delegation: Delegation | None = None
    fp16_compute: Fp16Prediction | None = None
    fp16_arithmetic: Fp16Arithmetic | None = None

    @property
    def kind(self) -> str:
        """The file's extension: tflite, pte, onnx."""
        return self.file.rsplit(".", 1)[-1]

    def verdict(self, check: str) -> Verdict | None:
        """The verdict of ``check``, or None when the check does not apply to this file."""
        return self.checks.get(check)

    @property
    def measured_parity(self) -> Parity | None:
        return self.parity if isinstance(self.parity, Parity) and self.parity.measured else None

    @property
    def median_ms(self) -> float | None:
        return self.latency_ms.median if isinstance(self.latency_ms, Latency) else None


@dataclass(frozen=True)
class Units:
    line: str | None = None
    label: str | None = None
    meaning: str | None = None
    metric: bool = False
    max_depth_m: float | None = None
    focal_reference_px: float | None = None
    to_metres: str | None = None


@dataclass(frozen=True)
class WeightsDetail:
    format: str | None = None
    revision: str | None = None
    licence: str | None = None
    licence_note: str | None = None


@dataclass(frozen=True)
class Machine:
    """``core.machine.machine_info()`` as written: where the report was made, or where a bench ran."""

    cpu: str | None = None
    cores: int | None = None
    logical_cpus: int | None = None
    physical_cores: int | None = None
    threads: int | None = None
    arch: str | None = None
    isa: dict[str, bool] | None = None
    isa_source: str | None = None
    os: str | None = None


@dataclass(frozen=True)
class EvidenceBudget:
    line: str | None = None
    images: int = 0
    parity_images: int = 0


@dataclass(frozen=True)
class LedgerEntry:
    rewrite: str
    exact: bool
    rel_l2_step: float | None
    rel_l2_cumulative: float | None
    summary: str


@dataclass(frozen=True)
class Fp32Gate:
    fp64_error_ratio: float | str = "-"


@dataclass(frozen=True)
class Gates:
    fp32: Fp32Gate = Fp32Gate()


@dataclass(frozen=True)
class VerifyRun:
    """How the files were verified: against what, on which images."""

    images: tuple[str, ...] = ()
    reference: str | None = None
    image_source: str | None = None
    preprocess: str | None = None
    delta125: str | None = None


@dataclass(frozen=True)
class Accuracy:
    """Accuracy against ground truth: upstream's, the baselines', and each file's (``Artifact.accuracy``)."""

    reference: Scores = Scores()
    baselines: dict[str, Scores] = field(default_factory=dict)
    meaningful: bool = False
    note: str | None = None
    dataset: str | None = None
    method: str = ""


@dataclass(frozen=True)
class NotShippedBuild:
    """A build that did not earn a slot (the header's ``not_shipped``)."""

    file: str
    reasons: tuple[str, ...] = ()
    precision: str | None = None


@dataclass(frozen=True)
class Report:
    """report.json: the header, then the artifacts."""

    model: str
    input_shape: tuple[int, ...] = ()
    random_weights: bool = False
    weights: str | None = None
    command: str | None = None
    prompt_shape: tuple[int, ...] | None = None
    output: str | None = None
    output_space: str = ""
    output_units: Units | None = None
    normalization: str = ""
    pos_embed_formula: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    machine: Machine = Machine()
    weights_detail: WeightsDetail = WeightsDetail()
    base_model: str | None = None
    base_model_chain: tuple[str, ...] = ()
    rewrites: tuple = ()
    rewrite_ledger: tuple[LedgerEntry, ...] = ()
    rewrite_ledger_hw: tuple[int, ...] | None = None
    gates: Gates = Gates()
    evidence_budget: EvidenceBudget = EvidenceBudget()
    verify: VerifyRun | None = None
    accuracy: Accuracy | None = None
    not_shipped: tuple[NotShippedBuild, ...] = ()
    bench: Bench | None = None
    artifacts: tuple[Artifact, ...] = ()


def load_report(data: dict) -> Report:
    """The typed view of a report.json object (already validated by ``schema.read_report`` where it came from
    a file)."""
    return load(Report, data)


def load(cls, data):
    """``data`` (parsed JSON) as ``cls``: a dataclass from its fields (missing or null ones take their defaults,
    unknown keys are ignored), ``X | None``, ``A | NotMeasured``, ``tuple[X, ...]`` (a bare ``tuple`` of the values
    as they are), ``dict[str, X]``, ``Verdict``, or the value itself for plain types."""
    if data is None:
        return None
    origin, args = typing.get_origin(cls), typing.get_args(cls)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if NotMeasured in options and NotMeasured.matches(data):
            return NotMeasured.from_json(data)
        rest = [a for a in options if a is not NotMeasured]
        if len(rest) == 1 and typing.get_origin(rest[0]) in (tuple, dict):
            return load(rest[0], data)
        structured = [a for a in rest if dataclasses.is_dataclass(a)]
        return load(structured[0], data) if structured and isinstance(data, dict) else data
    if origin is tuple:
        return tuple(load(args[0], v) for v in data)
    if cls is tuple:
        return tuple(data)
    if origin is dict:
        return {k: load(args[1], v) for k, v in data.items()}
    if cls is Verdict:
        return Verdict.from_dict(data)
    if dataclasses.is_dataclass(cls):
        hints = _hints(cls)
        return cls(**{f.name: load(hints[f.name], data[f.name])
                      for f in dataclasses.fields(cls) if data.get(f.name) is not None})
    return data


def dump(value):
    """The JSON form of a value of this model, ``load``'s inverse: ``load(type(x), dump(x)) == x`` (a ``NotMeasured``
    is written as not measured, whichever of ``error`` and ``not_measured`` it was read from; a field a class names in
    ``OMIT_NONE`` is left out when None)."""
    if isinstance(value, Verdict):
        return value.to_dict()
    if isinstance(value, NotMeasured):
        return not_measured_section(value.reason, value.cause)
    if dataclasses.is_dataclass(value):
        omit = getattr(value, "OMIT_NONE", ())
        return {f.name: dump(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.name in omit and getattr(value, f.name) is None)}
    if isinstance(value, (tuple, list)):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    return value


@functools.cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)
