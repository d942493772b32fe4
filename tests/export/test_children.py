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
