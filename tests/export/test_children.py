"""Conversions in child processes (export.children): the same files and report entries as converting in the
exporting process, dependencies honoured, errors raised as the target raised them."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from depthport.errors import InputError
from depthport.export.children import NEEDS, _job_order, conversion_workers, convert_all, in_children
from depthport.export.context import ExportContext, StageOptions

TARGETS = ["web-onnx", "litert-fp16", "onnx", "litert-fp32"]  # each needing one asked for after it
MEMO_SITE = str(Path(__file__).resolve().parents[1] / "memo_site")


@pytest.fixture(autouse=True)
def children_share_the_conversion_memo(monkeypatch):
    """The children (forked from a server started with this environment) convert through the session's memo."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (MEMO_SITE, os.environ.get("PYTHONPATH")) if p))


def _digests(ctx, entries) -> dict:
    return {e["target"]: hashlib.sha256((ctx.out_dir / e["file"]).read_bytes()).hexdigest()
            for e in entries if (ctx.out_dir / e["file"]).is_file()}


def test_children_write_the_files_and_entries_the_exporting_process_writes(tiny_built, tmp_path):
    here = ExportContext(tiny_built, tmp_path / "here", "da2_tiny", options=StageOptions(convert_in_children=False))
    kids = ExportContext(tiny_built, tmp_path / "kids", "da2_tiny", options=StageOptions(convert_in_children=True))
    for ctx in (here, kids):
        ctx.out_dir.mkdir()
    assert not in_children(here, TARGETS) and in_children(kids, TARGETS)
    a, b = convert_all(here, TARGETS), convert_all(kids, TARGETS)
    assert [e["target"] for e in b] == TARGETS  # the order asked for, whatever order they finished in
    assert a == b
    assert _digests(here, a) == _digests(kids, b) and len(_digests(kids, b)) == 3
    assert set(kids.files) == set(TARGETS) and kids.fp32_source == kids.out_dir / "da2_tiny_fp32.tflite"
    assert (kids.files["web-onnx"] / "model.onnx").read_bytes() == (kids.out_dir / "da2_tiny.onnx").read_bytes()
    assert not list(kids.scratch.glob("model-for-conversions*"))  # the model file shared with the children is gone


def test_a_childs_error_is_raised_as_the_target_raised_it(tmp_path):
    from depthport.build import build

    built = build("da3-tiny", (56, 70), "random")
    ctx = ExportContext(built, tmp_path, "da3_tiny", options=StageOptions(convert_in_children=True))
    with pytest.raises(InputError, match="page feeds images as Depth Anything V2 is fed"):
        convert_all(ctx, ["web-onnx"])


def test_small_models_convert_here_unless_children_are_asked_for(tiny_built, tmp_path):
    import copy

    ctx = ExportContext(tiny_built, tmp_path, "da2_tiny")
    assert ctx.options.convert_in_children is None and not in_children(ctx, TARGETS)
    small = copy.copy(tiny_built)
    small.parameter_count = 25_000_000  # a Small model: two at once where memory allows, one file in process
    assert in_children(ExportContext(small, tmp_path, "da2_tiny"), TARGETS) is (conversion_workers(25_000_000, 4) > 1)
    assert not in_children(ExportContext(small, tmp_path, "da2_tiny"), ["litert-fp32"])
    asked = ExportContext(small, tmp_path, "da2_tiny", options=StageOptions(convert_in_children=False))
    assert not in_children(asked, TARGETS)


def test_workers_follow_cores_memory_and_jobs():
    gib = 1 << 30
    assert conversion_workers(25_000_000, 6, available=20 * gib, cores=2) == 2
    assert conversion_workers(25_000_000, 1, available=20 * gib, cores=2) == 1
    assert conversion_workers(335_000_000, 6, available=20 * gib, cores=2) == 1  # a Large model: one at a time
    assert conversion_workers(335_000_000, 6, available=40 * gib, cores=16) == 2
    assert conversion_workers(25_000_000, 6, available=0, cores=2) == 1


