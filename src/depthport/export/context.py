"""What every export stage reads and writes: the built model, the output folder, typed options, the files."""

from __future__ import annotations

import contextlib
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..build import Built
from ..core.evidence_budget import EvidenceBudget, evidence_budget
from ..core.evidence_cache import EvidenceCache, weights_digest
from ..rewrites.ledger import ledger_rewrites
from ..scratch import process_folder


@dataclass(kw_only=True)
class StageOptions:
    """Options the stages read (the CLI's export flags)."""

    images: str | None = None  # folder of verification images (default: scikit-image's natural images)
    threads: int = 2
    skip: frozenset[str] = frozenset()  # stages skipped on request: ledger, verify, bench, report, card
    gates: dict | list | None = None  # parity-gate overrides (verify.gates.thresholds)
    no_fp64: bool = False  # no float64 reference: FP32 files are then unverified
    no_cache: bool = False  # evidence computed afresh, not read from (or kept in) core.evidence_cache
    run_gpu: bool = False  # the real LiteRT GPU accelerator (SwiftShader without a GPU) decides the GPU verdict
    fp16_sim: bool = True  # the FP16-compute prediction
    fp16_arm64: bool = False  # fp16 .pte files also measured on the emulated ARMv8.2-A CPU (runtimes.arm64)
    fp16_accumulate: str = "fp16"  # GPU FP16-compute prediction's accumulation: "fp16" or "fp32" (fp16_sim.ACCUMULATE)
    int8_keep_float: str | None = None  # regex of op scopes left float in INT8 files (default INT8_KEEP_FLOAT)
    probe: bool = True  # the GEMM probe of the bench stage (its % of peak)
    dynamic_shapes: tuple | None = None  # (H, W) shapes an onnx-dynamic file is verified at (default: 3, see onnx.py)
    web_fast_shaders: bool = False  # browser runs: Dawn's disable_workgroup_init (faster on SwiftShader; reported)
    evidence_images: int | None = None  # images for the float64 reference and FP16 prediction (0: all; None: budget)
    eager: bool = True  # depthport's own eager model compared too (`depthport verify --no-eager`: not)
    convert_in_children: bool | None = None  # conversions in child processes (export.children); None: decided there

    def __post_init__(self):
        self.skip = frozenset(self.skip)

    def skips(self, stage: str) -> bool:
        """Whether ``stage`` (ledger, verify, bench, report, card) was skipped on request."""
        return stage in self.skip


# Set in a thread whose work shows no progress (``ExportContext.unseen``).
_UNSEEN = threading.local()


@dataclass
class ExportContext:
    """One export: ``files`` maps each target to the file it wrote (updated when a file moves to not-shipped/)."""

    built: Built
    out_dir: Path
    stem: str
    options: StageOptions = field(default_factory=StageOptions)
    files: dict[str, Path] = field(default_factory=dict)
    fp32_source: Path | None = None  # the FP32 .tflite the LiteRT variants are made from
    small: dict = field(default_factory=dict)  # the small re-export's model and files (export.small), made once
    # FP16-compute predictions by accumulation mode ("xnnpack:<target>" per fp16 .pte target), computed once each
    fp16_predictions: dict[str, dict] = field(default_factory=dict)
    # depthport's model's own FP32 outputs by image, from the FP16-compute prediction's FP32 runs: verify's eager ones
    eager_outputs: dict = field(default_factory=dict)
    figures: dict | None = None  # what report.html draws (verify fills it)
    # each file's runtime as verify loaded and ran it, by target, with the time of one call (ms): the bench times it
    # warm, without loading it again (``verify.stage.keep_warm``); empty outside an export that benches
    warm_runners: dict[str, tuple] = field(default_factory=dict)
    progress: object = None  # a depthport.cli.progress reporter, or None
    # the user's own files (`depthport verify`): each artifact's ``file`` is its path, judged where it is, never moved
    in_place: bool = False
    _scratch: Path | None = field(default=None, repr=False)
    _verification: tuple | None = field(default=None, repr=False)
    _cache: tuple | None = field(default=None, repr=False)

    def __post_init__(self):
        if not isinstance(self.options, StageOptions):
            raise TypeError(f"options must be StageOptions, not {type(self.options).__name__}")

    @property
    def input_shape(self) -> list[int]:
        return [1, 3, *self.built.input_hw]

    @property
    def output_shape(self) -> list[int]:
        return self.built.spec.output_shape(self.built.input_hw)

    @property
    def scratch(self) -> Path:
        """A temporary folder for this export's intermediate files, inside ``scratch.process_folder()``."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="export-", dir=process_folder()))
        return self._scratch

    @property
    def cache(self) -> EvidenceCache | None:
        """The on-disk evidence cache shared by every stage of this export (None with ``no_cache``)."""
        if self._cache is None:
            self._cache = (None, ()) if self.options.no_cache else (
                EvidenceCache(), (self.built.spec.id, weights_digest(self.built.weights.state)))
        return self._cache[0]

    @property
    def cache_id(self) -> tuple:
        """(model id, weights digest): what every cache key of this export starts with; () without a cache."""
        return self._cache[1] if self.cache is not None else ()

    @property
    def evidence_budget(self) -> EvidenceBudget:
        """How many verification images the float64 reference and the FP16-compute prediction run on, and the
        rewrite ledger's shape."""
        params = self.built.parameter_count
        passes = len(ledger_rewrites(self.built.rewrites)) + 1
        return evidence_budget(params, self.built.input_hw, len(self.verification_set()[1]),
                               self.options.evidence_images, ledger_passes=passes)

    def verification_set(self) -> tuple[str, list, dict | None, dict | None]:
        """(source, [(name, RGB image)], {name: prompt} or None, {name: where the prompt came from} or None): the
        verification images (``--images`` or the built-in set) and, for a prompted model, their prompts; read once
        per export, for the check and verify stages alike."""
        if self._verification is None:
            from ..core.images import image_set
            from ..core.prompts import prompt_set

            source, images = image_set(self.options.images)
            prompts, origins = (prompt_set(self.options.images, [n for n, _ in images], self.built.prompt_hw)
                                if self.built.prompt_hw else (None, None))
            self._verification = (source, images, prompts, origins)
        return self._verification

    def detail(self, text: str, done: int | None = None, total: int | None = None) -> None:
        """Show how far the running stage is (images n/N, rounds r/R) where a person is watching; with ``done`` of
        ``total`` units of work, a bar and the time left. Nothing from a thread inside ``unseen``."""
        if self.progress is not None and not getattr(_UNSEEN, "on", False):
            self.progress.detail(text, done, total)

    @staticmethod
    @contextlib.contextmanager
    def unseen():
        """Work done in this thread shows no progress (work beside the stage's own, which shows it)."""
        was, _UNSEEN.on = getattr(_UNSEEN, "on", False), True
        try:
            yield
        finally:
            _UNSEEN.on = was


def artifact_entry(ctx: ExportContext, path: Path, name: str, **extra) -> dict:
    """The report entry every target returns: file, target, size and shapes, plus the target's own fields."""
    return {"file": path.name, "target": name, "bytes": path.stat().st_size, "input_shape": ctx.input_shape,
            "output_shape": ctx.output_shape, **extra}
