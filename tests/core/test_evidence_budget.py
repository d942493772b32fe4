"""The evidence budget (core.evidence_budget): how many images the float64 reference and the FP16-compute prediction
run on, and that a subset is said aloud in the report, the verdicts, the card and the console."""

from __future__ import annotations

import contextlib
import io
import itertools
import json

import pytest
from helpers import TINY_HW

from depthport.core import evidence_budget as budget_module
from depthport.core.evidence_budget import BUDGET, LEDGER_BUDGET, PARITY_BUDGET, PATCH, evidence_budget


@pytest.mark.parametrize("params, hw, want, parity", [
    (24.8e6, (518, 686), 6, 6),  # da2-small: every image
    (97.5e6, (518, 686), 6, 6),  # da2-base: every image
    (335.3e6, (518, 686), 2, 6),  # da2-large
    (334.1e6, (896, 504), 1, 4),  # da3-metric-large
    (340.0e6, (756, 1008), 1, 2),  # prompt-da-large
])
def test_the_budget_keeps_every_image_up_to_base_models_and_fewer_for_large_ones(params, hw, want, parity):
    budget = evidence_budget(params, hw, 6)
    assert budget.count == want and budget.subset == (want < 6) and budget.parity_count == parity
    assert budget.count == 1 or budget.count * budget.per_image <= BUDGET
    assert parity == 6 or parity * budget.per_image <= PARITY_BUDGET
    assert budget.as_entry()["parity_images"] == parity
    what = "float64 reference, FP16-compute prediction and depthport eager"
    parts = [f"parity (upstream FP32 reference and each file) on {parity} of 6 images (evidence budget)"] * (parity < 6)
    parts += [f"{what} on {want} of 6 images (evidence budget)"] * (want < 6)
    assert budget.line == "; ".join(parts)
    if parts:
        assert budget.as_entry()["line"] == budget.line
    else:
        assert "line" not in budget.as_entry()


def test_evidence_images_overrides_the_budget():
    everything = evidence_budget(340e6, (756, 1008), 6, requested=0)
    assert everything.count == everything.parity_count == 6 and everything.line == ""
    assert everything.as_entry()["requested"] == "all"  # --evidence-images all: the report said 0
    assert evidence_budget(1e6, (56, 70), 6).as_entry()["requested"] is None
    assert evidence_budget(340e6, (756, 1008), 6, requested=4).parity_count == 4  # never fewer than the float64's
    one = evidence_budget(1e6, (56, 70), 6, requested=1)
    assert one.count == 1 and one.line.endswith("on 1 of 6 images (--evidence-images)")
    assert evidence_budget(1e6, (56, 70), 3, requested=5).count == 3


def test_a_subset_is_labelled_in_the_report_the_verdicts_the_card_and_the_console(tmp_path, tiny_weights, capsys):
    """--evidence-images 1 on the tiny model (the same path a Large model takes by budget): float64 on 1 of 2
    images, the FP16 prediction on 1 of 2, both said in every place that shows them."""
    from depthport.cli import main
    from depthport.core.images import builtin_image

    images = tmp_path / "images"
    images.mkdir()
    for name in ("chelsea", "astronaut"):
        builtin_image(name).save(images / f"{name}.png")
    out = tmp_path / "out"
    code = main(["export", "da2-tiny", "--weights", "random", "--size", f"{TINY_HW[0]}x{TINY_HW[1]}",
                 "--targets", "litert-fp32", "--images", str(images), "--evidence-images", "1", "--skip",
                 "ledger,bench", "--out", str(out)])
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    line = "float64 reference, FP16-compute prediction and depthport eager on 1 of 2 images (--evidence-images)"
    assert report["evidence_budget"]["line"] == line
    [art] = report["artifacts"]
    assert art["parity"]["images"] == 2 and art["parity"]["vs_reference_fp64"]["images"] == 1
    assert art["parity"]["fp64_images"] == "float64 reference on 1 of 2 images"
    assert art["parity"]["vs_eager"]["images"] == 1
    assert art["parity"]["eager_images"] == "depthport eager on 1 of 2 images"
    assert "fp64_error_ratio: float64 reference on 1 of 2 images" in art["checks"]["parity"]["reasons"]
    assert art["fp16_compute"]["inputs"] == 1 and art["fp16_compute"]["images"] == ["astronaut.png"]
    assert "FP16-compute prediction on 1 of 2 images" in " ".join(art["checks"]["fp16_compute"]["reasons"])
    assert line in (out / "README.md").read_text()
    assert line in " ".join(capsys.readouterr().out.split())

    assert main(["verify", str(out / art["file"]), "--images", str(images), "--evidence-images", "1",
                 "--out", str(tmp_path / "v")]) == 0
    again = json.loads((tmp_path / "v" / "report.json").read_text())
    assert again["evidence_budget"]["line"] == line
    assert again["artifacts"][0]["parity"]["fp64_images"] == "float64 reference on 1 of 2 images"
    assert again["artifacts"][0]["parity"]["eager_images"] == "depthport eager on 1 of 2 images"
    assert line in " ".join(capsys.readouterr().out.split())


