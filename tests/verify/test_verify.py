"""Verification: metrics on known arrays, ground-truth alignment, tiny-file parity, gates, bad input."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from PIL import Image

from depthport.cli import main
from depthport.export.context import StageOptions
from depthport.export.targets import ExportContext
from depthport.preprocess import InputError
from depthport.verify import accuracy, gates
from depthport.core import metrics
from depthport.core.images import BUILTIN, builtin_set, folder_set, image_set
from helpers import TINY_HW as HW
from helpers import shipped


@pytest.fixture(scope="module")
def tiny(tiny_built, tiny_tflite):
    """The tiny model with random weights and its LiteRT file (the session's shared conversion)."""
    return tiny_built, tiny_tflite


@pytest.fixture(scope="module")
def images():
    return builtin_set()[:2]


# metrics


def test_pearson_known_values():
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert metrics.pearson(a, 2 * a + 5) == pytest.approx(1.0)
    assert metrics.pearson(a, -a) == pytest.approx(-1.0)
    assert metrics.pearson(np.array([1.0, -1.0, 1.0, -1.0]), np.array([1.0, 1.0, -1.0, -1.0])) == pytest.approx(0.0)
    assert metrics.pearson(np.ones(4), np.ones(4)) == 1.0
    assert metrics.pearson(np.ones(4), a) == 0.0


def test_rel_l2_pooled_is_not_the_mean_of_per_image_values():
    b1, b2 = np.full(4, 1.0), np.full(4, 10.0)
    a1, a2 = b1 + 0.1, b2 + 0.1
    expected = np.sqrt((4 * 0.01 + 4 * 0.01) / (4 * 1.0 + 4 * 100.0))
    assert metrics.pooled_rel_l2([(a1, b1), (a2, b2)]) == pytest.approx(expected)
    assert metrics.rel_l2(a1, b1) == pytest.approx(0.1)
    summary = metrics.summarize([metrics.image_metrics(a1, b1), metrics.image_metrics(a2, b2)])
    assert summary["rel_l2_pooled"] == pytest.approx(expected)
    assert summary["max_abs"] == pytest.approx(0.1)
    assert summary["images"] == 2


def test_max_abs_and_shape_check():
    assert metrics.max_abs(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.5, 1.0])) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="differ in size"):
        metrics.max_abs(np.zeros(3), np.zeros(4))


def test_delta125_counts_pixels_within_a_factor():
    ref = np.array([1.0, 2.0, 4.0, 8.0])
    assert metrics.delta125(ref * 1.2, ref) == 1.0
    assert metrics.delta125(np.array([1.0, 2.0, 4.0, 8.0 * 1.3]), ref) == pytest.approx(0.75)
    assert metrics.delta125(np.array([1.0, 2.0, 5.5, 20.0]), ref) == pytest.approx(0.5)


def test_delta125_shifts_non_positive_maps_by_the_reference_minimum():
    ref = np.array([-1.0, 0.0, 1.0, 3.0])
    # shift = 0.004 - (-1): the reference becomes (0.004, 1.004, 2.004, 4.004)
    assert metrics.delta125(ref, ref) == 1.0
    assert metrics.delta125(ref + np.array([0.0, 0.1, 0.1, 0.1]), ref) == 1.0
    # below the shifted floor: the tested value becomes <= 0 and counts as a miss
    assert metrics.delta125(np.array([-2.0, 0.0, 1.0, 3.0]), ref) == pytest.approx(0.75)
    zeros = np.array([0.0, 0.0, 1.0, 2.0])  # ReLU-clamped depth with exact zeros
    assert metrics.delta125(zeros, zeros) == 1.0


def test_summary_worst_and_median():
    b = np.linspace(1, 2, 10)
    per = [metrics.image_metrics(b + e, b) for e in (0.0, 0.01, 5.0)]
    s = metrics.summarize(per)
    assert s["delta125_worst"] == pytest.approx(0.0)
    assert s["delta125_median"] == 1.0
    assert s["pearson_worst"] == pytest.approx(1.0)


# accuracy against ground truth


def test_alignment_recovers_scale_and_shift_and_masks_invalid_pixels():
    rng = np.random.default_rng(0)
    disparity = rng.uniform(5, 50, size=(40, 60))
    pred = (disparity - 3.0) / 7.0
    disparity[:5] = np.inf
    disparity[5:8] = np.nan
    disparity[8, :10] = 0.0
    pred[:8] = 1e6  # garbage where the ground truth is invalid must not matter
    out = accuracy.score(pred, disparity)
    assert out["scale"] == pytest.approx(7.0)
    assert out["shift"] == pytest.approx(3.0)
    assert out["abs_rel"] == pytest.approx(0.0, abs=1e-9)
    assert out["delta1"] == 1.0
    assert out["valid_pixels"] == 40 * 60 - 8 * 60 - 10


