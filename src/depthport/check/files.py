"""The check stage's verdicts for files written outside `depthport export` (``export.files.TargetFiles``)."""

from __future__ import annotations

from ..core.schema import ArtifactJson
from ..export.files import TargetFiles
from .stage import check_litert


def check_tflite_file(files: TargetFiles, entry: dict) -> dict:
    """Add the GPU verdicts (and, with ``fp16_sim``, the FP16-compute prediction) to the entry of one .tflite of
    ``files``, as the check stage does; returns the entry."""
    return check_litert(files.context, entry, files.folder / ArtifactJson(entry).file)