@pytest.fixture(scope="module")
def large_path(tmp_path_factory):
    """The tiny model exported on the path a Large model takes: the parity budget lowered so that the file and the
    upstream FP32 reference run on 2 of 3 images (the ground-truth scene, sorted last, among them). (report,
    README.md, console output)."""
    from depthport.cli import main
    from depthport.core.images import builtin_image

    images = tmp_path_factory.mktemp("images")
    for name in ("astronaut", "chelsea", "motorcycle_left"):
        builtin_image(name).save(images / f"{name}.png")
    out = tmp_path_factory.mktemp("large-path") / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(budget_module, "PARITY_BUDGET", 1.0)
        console = io.StringIO()
        with contextlib.redirect_stdout(console):
            code = main(["export", "da2-tiny", "--weights", "random", "--size", f"{TINY_HW[0]}x{TINY_HW[1]}",
                         "--targets", "litert-fp32", "--images", str(images), "--evidence-images", "1",
                         "--skip", "ledger,bench", "--out", str(out)])
    assert code == 0
    return json.loads((out / "report.json").read_text()), (out / "README.md").read_text(), console.getvalue()


def test_a_parity_subset_keeps_the_ground_truth_scene_and_is_labelled(large_path):
    report, card, console = large_path
    line = "parity (upstream FP32 reference and each file) on 2 of 3 images (evidence budget)"
    assert report["evidence_budget"]["line"].startswith(line + "; float64 reference")
    assert report["evidence_budget"]["parity_images"] == 2
    assert report["verify"]["images"] == ["astronaut.png", "chelsea.png", "motorcycle_left.png"]
    assert report["verify"]["parity_images"] == ["astronaut.png", "motorcycle_left.png"]
    [art] = report["artifacts"]
    assert art["parity"]["images"] == 2 and set(art["parity"]["per_image"]) == {"astronaut.png", "motorcycle_left.png"}
    assert art["parity"]["parity_images"] == "parity on 2 of 3 images"
    assert art["parity"]["vs_reference_fp64"]["images"] == 1
    assert "parity on 2 of 3 images" in " ".join(art["checks"]["parity"]["reasons"])
    assert art["status"] == "shipped" and art["accuracy"]["abs_rel"] > 0
    assert line in card and "Parity against the FP32 reference covers every image" not in card
    assert line in " ".join(console.split())