def test_abs_rel_and_delta1_of_an_imperfect_prediction():
    disparity = np.array([[10.0, 10.0], [20.0, 40.0]])
    pred = np.array([[0.0, 0.0], [1.0, 1.0]])  # best fit: 10 on the top row, 30 on the bottom one
    out = accuracy.score(pred, disparity)
    assert out["abs_rel"] == pytest.approx((0 + 0 + 0.5 + 0.25) / 4)
    assert out["delta1"] == pytest.approx(0.5)


def test_prediction_is_resized_to_the_ground_truth():
    disparity = np.tile(np.linspace(10, 20, 30), (20, 1))
    pred = np.tile(np.linspace(0, 1, 15), (10, 1))
    assert accuracy.score(pred, disparity)["abs_rel"] < 0.01


def test_motorcycle_ground_truth_ships_with_scikit_image():
    left, disparity = accuracy.motorcycle()
    assert left.size == (disparity.shape[1], disparity.shape[0])
    assert np.isnan(disparity).any() and np.nanmin(disparity) > 0


# parity of a real tiny file


def test_builtin_images_load_offline():
    loaded = builtin_set()
    assert [name for name, _ in loaded] == list(BUILTIN)
    assert all(img.mode == "RGB" and min(img.size) >= 256 for _, img in loaded)


def test_tiny_tflite_matches_the_transformers_reference(tiny, images):
    from depthport.verify.stage import make_references, verify_file

    built, path = tiny
    refs = make_references(built.spec, built.weights, HW, built.model, True, images, threads=2, fp64=True)
    parity, acc, outputs = verify_file(path, refs, threads=2)
    assert parity["images"] == 2
    assert parity["rel_l2_pooled"] < 1e-5
    assert parity["pearson_worst"] > 0.99999
    assert parity["delta125_worst"] > 0.999
    assert parity["vs_eager"]["rel_l2_pooled"] < 1e-5
    assert parity["vs_reference_fp64"]["rel_l2_pooled"] < 1e-5
    name = images[0][0]
    assert 0 < metrics.rel_l2(refs.output("reference", name), refs.output("reference64", name)) < 1e-5
    assert set(parity["per_image"]) == {name for name, _ in images}
    assert np.isfinite(acc["abs_rel"]) and 0 <= acc["delta1"] <= 1
    assert outputs[images[0][0]].shape == HW
    # another image's reference is far off: the comparison can fail
    first, second = (name for name, _ in images)
    assert metrics.rel_l2(outputs[first], refs.output("reference", second)) > 1e-2


# the reference cache


def test_reference_outputs_are_cached_on_disk_checked_and_recomputed_when_corrupt(tiny, images, tmp_path):
    """A second verification of the same model, weights, shape and images reads the upstream FP32 and float64
    outputs from the cache (the upstream model is not run); an entry whose bytes changed is rejected and
    recomputed; other weights miss; the bound evicts the least recently used entries."""
    from depthport.core.evidence_cache import EvidenceCache
    from depthport.verify.stage import make_references
    from depthport.build import random_weights

    built, _ = tiny
    folder = tmp_path / "cache"

    def refs_with(weights, cache=True):
        refs = make_references(built.spec, weights, HW, None, True, images, threads=2, fp64=True, cache=cache)
        if refs.cache is not None:
            refs.cache = EvidenceCache(folder)
        return refs

    first = refs_with(built.weights)
    fresh = {(w, n): first.output(w, n) for w in ("reference", "reference64") for n, _ in images}
    assert first.cache.misses == 4 and first.cache.hits == 0 and len(list(folder.glob("*.npy"))) == 4
    again = refs_with(built.weights)
    calls = []
    again.reference.model.register_forward_hook(lambda *a: calls.append(1))
    again.reference64.model.register_forward_hook(lambda *a: calls.append(1))
    assert all(np.array_equal(again.output(w, n), fresh[(w, n)]) for w, n in fresh)
    assert again.cache.hits == 4 and calls == []

    entry = sorted(folder.glob("*.npy"))[0]
    raw = bytearray(entry.read_bytes())
    raw[-1] ^= 0xFF
    entry.write_bytes(bytes(raw))
    third = refs_with(built.weights)
    assert all(np.array_equal(third.output(w, n), fresh[(w, n)]) for w, n in fresh)
    assert third.cache.rejected == 1 and third.cache.hits == 3 and len(list(folder.glob("*.npy"))) == 4

    other = refs_with(random_weights(built.spec, seed=1))
    other.output("reference", images[0][0])
    assert other.cache.misses == 1 and other.cache.hits == 0

    assert refs_with(built.weights, cache=False).cache is None
    small = EvidenceCache(folder, max_bytes=entry.stat().st_size * 2)
    small.put("x" * 64, np.zeros(HW, np.float32))
    assert len(list(folder.glob("*.npy"))) == 2 and (folder / ("x" * 64 + ".npy")).exists()