def test_what_others_wait_for_starts_first_then_the_costliest():
    order = _job_order(["onnx", "litert-int8", "xnnpack-fp32", "xnnpack-fp16", "litert-fp32"])
    assert order == ["litert-fp32", "xnnpack-fp16", "xnnpack-fp32", "onnx", "litert-int8"]
    assert all(NEEDS[t] in ("litert-fp32", "onnx") for t in NEEDS)


class _Shown:
    """A progress reporter that records what each stage showed."""

    def __init__(self):
        self.lines: list[tuple[str, str]] = []
        self._stage = ""

    def stage(self, name: str):
        import contextlib

        self._stage = name
        return contextlib.nullcontext()

    def detail(self, text: str, done=None, total=None) -> None:
        self.lines.append((self._stage, text))


def test_the_checks_predictions_are_made_beside_the_children_and_are_the_same(tmp_path):
    """Where children convert, the check stage's FP16-compute predictions (the GPU's, and XNNPACK's as on ARM) are
    made in the exporting process meanwhile, without showing their progress; the check stage then makes none, and
    the report says what an export converting in process says."""
    from depthport.pipeline import ExportOptions, run_export
    from helpers import TINY_HW

    sections, shown = {}, {}
    for kids in (False, True):
        progress = _Shown()
        opts = ExportOptions(model="da2-tiny", weights="random", input_hw=TINY_HW, out_dir=tmp_path / f"kids-{kids}",
                             targets=("litert-fp32", "xnnpack-fp16"),
                             stages=StageOptions(convert_in_children=kids, no_cache=True,
                                                 skip=frozenset({"ledger", "verify", "bench", "report", "card"})))
        report = run_export(opts, progress)
        sections[kids] = [(a["fp16_compute"] if "fp16_compute" in a else None, a.get("fp16_arithmetic"),
                           a["checks"].get("fp16_compute"), a["checks"].get("fp16_arithmetic"))
                          for a in report["artifacts"]]
        shown[kids] = progress.lines
    assert sections[True] == sections[False]
    assert sections[True][0][0]["rel_l2"] > 0 and sections[True][1][1]["prediction"]["rel_l2"] > 0
    export_lines = [text for stage, text in shown[True] if stage == "export"]
    assert any("evidence beside them" in text for text in export_lines)
    assert not any("FP16-compute prediction" in text for text in export_lines)  # unseen beside the conversions
    assert not any("FP16-compute prediction" in text for stage, text in shown[True] if stage == "check")
    assert any("FP16-compute prediction" in text for stage, text in shown[False] if stage == "check")


def test_what_runs_beside_the_children_may_fail_without_failing_the_conversions(tiny_built, tmp_path):
    ctx = ExportContext(tiny_built, tmp_path, "da2_tiny", options=StageOptions(convert_in_children=True))
    ran = []

    def fails():
        ran.append(True)
        raise RuntimeError("computed again, and met again, by the stage that needs it")

    [entry] = convert_all(ctx, ["onnx"], meanwhile=fails)
    assert ran and entry["target"] == "onnx" and (tmp_path / entry["file"]).is_file()


def test_nothing_runs_beside_children_that_convert_a_model_waiting_on_disk(tmp_path, monkeypatch):
    """A model large enough to wait on disk while its children convert it (``Built.release``) is not read back into
    the exporting process by the evidence beside them: nothing runs beside, and the model is still there after."""
    from depthport.build import build
    from depthport.weights import load as weights_load
    from helpers import TINY_HW

    built = build("da2-tiny", TINY_HW, "random")
    monkeypatch.setattr(weights_load, "RELEASE_BYTES", 1)  # the tiny model counts as Large here
    ctx = ExportContext(built, tmp_path, "da2_tiny", options=StageOptions(convert_in_children=True))
    ran = []
    [entry] = convert_all(ctx, ["onnx"], meanwhile=lambda: ran.append(True))
    assert not ran and (tmp_path / entry["file"]).is_file()
    assert built._spill is not None and sum(p.numel() for p in built.model.parameters()) == built.parameter_count
