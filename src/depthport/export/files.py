"""Target files outside `depthport export`, for benchmarks and notebooks: each file written as the export stage
writes it, with the report entry it gets there, and none of the later stages' checks."""

from __future__ import annotations

from pathlib import Path

from ..build import Built
from .context import ExportContext, StageOptions, artifact_entry
from .litert import tflite_entry
from .targets import TARGETS


class TargetFiles:
    """The files of one built model in ``folder``. ``write(target)`` makes one; ``reuse`` takes a file made
    before (a LiteRT variant is made from the FP32 .tflite: reuse it to skip that conversion)."""

    def __init__(self, built: Built, folder: str | Path, *, stem: str | None = None, **options):
        """``options``: ``StageOptions`` fields (threads; for ``check.files`` fp16_sim, off by default, and run_gpu)."""
        self.context = ExportContext(built, Path(folder), stem or built.spec.id.replace("-", "_"),
                                     options=StageOptions(**{"fp16_sim": False, **options}))

    @property
    def folder(self) -> Path:
        return self.context.out_dir

    @property
    def stem(self) -> str:
        return self.context.stem

    @property
    def files(self) -> dict[str, Path]:
        """{target: the file it wrote (or the one reused)}."""
        return dict(self.context.files)

    def write(self, target: str) -> dict:
        """Write ``target``'s file; returns its report entry (file, target, bytes, shapes and the target's own)."""
        if target not in TARGETS:
            raise KeyError(f"unknown target {target!r}; known: {', '.join(sorted(TARGETS))}")
        return TARGETS[target](self.context)

    def reuse(self, target: str, path: str | Path) -> None:
        self.context.files[target] = Path(path)
        if target == "litert-fp32":
            self.context.fp32_source = Path(path)

    def entry(self, path: str | Path, target: str, **extra) -> dict:
        """The report entry of a file made beside the targets (for example another quantisation recipe)."""
        path = Path(path)
        entry = tflite_entry if path.suffix == ".tflite" else artifact_entry
        return entry(self.context, path, target, **extra)