# gates


def test_gate_thresholds_parse_and_evaluate():
    g = gates.thresholds(["fp16.pearson=0.9995", "int8.rel_l2=0.05"])
    assert g["fp16"] == {**gates.DEFAULTS["fp16"], "pearson_worst": 0.9995}
    assert g["int8"] == {"delta125_worst": 0.99, "rel_l2_pooled": 0.05}
    assert g["fp32"] == gates.DEFAULTS["fp32"]
    parity = {"pearson_worst": 0.9990, "rel_l2_pooled": 2e-4, "delta125_worst": 0.995}
    verdict = gates.evaluate(parity, "fp32", g)
    assert verdict["passed"] is False and len(verdict["reasons"]) == 2
    assert gates.evaluate(parity, "int8", g)["passed"] is True
    assert gates.evaluate(None, "fp32", g)["passed"] is None


def test_a_gate_that_can_never_pass_is_refused_and_a_looser_one_is_said(tiny, tmp_path, images, capsys):
    """fp32.pearson=1.5, =nan or fp32.rel_l2=-1 were taken, and every file failed them whatever it computed; they are
    refused before any work. A gate looser than the default (fp32.pearson=0.1) passed files without a word; a console
    line says so (a tighter one says nothing)."""
    for text, what in (("fp32.pearson=1.5", "a correlation, from -1 to 1"), ("fp32.pearson=nan", "a correlation"),
                       ("fp16.delta125=2", "a share of the pixels, from 0 to 1"), ("fp32.rel_l2=-1", "an error, 0 or "
                                                                                        "more")):
        with pytest.raises(InputError, match=f"gate .* can never pass: it is {what}"):
            gates.thresholds([text])
    assert gates.loosened(["fp32.pearson=0.1", "fp32.rel_l2=1e-6", "int8.delta125=0.5"]) == [
        "fp32.pearson_worst 0.1 (default 0.9999)", "int8.delta125_worst 0.5 (default 0.99)"]
    assert gates.loosened(["fp16.mae=1"], metric=True) == ["fp16.mean_abs_worst 1 (default 0.05)"]
    _, path = tiny
    (tmp_path / "images").mkdir()
    images[0][1].save(tmp_path / "images" / "a.jpg")
    capsys.readouterr()
    assert main(["verify", str(path), "--reference", "da2-tiny", "--weights", "random", "--images",
                 str(tmp_path / "images"), "--out", str(tmp_path / "v"), "--no-eager", "--precision", "fp32", "--gate",
                 "fp32.pearson=0.1"]) == 0
    assert "--gate loosens fp32.pearson_worst 0.1 (default 0.9999): a pass here may fail the defaults" in \
        capsys.readouterr().err


def test_fp16_is_gated_on_delta_and_rel_l2_like_int8():
    """The FP16 file of the SPR measurement (worst delta 0.967, rel. L2 1.2e-2, Pearson 0.99967) does not ship."""
    g = gates.thresholds()
    measured = {"pearson_worst": 0.99967, "rel_l2_pooled": 1.2e-2, "delta125_worst": 0.967}
    verdict = gates.evaluate(measured, "fp16", g)
    assert verdict["state"] == "fail" and len(verdict["reasons"]) == 2
    assert gates.evaluate({**measured, "rel_l2_pooled": 2e-3, "delta125_worst": 0.999}, "fp16", g)["state"] == "pass"
    for bad in ("fp32.pearson", "pearson=1", "fp32.nope=1", "fp32.pearson=x"):
        with pytest.raises(InputError):
            gates.thresholds([bad])


def _export_ctx(tiny, out_dir, **options):
    built, path = tiny
    from depthport.export.litert import tflite_entry

    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = ExportContext(built, out_dir, "da2_tiny", options=StageOptions(threads=2, **options))
    copies = []
    for name in ("a_fp32.tflite", "b_fp32.tflite"):
        shutil.copy(path, out_dir / name)
        copies.append(tflite_entry(ctx, out_dir / name, f"litert-{name[0]}", precision="fp32"))
    ctx.files["litert-b"] = out_dir / "b_fp32.tflite"
    report = {"model": "da2-tiny", "random_weights": True, "artifacts": copies}
    return ctx, report


