"""Evidence that cannot say "pass" when nothing passed: three-state verdicts from export to card, the GPU run
deciding, the float64 floor, transactional output folders and one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from depthport.verify import gates
from PIL import Image

from depthport.cli import main
from depthport.core.schema import NOT_MEASURED, Verdict, file_status, read_report, ReportError

from helpers import gpu_ok, import_or_skip, shipped

ASSET = "src/depthport/assets/chelsea.jpg"
TINY = ["export", "da2-tiny", "--size", "56x70"]
FAST_SKIP = "ledger,bench"


@pytest.fixture(scope="module")
def one_image(tmp_path_factory):
    folder = tmp_path_factory.mktemp("one-image")
    Image.open(ASSET).convert("RGB").resize((140, 112)).save(folder / "chelsea.png")
    return folder


@pytest.fixture(scope="module")
def verified(tmp_path_factory, one_image):
    """A full export of the tiny model: verify (with the float64 reference), report and card."""
    out = tmp_path_factory.mktemp("verified") / "out"
    rc = main([*TINY, "--out", str(out), "--images", str(one_image), "--skip", "ledger"])
    return rc, out, read_report(out / "report.json")


def test_verdict_type_has_three_states_and_round_trips():
    v = Verdict.not_measured("no Vulkan device")
    assert v.state == NOT_MEASURED and not v.ok and v.text() == "not measured: no Vulkan device"
    assert Verdict.from_dict(v.to_dict()) == v and v.to_dict()["passed"] is None
    with pytest.raises(ValueError):
        Verdict("maybe")
    with pytest.raises(ReportError, match="state"):
        Verdict.from_dict({"state": "ok"})


def test_status_rule():
    art = {"file": "x", "checks": {}}
    assert file_status(art)[0] == "unverified"
    art["checks"]["parity"] = {**Verdict.passed().to_dict(), "required": True}
    art["checks"]["fp16_compute"] = {**Verdict.failed("overflow").to_dict(), "required": False}
    assert file_status(art)[0] == "shipped"
    art["checks"]["gpu_runtime"] = {**Verdict.not_measured("no Vulkan device").to_dict(), "required": True}
    status, why = file_status(art)
    assert status == "not shipped" and "no Vulkan device" in why
    art["checks"]["gpu_runtime"] = {**Verdict.not_measured("asked", "skipped on request").to_dict(), "required": True}
    assert file_status(art)[0] == "unverified"


def test_fp32_file_is_gated_against_float64(verified):
    rc, out, report = verified
    assert rc == 0
    [art] = report["artifacts"]
    assert art["status"] == "shipped" and art["checks"]["parity"]["state"] == "pass"
    p = art["parity"]
    assert p["fp64_error_ratio"] == pytest.approx(p["vs_reference_fp64"]["rel_l2_pooled"] / p["upstream_fp32_vs_fp64"])
    assert 0 < p["fp64_error_ratio"] <= gates.FP64_RATIO_GATE
    assert "fp64_error_ratio" in art["checks"]["parity"]["thresholds"]
    assert art["checks"]["gpu_static"]["state"] == "pass" and art["checks"]["gpu_static"]["required"] is True
    assert art["checks"]["gpu_runtime"]["state"] == NOT_MEASURED and art["checks"]["gpu_runtime"]["required"] is False
    assert report["schema_version"] == 3 and "README.md" in report["written_files"]


def test_card_says_only_what_is_true(verified):
    from huggingface_hub import ModelCard

    _, out, report = verified
    card = ModelCard.load(out / "README.md")
    assert card.data.library_name == "litert" and card.data.base_model is None
    assert "random-weights" in card.data.tags
    text = (out / "README.md").read_text()
    assert "as far from exact as upstream PyTorch" in text and "RANDOM WEIGHTS" in text
    [art] = report["artifacts"]
    assert art["checks"]["fp16_compute"]["state"] in ("pass", "fail")
    expected = "FP32"  # random weights: FP16 is never recommended on a random-weights prediction alone
    assert f"Precision.{expected})" in text and f"GPU precision set explicitly: {expected}" in text
    assert "FP16 headroom of trained weights" in text
    assert "rounds x" in text and "not measured: runtime check not run (use --run-gpu)" in text
    assert "Every variant built passed every check" in text and "passed its gates" not in text
    page = (out / "report.html").read_text()
    assert ">Against float64" in page and "not measured</span>: runtime check not run" in page


def test_skipped_verification_is_unverified_everywhere(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*TINY, "--out", str(out), "--skip", "ledger,verify,bench"]) == 0
    captured = capsys.readouterr()
    assert "UNVERIFIED" in captured.err and "unverified" in captured.out
    report = read_report(out / "report.json")
    [art] = report["artifacts"]
    assert art["status"] == "unverified" and shipped(art) is False
    assert art["checks"]["parity"]["state"] == NOT_MEASURED and art["checks"]["parity"]["cause"] == "skipped on request"
    text = (out / "README.md").read_text()
    assert "**UNVERIFIED**" in text and "passed every check" not in text and "passed its gates" not in text
    assert "Parity was **not measured**" in text and "Parity is against" not in text
    assert "not measured" in (out / "report.html").read_text()


def test_gpu_run_without_a_device_is_a_failure_not_a_pass(tmp_path, capsys, monkeypatch):
    import depthport.runtimes.swiftshader as swiftshader

    monkeypatch.delenv("VK_ICD_FILENAMES", raising=False)
    monkeypatch.delenv("VK_DRIVER_FILES", raising=False)
    monkeypatch.setenv("DEPTHPORT_SWIFTSHADER_DIR", str(tmp_path / "none"))
    monkeypatch.setattr(swiftshader, "SYSTEM_CHROMIUM", tmp_path / "no-chromium")
    out = tmp_path / "out"
    assert main([*TINY, "--out", str(out), "--run-gpu", "--skip", "ledger,verify,bench,report,card"]) == 1
    err = capsys.readouterr().err
    assert "litert-fp32" in err and "not shipped" in err and "no Vulkan device" in err
    [art] = read_report(out / "report.json")["artifacts"]
    assert art["checks"]["gpu_runtime"]["state"] == NOT_MEASURED and art["checks"]["gpu_runtime"]["required"]
    assert gpu_ok(art) is None and art["file"].startswith("not-shipped/")


def test_da3_verification_without_its_reference_package_fails_the_export(tmp_path, capsys, monkeypatch, one_image):
    import_or_skip("depth_anything_3.cfg")
    for name in [m for m in sys.modules if m.startswith("depth_anything_3")] + ["depth_anything_3"]:
        monkeypatch.setitem(sys.modules, name, None)
    out = tmp_path / "out"
    rc = main(["export", "da3-tiny", "--size", "70x42", "--out", str(out), "--images", str(one_image),
               "--skip", "ledger,bench,report,card"])
    err = capsys.readouterr().err
    assert rc == 1 and "depth_anything_3" in err and "Traceback" not in err
    [art] = read_report(out / "report.json")["artifacts"]
    assert art["status"] == "not shipped" and art["checks"]["parity"]["cause"] == "could not run"
    path = out / art["file"]
    rc = main(["verify", str(path), "--reference", "da3-tiny", "--weights", "random", "--images", str(one_image)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "depth_anything_3" in err


def test_coreml_is_unverified_not_a_crash(tmp_path, capsys, one_image):
    import_or_skip("coremltools")
    out = tmp_path / "out"
    rc = main([*TINY, "--targets", "coreml", "--out", str(out), "--images", str(one_image),
               "--skip", "ledger,bench,report"])
    err = capsys.readouterr().err
    assert rc == 1 and "coreml" in err and "unverified" in err and "Traceback" not in err
    [art] = read_report(out / "report.json")["artifacts"]
    assert art["status"] == "unverified" and art["checks"]["parity"]["cause"] == "cannot run here"
    assert art["checks"]["delegation"]["state"] == "pass"
    assert "**UNVERIFIED**" in (out / "README.md").read_text()


def test_dynamic_int8_on_the_gpu_computes_wrongly_is_a_fail():
    from depthport.check.verdict import runtime_verdict
    from depthport.core.report_model import GpuRuntime

    runtime = GpuRuntime(fully_delegated=True, numeric_ok=False, rel_l2_vs_cpu=0.2, tolerance=1e-4,
                         note="all ops delegated; rel L2 vs CPU 2.00e-01 above tolerance 0.0001")
    v = runtime_verdict(runtime)
    assert v.state == "fail" and "computes wrongly" in v.reason and v.thresholds == {"rel_l2_vs_cpu": 1e-4}


# bad input: one line, exit 2, nothing written


@pytest.mark.parametrize("args,message", [
    (["--targets", "litert-fp32,nope"], "unknown target(s) nope"),
    (["--gate", "fp64.pearson=0.9"], "unknown precision 'fp64'"),
    (["--images", "EMPTY"], "no images"),
])
def test_refused_before_any_work(args, message, tmp_path, capsys):
    (tmp_path / "EMPTY").mkdir()
    args = [str(tmp_path / "EMPTY") if a == "EMPTY" else a for a in args]
    out = tmp_path / "out"
    assert main([*TINY, "--out", str(out), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and not out.exists()


def test_out_naming_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("mine")
    assert main([*TINY, "--out", str(target)]) == 2
    assert "is an existing file" in capsys.readouterr().err and target.read_text() == "mine"


def test_out_holding_files_no_export_wrote_is_refused(tmp_path, capsys):
    """`export --out .` in a project replaced its README.md with the model card (and a report.json of its own with
    the export's): now refused before any work, the folder untouched."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# my project")
    assert main([*TINY, "--out", str(project)]) == 2
    err = capsys.readouterr().err
    assert "holds README.md, which no earlier depthport export wrote" in err and len(err.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["project"] and [p.name for p in project.iterdir()] == ["README.md"]
    assert (project / "README.md").read_text() == "# my project"


def test_verify_reads_hub_weights_from_the_report(tiny_reference, tmp_path, monkeypatch, capsys, one_image):
    import huggingface_hub.constants as constants

    repo = tmp_path / "hub" / "models--acme--tiny-depth"
    snapshot = repo / "snapshots" / "0123abcd"
    tiny_reference.model.save_pretrained(snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    out = tmp_path / "out"
    assert main([*TINY, "--weights", "acme/tiny-depth", "--out", str(out), "--skip", "ledger,verify,bench"]) == 0
    report = read_report(out / "report.json")
    assert report["weights"] == "hf://acme/tiny-depth" and report["base_model"] == "acme/tiny-depth"
    capsys.readouterr()
    rc = main(["verify", str(out / "da2_tiny_fp32.tflite"), "--images", str(one_image), "--out", str(tmp_path / "v")])
    assert rc == 0, capsys.readouterr().err
    verified = read_report(tmp_path / "v" / "report.json")
    assert verified["artifacts"][0]["checks"]["parity"]["state"] == "pass"
    header = ("model", "weights", "random_weights", "input_shape", "output", "output_space", "output_units")
    assert {k: verified[k] for k in header} == {k: report[k] for k in header}  # one header builder for both
    assert verified["command"].startswith("depthport verify") and verified["versions"] == report["versions"]


def test_old_report_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "report.json").write_text(json.dumps({"model": "da2-tiny", "artifacts": []}))
    assert main(["card", str(tmp_path)]) == 2
    assert "schema_version" in capsys.readouterr().err


def test_predict_warns_about_random_weights(verified, tmp_path, capsys):
    _, out, _ = verified
    assert main(["predict", str(out / "da2_tiny_fp32.tflite"), ASSET, "-o", str(tmp_path / "d.png")]) == 0
    assert "RANDOM WEIGHTS" in capsys.readouterr().err


def test_da3_accuracy_is_scored_in_depth_space():
    from depthport.verify import accuracy

    _, disparity = accuracy.motorcycle()
    depth = accuracy.depth_from_disparity(disparity)
    filled = np.where(np.isfinite(depth), depth, np.nanmedian(depth))
    as_depth = accuracy.score(filled, disparity, "depth")
    assert as_depth["space"] == "depth" and as_depth["abs_rel"] < 1e-6 and as_depth["delta1"] == 1.0
    assert accuracy.score(filled, disparity, "inverse depth")["abs_rel"] > 10 * as_depth["abs_rel"]


# transactional output folders


def _listing(folder):
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*"))}


def test_reexport_replaces_only_what_depthport_wrote(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main([*TINY, "--targets", "litert-fp32,onnx", "--out", str(out), "--skip", "ledger,verify,bench"]) == 0
    assert (out / "da2_tiny.onnx").exists() or any(p.suffix == ".onnx" for p in out.iterdir())
    assert main([*TINY, "--targets", "litert-fp32", "--out", str(out), "--skip", "ledger,verify,bench,card"]) == 0
    names = {p.name for p in out.iterdir()}
    assert names == {"notes.txt", "da2_tiny_fp32.tflite", "report.json", "report.html"}
    assert not [p for p in tmp_path.iterdir() if ".depthport-staging-" in p.name]
    report = (out / "report.json").read_bytes()  # verify would replace the export's report with its own: refused
    assert main(["verify", str(out / "da2_tiny_fp32.tflite"), "--out", str(out)]) == 2
    assert (out / "report.json").read_bytes() == report and {p.name for p in out.iterdir()} == names
    assert main(["card", str(out)]) == 0  # the card written afterwards is the export's own: re-exporting replaces it
    assert main([*TINY, "--targets", "litert-fp32", "--out", str(out), "--skip", "ledger,verify,bench"]) == 0
    assert {p.name for p in out.iterdir()} == names | {"README.md"}


# The export child, held for a minute after its files are staged (before the check stage): a signal then always
# lands mid-export, however fast or loaded the machine is.
HELD_CHILD = ("import sys, dataclasses, time\nsys.path.insert(0, 'tests')\nimport conversion_memo\n"
              "conversion_memo.install_from_env()\nimport depthport.pipeline as p\n"
              "hold = lambda run: (lambda ctx, report: (time.sleep(60), run(ctx, report))[1])\n"
              "p.STAGES = tuple(dataclasses.replace(s, run=hold(s.run)) if s.name == 'check' else s for s in p.STAGES)\n"
              "from depthport.cli import main\nsys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_export_leaves_the_folder_as_it_was(tmp_path, sig, one_image, monkeypatch):
    """... and its temporary files (the FP32 file its FP16 one starts from): removed at exit after SIGTERM; after
    SIGKILL, by the next export."""
    out, temp = tmp_path / "out", tmp_path / "temp"
    temp.mkdir()
    assert main([*TINY, "--out", str(out), "--skip", "ledger,verify,bench"]) == 0
    (out / "notes.txt").write_text("mine")
    before = _listing(out)
    proc = subprocess.Popen([sys.executable, "-c", HELD_CHILD, *TINY, "--targets", "litert-fp16",
                             "--out", str(out), "--images", str(one_image)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": "src", "TMPDIR": str(temp)})
    deadline = time.time() + 120
    staging = []
    while time.time() < deadline and not staging:
        staging = [p for p in tmp_path.iterdir() if ".depthport-staging-" in p.name and any(p.iterdir())]
        time.sleep(0.1)
    assert staging, "the export never started writing"
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert _listing(out) == before
    left = [p for p in tmp_path.iterdir() if ".depthport-staging-" in p.name]
    assert bool(left) is (sig == signal.SIGKILL)
    kept = [p.relative_to(temp).parts for p in temp.rglob("*.tflite")]
    assert [(p[0].split("-")[1], p[-1]) for p in kept] == ([(str(proc.pid), "da2_tiny_fp32.tflite")]
                                                            if sig == signal.SIGKILL else []), kept
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    assert main([*TINY, "--out", str(out), "--skip", "ledger,verify,bench"]) == 0
    assert not [p for p in tmp_path.iterdir() if ".depthport-staging-" in p.name]
    assert not list(temp.iterdir())
    assert (out / "notes.txt").read_text() == "mine"