@pytest.mark.parametrize("params, hw, passes, scaled", [
    (24.8e6, (518, 686), 10, False),  # da2-small
    (97.5e6, (504, 896), 10, False),  # da3-base: the ledger at the export shape
    (334.1e6, (896, 504), 10, True),  # da3-metric-large
    (335.3e6, (518, 686), 10, True),  # da2-large
])
def test_the_ledger_runs_at_a_smaller_shape_only_when_its_passes_exceed_the_budget(params, hw, passes, scaled):
    budget = evidence_budget(params, hw, 6, ledger_passes=passes)
    lh, lw = budget.ledger_hw
    if not scaled:
        assert (lh, lw) == hw and budget.ledger == "" and "rewrite ledger" not in budget.line
        return
    assert lh < hw[0] and lw < hw[1] and lh % (2 * PATCH) == 0 and lw % (2 * PATCH) == 0
    assert passes * params * (lh // PATCH) * (lw // PATCH) <= LEDGER_BUDGET
    assert abs(lh / lw - hw[0] / hw[1]) < 0.1  # the aspect kept
    assert budget.line.endswith(f"rewrite ledger at {lh}x{lw} instead of {hw[0]}x{hw[1]} (evidence budget)")
    assert budget.as_entry()["ledger_hw"] == [lh, lw]
    assert evidence_budget(params, hw, 6, requested=0, ledger_passes=passes).ledger_hw == hw  # all: in full


def test_a_scaled_down_ledger_is_said_in_the_report_the_card_and_the_console(tmp_path, monkeypatch, capsys):
    """The tiny model's ledger with the budget lowered so that it does not fit: the path a Large model takes."""
    from depthport.cli import main

    monkeypatch.setattr(budget_module, "LEDGER_BUDGET", 1.0)
    out = tmp_path / "out"
    assert main(["export", "da2-tiny", "--weights", "random", "--size", f"{TINY_HW[0]}x{TINY_HW[1]}", "--targets",
                 "litert-fp32", "--skip", "verify,bench", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    shape = f"{2 * PATCH}x{2 * PATCH}"
    assert report["rewrite_ledger_hw"] == [2 * PATCH, 2 * PATCH]
    assert len(report["rewrite_ledger"]) > 3
    assert all(e["rel_l2_step"] < 1e-5 for e in report["rewrite_ledger"] if e["exact"])
    line = f"rewrite ledger at {shape} instead of {TINY_HW[0]}x{TINY_HW[1]} (evidence budget)"
    assert report["evidence_budget"]["line"] == line
    card = " ".join((out / "README.md").read_text().split())
    assert f"one natural image at {shape}, the export shape ({TINY_HW[0]}x{TINY_HW[1]}) scaled down" in card
    assert line in " ".join(capsys.readouterr().out.split())


def test_evidence_images_must_be_all_or_a_positive_count(capsys):
    from depthport.cli import main

    with pytest.raises(SystemExit):
        main(["export", "da2-tiny", "--evidence-images", "0", "--out", "x"])
    assert "must be 'all' or at least 1 image" in capsys.readouterr().err


def test_the_built_model_and_weights_wait_on_disk_while_the_ledger_runs(tmp_path, monkeypatch):
    """With every model above the release size (as a Large one is), the ledger's passes run while depthport's built
    model and its weights are on disk (the ledger's float64 model holds the weights), and its figures are those of
    a ledger that keeps them; the file exported after it is the same."""
    from depthport import pipeline
    from depthport.cli import main
    from depthport.rewrites import ledger
    from depthport.weights import load

    def export(out):
        args = ["export", "da2-tiny", "--weights", "random", "--size", f"{TINY_HW[0]}x{TINY_HW[1]}", "--targets",
                "litert-fp32", "--skip", "verify,bench", "--no-cache", "--out", str(out)]
        assert main(args) == 0
        return json.loads((out / "report.json").read_text())

    kept = export(tmp_path / "kept")
    built, seen, build, measure = [], [], pipeline.build, ledger.measure

    def keep_built(*args, **kwargs):
        built.append(build(*args, **kwargs))
        return built[-1]

    def spy(steps, x, on_pass=None):
        first = next(steps)  # the float64 model is built, and the weights read, by the first step
        seen.append((built[0]._spill is not None, built[0].weights._state is None))
        return measure(itertools.chain([first], steps), x, on_pass)  # one step's copy at a time, as measure takes them

    monkeypatch.setattr(pipeline, "build", keep_built)
    monkeypatch.setattr(ledger, "measure", spy)
    monkeypatch.setattr(load, "RELEASE_BYTES", 0)
    released = export(tmp_path / "released")
    assert seen == [(True, True)]
    assert released["rewrite_ledger"] == kept["rewrite_ledger"] and released["rewrite_ledger"]
    assert ((tmp_path / "released" / "da2_tiny_fp32.tflite").read_bytes()
            == (tmp_path / "kept" / "da2_tiny_fp32.tflite").read_bytes())


def test_depthports_model_waits_on_disk_while_the_float64_reference_runs(tmp_path, monkeypatch):
    """With every model above the release size (as a Large one is), verify parks depthport's model after its eager
    outputs (``verify.stage.park_eager``) and the export's figures are those of an export that keeps it."""
    from depthport.cli import main
    from depthport.verify import stage
    from depthport.weights import load

    def export(out):
        args = ["export", "da2-tiny", "--weights", "random", "--size", f"{TINY_HW[0]}x{TINY_HW[1]}", "--targets",
                "litert-fp32", "--skip", "ledger,bench", "--no-cache", "--out", str(out)]
        assert main(args) == 0
        return json.loads((out / "report.json").read_text())["artifacts"][0]

    kept = export(tmp_path / "kept")
    parked = []
    park = stage.park_eager

    def spy(ctx, refs):
        park(ctx, refs)
        parked.append(ctx.built._spill is not None and refs.eager.rebuild is not None)

    monkeypatch.setattr(stage, "park_eager", spy)
    monkeypatch.setattr(load, "RELEASE_BYTES", 0)
    art = export(tmp_path / "parked")
    assert parked == [True]
    assert art["parity"] == kept["parity"] and art["status"] == kept["status"] == "shipped"