def test_verify_step_moves_a_failing_variant_to_not_shipped(tiny, tmp_path, images):
    from depthport.verify import stage as step

    source = tmp_path / "images"
    source.mkdir()
    images[0][1].save(source / "one.png")
    ctx, report = _export_ctx(tiny, tmp_path / "out", images=str(source), gates={"fp32.rel_l2": 0})
    report["artifacts"][0]["precision"] = "int8"  # judged by the (passing) int8 default instead
    step.apply(ctx, report)
    passed, failed = report["artifacts"]
    assert shipped(passed) is True and passed["checks"]["parity"]["passed"] is True
    assert shipped(failed) is False and failed["checks"]["parity"]["passed"] is False
    assert "rel_l2_pooled" in failed["checks"]["parity"]["reasons"][0]
    assert failed["file"] == "not-shipped/b_fp32.tflite"
    assert (ctx.out_dir / "not-shipped" / "b_fp32.tflite").is_file()
    assert not (ctx.out_dir / "b_fp32.tflite").exists()
    assert (ctx.out_dir / "a_fp32.tflite").is_file()
    assert ctx.files["litert-b"] == ctx.out_dir / "not-shipped" / "b_fp32.tflite"
    [entry] = report["not_shipped"]
    assert entry["file"] == failed["file"] and entry["parity"]["pearson_worst"] > 0.9999
    assert "did not earn a slot" in entry["note"]
    assert report["verify"]["images"] == ["one.png"]
    cache = report["verify"]["reference_cache"]  # three outputs per image (upstream FP32, float64, depthport eager)
    assert cache["used"] is True and cache["hits"] + cache["misses"] == 3
    assert report["accuracy"]["meaningful"] is False and "RANDOM" in report["accuracy"]["note"]
    assert set(ctx.figures["variants"]) == {"litert-a", "litert-b"}
    json.dumps(report)  # everything recorded is JSON-serialisable


def test_verify_stage_counts_its_work_for_the_time_left(tiny, tmp_path):
    """The stage reports units of work: the reference outputs (upstream FP32, depthport eager, float64) per image
    and layer, then each file's images, counted over all files; the progress turns the count into the time left."""
    from depthport.cli.progress import time_left
    from depthport.verify import stage as step

    class Recorder:
        def __init__(self):
            self.calls = []

        def detail(self, text, done=None, total=None):
            self.calls.append((text, done, total))

    ctx, report = _export_ctx(tiny, tmp_path / "out", no_cache=True)
    ctx.progress = Recorder()
    step.apply(ctx, report)
    counted = [(text, done, total) for text, done, total in ctx.progress.calls if total]
    k = len(BUILTIN)
    upstream = [c for c in counted if c[0].startswith("reference outputs")]
    text, done, total = upstream[-1]  # counted in thousandths of an output, from the models' layers
    assert (text, done, total) == ("reference outputs: 18/18", 18000, 18000)
    assert any("reference outputs: 2/18 (upstream FP32), layers 1/" in c[0] for c in upstream)
    assert any("12/18 (depthport eager), layers" in text for text, _, _ in upstream)
    assert any("18/18 (upstream float64), layers" in text for text, _, _ in upstream)
    assert [d for _, d, _ in upstream] == sorted(d for _, d, _ in upstream)  # never counted back: the time left holds
    files = [c for c in counted if not c[0].startswith("reference outputs")]
    assert [(d, t) for text, d, t in files if "images" in text and ":" in text] == [
        (j, 2 * k) for j in range(1, 2 * k + 1)]
    assert "a_fp32.tflite (1/2): images 1/6" in files[1][0]
    assert time_left(20.0, 1, 4) == "about 60 s left" and time_left(60.0, 1, 4) == "about 3 min left"
    assert time_left(5.0, 0, 4) == "" and time_left(5.0, 4, 4) == ""


def test_the_upstream_models_are_freed_once_their_outputs_are_in_and_rebuilt_the_same(tiny, images):
    """After the upstream outputs are computed, neither upstream model stays in memory; a later use (another
    shape) builds it again from the same weights and gives the same outputs."""
    from depthport.verify.stage import make_references, reference_outputs

    built, _ = tiny

    class Quiet:
        def detail(self, *args):
            pass

    refs = make_references(built.spec, built.weights, HW, None, True, images, threads=2, fp64=True, cache=False)
    assert refs.reference.built is not None and refs.reference64.built is None  # float64: built when first needed
    reference_outputs(Quiet(), refs)
    assert refs.reference.built is None and refs.reference64.built is None
    again = refs.at(HW, threads=2)
    for name, _ in images:
        assert np.array_equal(again.output("reference", name), refs.output("reference", name))
        assert np.array_equal(again.output("reference64", name), refs.output("reference64", name))
    assert again.reference.built is not None


# bad input


