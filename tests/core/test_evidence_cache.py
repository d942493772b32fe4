"""The evidence cache (core.evidence_cache) across a whole export: a re-export reads the upstream outputs, the
FP16-compute predictions and the rewrite ledger from disk, and every verdict and figure is the same as with the
cache off or cold; a corrupted prediction is recomputed, never trusted."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import TINY_HW

TARGETS = ("litert-fp32", "xnnpack-fp16")


def _export(out, weights, images, cache_folder, monkeypatch, no_cache=False) -> dict:
    from depthport.export.context import StageOptions
    from depthport.pipeline import ExportOptions, run_export

    monkeypatch.setenv("DEPTHPORT_CACHE", str(cache_folder))
    opts = ExportOptions(model="da2-tiny", weights=weights, input_hw=TINY_HW, out_dir=out, targets=TARGETS,
                         stages=StageOptions(images=str(images), skip={"bench", "report", "card"},
                                             no_cache=no_cache))
    return json.loads(json.dumps(run_export(opts), default=str))


@pytest.fixture(scope="module")
def exports(tmp_path_factory, tiny_weights):
    """Three exports of the same model: cache off, cold cache, warm cache (same folder)."""
    from depthport.core.images import builtin_image

    root = tmp_path_factory.mktemp("evidence")
    (root / "images").mkdir()
    for name in ("chelsea", "astronaut"):
        builtin_image(name).save(root / "images" / f"{name}.png")
    with pytest.MonkeyPatch.context() as patch:
        runs = {name: _export(root / name, tiny_weights, root / "images", root / "cache", patch, name == "off")
                for name in ("off", "cold", "warm")}
    return runs, root / "cache"


def test_a_warm_cache_gives_every_verdict_and_figure_of_a_first_export(exports):
    runs, _ = exports
    assert runs["cold"]["artifacts"] == runs["off"]["artifacts"] == runs["warm"]["artifacts"]
    assert runs["cold"]["accuracy"] == runs["off"]["accuracy"] == runs["warm"]["accuracy"]
    assert runs["cold"]["rewrite_ledger"] == runs["off"]["rewrite_ledger"] == runs["warm"]["rewrite_ledger"]
    fp16 = runs["warm"]["artifacts"][0]["fp16_compute"]
    assert fp16["images"] == ["astronaut.png", "chelsea.png"] and fp16["rel_l2"] > 0


def test_a_re_export_reads_the_upstream_outputs_and_fp16_predictions_from_disk(exports):
    runs, folder = exports
    assert runs["off"]["verify"]["reference_cache"] == {"used": False, "why": "off (--no-cache)"}
    cold, warm = runs["cold"]["verify"]["reference_cache"], runs["warm"]["verify"]["reference_cache"]
    # the rewrite ledger, the GPU FP16 prediction, the xnnpack-fp16 one; 2 images x (upstream FP32, float64, eager).
    # A first export looks up no eager output: the GPU FP16 prediction's FP32 runs are those, and are kept.
    assert cold["hits"] == 0 and cold["misses"] == 7
    assert warm["hits"] == 9 and warm["misses"] == 0 and warm["rejected"] == 0
    assert len(list(folder.glob("*.value"))) == 3 and len(list(folder.glob("*.npy"))) == 6


def test_the_fp16_predictions_fp32_runs_are_the_eager_outputs_verify_would_compute(tiny_built):
    """The FP32 run inside the FP16-compute prediction is depthport's model run eagerly: verify takes those outputs
    (``References.seed_eager``) instead of running the model again, and they are the ones it would compute."""
    from depthport.check.fp16_compute import predict_fp16
    from depthport.core.images import builtin_image
    from depthport.runtimes.torch import torch_threads
    from depthport.verify.stage import make_references

    images = [(name, builtin_image(name)) for name in ("chelsea", "astronaut")]
    kept = {}
    with torch_threads(2):
        predict_fp16(tiny_built.model, TINY_HW, images=images, fp32_outputs=kept)
    assert sorted(kept) == sorted(name for name, _ in images)
    fresh = make_references(tiny_built.spec, tiny_built.weights, TINY_HW, tiny_built.model, True, images, 2,
                            cache=False)
    seeded = make_references(tiny_built.spec, tiny_built.weights, TINY_HW, tiny_built.model, True, images, 2,
                             cache=False)
    seeded.seed_eager(kept)
    for name, _ in images:
        assert ("eager", name) in seeded._outputs
        assert np.array_equal(seeded.output("eager", name), fresh.output("eager", name))
    xnnpack = {}
    predict_fp16(tiny_built.model, TINY_HW, images=images[:1], accumulate="xnnpack", fp32_outputs=xnnpack)
    assert xnnpack == {}  # another form of the model: not an eager run


def test_a_corrupted_fp16_prediction_is_recomputed(tiny_built, tmp_path):
    from depthport.check.fp16_compute import predict_fp16
    from depthport.core.evidence_cache import EvidenceCache

    cache = EvidenceCache(tmp_path / "cache")
    ident = ("da2-tiny", "digest", tuple(tiny_built.rewrites), None)
    first = predict_fp16(tiny_built.model, TINY_HW, cache=cache, cache_id=ident)
    [entry] = (tmp_path / "cache").glob("*.value")
    raw = bytearray(entry.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    entry.write_bytes(bytes(raw))
    again = predict_fp16(tiny_built.model, TINY_HW, cache=cache, cache_id=ident)
    assert cache.rejected == 1 and cache.hits == 0 and again == first
    assert predict_fp16(tiny_built.model, TINY_HW, cache=cache, cache_id=ident) == first and cache.hits == 1
    other = predict_fp16(tiny_built.model, TINY_HW, accumulate="fp32", cache=cache, cache_id=ident)
    assert cache.misses == 2 and other["accumulate"] == "fp32"


def test_accuracy_takes_the_scenes_outputs_from_the_verification_set(tiny_built):
    """The motorcycle scene is one of the built-in verification images: its reference output serves the accuracy
    figures (one upstream run less), and gives the figures a separate run gives. A set without it runs the scene."""
    from depthport.core.images import builtin_image
    from depthport.verify.stage import accuracy_of, make_references, scene_name

    images = [(name, builtin_image(name)) for name in ("chelsea", "motorcycle_left")]
    refs = make_references(tiny_built.spec, tiny_built.weights, TINY_HW, None, True, images, 2, cache=False)
    assert scene_name(refs) == "motorcycle_left"
    reused = accuracy_of(refs.reference, TINY_HW, depth=refs.output("reference", "motorcycle_left"))
    assert reused == accuracy_of(refs.reference, TINY_HW)
    other = make_references(tiny_built.spec, tiny_built.weights, TINY_HW, None, True, images[:1], 2, cache=False)
    assert scene_name(other) is None