def test_image_folder_errors(tmp_path):
    """A set with no images, an unreadable one, one bad image among good ones (what to do about it), a folder not
    there, and a video given as the set (it was told to rename the video, as a video saved under a photo's name)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not an image")
    with pytest.raises(InputError, match="no images"):
        folder_set(empty)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.png").write_bytes(b"not a png")
    with pytest.raises(InputError, match="cannot read image"):
        folder_set(broken)
    Image.new("RGB", (30, 20)).save(broken / "b.png")  # one bad image among good ones: what to do about it
    with pytest.raises(InputError, match=r"cannot read image .*a\.png.*; every image of the set must read, and 1 of "
                                         "its 2 cannot: remove it or fix it"):
        folder_set(broken)
    with pytest.raises(InputError, match="not found"):
        folder_set(tmp_path / "missing")
    (tmp_path / "clip.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")  # a video given as the set: not 'rename it'
    with pytest.raises(InputError, match=r"clip\.mp4 is a video, and an image set takes images: a folder of them, "
                                         "one, or a quoted pattern"):
        folder_set(tmp_path / "clip.mp4")


def test_the_pattern_a_folder_with_subfolders_is_told_to_take_reads_them(tmp_path, monkeypatch):
    """A folder whose photos are in day1/, day2/: its error advises a quoted pattern, 'trip/**/*', and --images takes
    it as predict does (it said 'image folder not found: trip/**/*'): subfolders read, names relative to the
    pattern's folder, files not named like images and prompt files passed over; a prompted model's prompt is found
    beside its image in the subfolder. As for predict, a leading ~ is the home folder and a URL is one line."""
    from depthport.core.prompts import prompt_set

    trip = tmp_path / "trip"
    for i, name in enumerate(["day1/IMG_1.jpg", "day2/IMG_2.png", "day2/IMG_2.prompt.npy", "day2/notes.txt"]):
        (trip / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".npy"):
            np.save(trip / name, np.linspace(1.0, 3.0, 24 * 32, dtype=np.float32).reshape(24, 32))
        elif name.endswith(".txt"):
            (trip / name).write_text("not an image")
        else:
            Image.new("RGB", (40 + i, 30), (10 * i, 20, 30)).save(trip / name)
    with pytest.raises(InputError, match=re.escape(f"give a quoted pattern, '{trip / '**' / '*'}'")):
        folder_set(trip)
    images = folder_set(f"{trip}/**/*")
    assert [(name, image.size) for name, image in images] == [("day1/IMG_1.jpg", (40, 30)), ("day2/IMG_2.png", (41, 30))]
    prompts, origins = prompt_set(f"{trip}/**/*", ["day2/IMG_2.png"], (24, 32))
    assert origins == {"day2/IMG_2.png": "IMG_2.prompt.npy"}
    assert float(prompts["day2/IMG_2.png"].min()) == 1.0 and float(prompts["day2/IMG_2.png"].max()) == 3.0
    monkeypatch.setenv("HOME", str(tmp_path))  # --images '~/trip/**/*', quoted: the shell left the ~
    assert [name for name, _ in image_set("~/trip/**/*")[1]] == ["day1/IMG_1.jpg", "day2/IMG_2.png"]
    assert prompt_set("~/trip/**/*", ["day2/IMG_2.png"], (24, 32))[1] == origins
    with pytest.raises(InputError, match=re.escape("prompt IMG_2.prompt.npy is 24x32 but the model takes a 32x24")):
        prompt_set(f"{trip}/**/*", ["day2/IMG_2.png"], (32, 24))  # it named the photo: 'prompt day2/IMG_2.png is'
    with pytest.raises(InputError, match=r"is a URL, and depthport reads local files: download it first"):
        image_set("https://example.com/trip/")
    with pytest.raises(InputError, match=r"matches no file named like an image"):
        folder_set(f"{trip}/**/*.txt")
    with pytest.raises(InputError, match=r"1 file\(s\) match it in another letter case \(IMG_1.jpg"):
        folder_set(f"{trip}/**/*.JPG")


def test_a_folder_whose_subfolders_are_passed_over_is_told_how_to_read_them(tmp_path):
    """--images DIR reads DIR's own images: export and verify say, before the work, which subfolders that passes over
    and the pattern that reads them (they said nothing); nothing for a pattern, a folder without subfolders, or a
    folder with no image of its own (its refusal says it)."""
    from io import StringIO

    from rich.console import Console

    from depthport.cli.common import images_note

    trip = tmp_path / "trip"
    for name in ("top.jpg", "day1/a.jpg", "day2/b.jpg", "empty/sub/c.jpg"):
        (trip / name).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (40, 30)).save(trip / name)

    def said(images) -> str:
        out = StringIO()
        images_note(Console(file=out, width=400), str(images))
        return out.getvalue().strip()

    assert said(trip) == (f"--images {trip}: 3 folders (day1, day2, empty) in the folder not searched: for every image "
                          f"under it give a quoted pattern, '{trip / '**' / '*'}'")
    assert said(f"{trip}/**/*") == said(trip / "day1") == said(trip / "empty") == ""
    assert [name for name, _ in folder_set(f"{trip}/**/*")] == ["day1/a.jpg", "day2/b.jpg", "empty/sub/c.jpg",
                                                                 "top.jpg"]


def test_what_an_images_folder_holds_beside_its_images_is_named_before_the_work(tmp_path):
    """A phone's or a camera's folder given as --images: its videos, the RAW files with no JPEG beside them, its
    sidecars and documents are named as not read, and its archives as not unpacked (they were left out in silence);
    a RAW file beside its JPEG (what a camera writes) is not named."""
    from io import StringIO

    from rich.console import Console

    from depthport.cli.common import images_note

    folder = tmp_path / "card"
    folder.mkdir()
    for name in ("IMG_0001.JPG", "IMG_0002.JPG"):
        Image.new("RGB", (40, 30)).save(folder / name)
    for name in ("IMG_0001.CR2", "IMG_0003.CR2", "IMG_0004.MOV", "IMG_0002.AAE", "notes.pdf", "more.zip"):
        (folder / name).write_bytes(b"\x00" * 16)
    out = StringIO()
    images_note(Console(file=out, width=400), str(folder))
    assert out.getvalue().strip() == (
        f"--images {folder}: 1 video (IMG_0004.MOV), 1 camera RAW file (IMG_0003.CR2) and 2 other files (.AAE, .pdf) "
        "in the folder not read (images only); 1 archive (more.zip) not unpacked: unpack it first and give the "
        "folder of its images")
    assert [name for name, _ in folder_set(folder)] == ["IMG_0001.JPG", "IMG_0002.JPG"]
    out = StringIO()  # a quoted pattern passed over the same files in silence
    images_note(Console(file=out, width=400), f"{folder}/IMG_000*")
    assert out.getvalue().strip() == (f"--images {folder}/IMG_000*: 1 video (IMG_0004.MOV), 1 camera RAW file "
                                      "(IMG_0003.CR2) and 1 other file (.AAE) matching the pattern not read (images "
                                      "only)")
    out = StringIO()
    images_note(Console(file=out, width=400), f"{folder}/*.JPG")
    assert out.getvalue() == "" and [name for name, _ in folder_set(f"{folder}/IMG_000*")] == ["IMG_0001.JPG",
                                                                                              "IMG_0002.JPG"]


@pytest.mark.parametrize("mode", ["I", "F"])
def test_unsupported_image_mode_is_a_clear_error(tmp_path, mode):
    Image.new(mode, (30, 20)).save(tmp_path / "x.tiff")
    with pytest.raises(InputError, match="unsupported image mode"):
        folder_set(tmp_path)


def test_cli_errors_exit_2(tiny, tmp_path, capsys):
    _, path = tiny
    empty = tmp_path / "empty"
    empty.mkdir()
    base = ["verify", str(path), "--reference", "da2-tiny", "--weights", "random"]
    assert main(base + ["--size", "28x42"]) == 2
    assert "shape mismatch" in capsys.readouterr().err
    assert main(base + ["--images", str(empty)]) == 2
    assert "no images" in capsys.readouterr().err
    assert main(base + ["--gate", "fp32.pearson"]) == 2
    assert main(["verify", str(tmp_path / "missing.tflite"), "--reference", "da2-tiny"]) == 2


def test_cli_verify_writes_report_and_applies_gates(tiny, tmp_path, images):
    _, path = tiny
    source = tmp_path / "images"
    source.mkdir()
    images[1][1].save(source / "cat.jpg")
    out = tmp_path / "v"
    args = ["verify", str(path), "--reference", "da2-tiny", "--weights", "random", "--images", str(source),
            "--precision", "fp32", "--out", str(out), "--no-eager", "--gate", "fp32.rel_l2=0"]
    assert main(args) == 1  # a gate that cannot pass: exit status 1, report still written
    report = json.loads((out / "report.json").read_text())
    [art] = report["artifacts"]
    assert 0 < art["parity"]["rel_l2_pooled"] < 1e-5
    assert art["checks"]["parity"]["passed"] is False and "rel_l2_pooled" in art["checks"]["parity"]["reasons"][0]
    assert report["random_weights"] is True and "vs_eager" not in art["parity"]
    assert report["verify"]["images"] == ["cat.jpg"] and report["command"].startswith("depthport")
    assert "FAIL" in (out / "report.html").read_text(encoding="utf-8")
    # judged as the export's verify stage judges (it is the same code), but the user's file stays where it is
    assert art["status"] == "not shipped" and shipped(art) is False and "rel_l2_pooled" in art["status_reason"]
    assert path.is_file() and "not_shipped" not in report


def test_cli_verify_interrupted_leaves_the_earlier_report_pair_whole(tiny, tmp_path, images, capsys, monkeypatch):
    """Ctrl-C while verify rendered report.html (seconds for a large report) left the new report.json beside the
    earlier run's report.html, and the line said 'nothing was written'. Both are now written together, after the
    rendering: the earlier pair stays as it was, and the line is true."""
    import depthport.report.html as html

    _, path = tiny
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    images[0][1].save(tmp_path / "a" / "one.jpg")
    images[1][1].save(tmp_path / "b" / "two.jpg")
    out = tmp_path / "v"
    args = ["verify", str(path), "--reference", "da2-tiny", "--weights", "random", "--precision", "fp32", "--out",
            str(out), "--no-eager"]
    assert main([*args, "--images", str(tmp_path / "a")]) == 0
    before = {name: (out / name).read_bytes() for name in ("report.json", "report.html")}

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(html, "render", interrupted)
    capsys.readouterr()
    assert main([*args, "--images", str(tmp_path / "b")]) == 130
    assert "interrupted; nothing was written" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_cli_verify_of_a_file_that_does_not_run_reports_why(tiny, tmp_path, capsys, monkeypatch):
    """A file whose run fails after it loaded gets a parity error in its report (exit status 1), not a traceback:
    depthport's own verify_file is made to raise as a runtime's failure would."""
    from depthport.verify import stage

    _, path = tiny

    def fails(*args, **kwargs):
        raise RuntimeError("the interpreter failed")

    monkeypatch.setattr(stage, "verify_file", fails)
    code = main(["verify", str(path), "--reference", "da2-tiny", "--weights", "random", "--precision", "fp32",
                 "--out", str(tmp_path / "v"), "--no-eager", "--no-fp64", "--no-cache"])
    assert code == 1
    report = json.loads((tmp_path / "v" / "report.json").read_text())
    assert report["verify"]["reference_cache"] == {"used": False, "why": "off (--no-cache)"}
    [art] = report["artifacts"]
    assert art["parity"]["error"] == "verification failed: RuntimeError: the interpreter failed"
    assert art["status"] == "not shipped"
    assert "verification failed" in capsys.readouterr().out


def test_cli_verify_runs_the_export_verify_stage_on_the_files_in_place(tiny, tmp_path, monkeypatch):
    """`depthport verify` is the export's verify stage over the user's files: one code path, told only that the
    files stay where they are and are named by file name."""
    from depthport.verify import stage

    _, path = tiny
    calls = []
    real = stage.apply

    def spy(ctx, report):
        calls.append((ctx.in_place, ctx.options.eager, [a["file"] for a in report["artifacts"]]))
        real(ctx, report)

    monkeypatch.setattr(stage, "apply", spy)
    assert main(["verify", str(path), "--reference", "da2-tiny", "--weights", "random", "--precision", "fp32",
                 "--out", str(tmp_path / "v"), "--no-eager", "--no-fp64", "--no-cache"]) == 1  # FP32 without fp64
    assert calls == [(True, False, [str(path)])]
    report = json.loads((tmp_path / "v" / "report.json").read_text())
    assert report["artifacts"][0]["status"] == "unverified" and path.is_file()


def test_fp16_arithmetic_verdict_is_measured_only_where_the_cpu_computes_fp16():
    g = gates.thresholds()
    good = {"pearson_worst": 0.99999, "rel_l2_pooled": 1e-3, "delta125_worst": 0.9995}
    bad = {"pearson_worst": 0.99967, "rel_l2_pooled": 1.2e-2, "delta125_worst": 0.967}
    storage = {"arithmetic": False, "mode": "fp16 storage only", "reason": "no avx512_fp16"}
    # Storage only: a good measurement is not evidence; the prediction decides.
    art = {"parity": good, "precision": "fp16", "checks": {"parity": gates.evaluate(good, "fp16", g)},
           "fp16_arithmetic": {**storage, "prediction": {"figures": bad}}}
    verdict = gates.fp16_arithmetic_verdict(art, g)
    assert verdict.state == "fail" and "predicted" in verdict.reason and "no avx512_fp16" in verdict.reason
    art["fp16_arithmetic"]["prediction"] = {"figures": good}
    assert gates.fp16_arithmetic_verdict(art, g).state == "pass"
    art["fp16_arithmetic"]["prediction"] = None
    assert gates.fp16_arithmetic_verdict(art, g).state == "not measured"
    # FP16 arithmetic: the measurement decides, whatever was predicted.
    real = {"arithmetic": True, "mode": "fp16 arithmetic", "reason": "has avx512_fp16"}
    art = {"parity": bad, "precision": "fp16", "checks": {"parity": gates.evaluate(bad, "fp16", g)},
           "fp16_arithmetic": real}
    verdict = gates.fp16_arithmetic_verdict(art, g)
    assert verdict.state == "fail" and "measured on FP16 arithmetic" in verdict.reason
    # x86 FP16 arithmetic keeps the subnormals ARM flushes: its measurement and the ARM prediction must both pass.
    kept = {**real, "subnormals": "kept"}
    arm = {"figures": bad, "accumulate": "xnnpack-arm"}
    art = {"parity": good, "precision": "fp16", "checks": {"parity": gates.evaluate(good, "fp16", g)},
           "fp16_arithmetic": {**kept, "prediction": arm}}
    verdict = gates.fp16_arithmetic_verdict(art, g)
    assert verdict.state == "fail" and "measured on FP16 arithmetic" in verdict.reason
    assert "subnormals flushed" in verdict.reason and verdict.figures["predicted"]["delta125_worst"] == 0.967
    art["fp16_arithmetic"]["prediction"] = {**arm, "figures": good}
    assert gates.fp16_arithmetic_verdict(art, g).state == "pass"
    art["fp16_arithmetic"]["prediction"] = {**arm, "error": "RuntimeError: out of memory"}
    assert gates.fp16_arithmetic_verdict(art, g).state == "not measured"
    # Storage only, measured on the emulated ARMv8.2-A CPU (--fp16-arm64): the emulated measurement decides.
    emulated = {**bad, "compute_reason": "sentinel: 4096 ones summed to 2048"}
    art = {"parity": good, "precision": "fp16", "checks": {"parity": gates.evaluate(good, "fp16", g)},
           "fp16_arithmetic": {**storage, "prediction": {"figures": good}, "emulated": emulated}}
    verdict = gates.fp16_arithmetic_verdict(art, g)
    assert verdict.state == "fail" and "emulated: sentinel: 4096 ones summed to 2048" in verdict.reason
    art["fp16_arithmetic"]["emulated"] = {**good, "compute_reason": "sentinel: 4096 ones summed to 2048"}
    assert gates.fp16_arithmetic_verdict(art, g).state == "pass"
    # The emulation could not run: the prediction decides and the reason says why it was not measured.
    art["fp16_arithmetic"]["emulated"] = {"not_measured": "qemu-aarch64 is not installed"}
    verdict = gates.fp16_arithmetic_verdict(art, g)
    assert verdict.state == "pass" and "predicted" in verdict.reason
    assert "emulation not measured: qemu-aarch64 is not installed" in verdict.reason


def test_fp16_pte_export_is_gated_on_fp16_arithmetic(tmp_path, monkeypatch):
    from depthport.cli import main
    from depthport.core.machine import fp16_arithmetic
    from depthport.core.schema import read_report

    from depthport.runtimes import arm64

    monkeypatch.setenv(arm64.ROOT_ENV, str(tmp_path / "no-arm64-here"))  # --fp16-arm64 without the emulator
    out = tmp_path / "out"
    rc = main(["export", "da2-tiny", "--size", "56x70", "--targets", "xnnpack-fp16", "--out", str(out),
               "--skip", "ledger,bench", "--fp16-arm64"])
    report = read_report(out / "report.json")
    art = report["artifacts"][0]
    check = art["checks"]["fp16_arithmetic"]
    found = fp16_arithmetic()
    assert check["required"] is True
    kept = found["arithmetic"] and found.get("subnormals") == "kept"
    assert art["fp16_arithmetic"]["evidence"] == (
        "measured, and predicted with subnormals flushed as on ARM" if kept
        else "measured" if found["arithmetic"] else "predicted")
    if not found["arithmetic"] or kept:
        prediction = art["fp16_arithmetic"]["prediction"]
        assert prediction["accumulate"] == "xnnpack-arm"
        # Beside a measurement on every image, the ARM prediction runs on one, and says so; alone, on the budget's.
        assert len(prediction["images"]) == (1 if kept else report["evidence_budget"]["fp16_images"])
        assert ("beside the file's own measurement on FP16 arithmetic" in prediction.get("subset", "")) is kept
        if kept:
            assert "on 1 of 6 images" in " ".join(check["reasons"])
    assert art["parity"]["compute"] == found["mode"]
    assert f"measured with {found['mode']}" in " ".join(art["checks"]["parity"]["reasons"])
    if not found["arithmetic"]:
        assert "setup.sh" in art["fp16_arithmetic"]["emulated"]["not_measured"]
        assert "emulation not measured" in " ".join(check["reasons"])
    else:
        assert "emulated" not in art["fp16_arithmetic"]
    assert (rc == 0) == (art["status"] == "shipped")


@pytest.mark.parametrize("case", ["export", "in place", "bench skipped", "arm64", "web", "shapes"])
def test_verify_leaves_a_file_runner_for_the_bench_only_where_the_bench_runs_and_nothing_loads_beside_it(
        tiny_built, tmp_path, case):
    from depthport.verify.stage import keep_warm

    options = StageOptions(skip={"bench"} if case == "bench skipped" else (), fp16_arm64=case == "arm64")
    ctx = ExportContext(tiny_built, tmp_path, "da2_tiny", options=options, in_place=case == "in place")
    art = {"file": "a.tflite", "target": "litert-fp32"}
    other = {"file": "b", "target": "web", **({"web": {"runtime": "litert.js"}} if case == "web" else {}),
             **({"verify_shapes": [[56, 56]]} if case == "shapes" else {})}
    keep = keep_warm(ctx, {"artifacts": [art, other]}, art)
    if case != "export":
        assert keep is None and ctx.warm_runners == {}
        return
    runner = object()
    keep(runner, 12.5)
    assert ctx.warm_runners == {"litert-fp32": (runner, 12.5)}
