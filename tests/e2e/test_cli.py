"""The command line end to end on the tiny config, and its answers to bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from depthport.cli import main

from helpers import gpu_ok, vulkan_or_skip

ASSET = "src/depthport/assets/chelsea.jpg"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "out"
    rc = main(["export", "da2-tiny", "--size", "56x70", "--out", str(out), "--skip", "verify,bench,report,card"])
    assert rc == 0
    return out


def test_export_writes_the_file_and_report(exported):
    report = json.loads((exported / "report.json").read_text())
    assert report["model"] == "da2-tiny" and report["weights"] == "random" and report["random_weights"]
    assert report["input_shape"] == [1, 3, 56, 70]
    (art,) = report["artifacts"]
    assert (exported / art["file"]).stat().st_size == art["bytes"]
    assert art["target"] == "litert-fp32" and art["output_shape"] == [1, 56, 70]
    assert art["op_count"] == sum(art["op_histogram"].values()) and art["max_tensor_rank"] <= 4
    assert gpu_ok(art) is True and not [v for v in art["gpu_check"]["violations"] if v["severity"] == "error"]
    assert not [p for p in exported.iterdir() if p.name.endswith(".part")]


def test_the_summary_says_why_a_shipped_files_check_was_not_measured(exported):
    """The export's table showed 'GPU runtime: not measured' with an empty 'why' for a shipped file: 'not measured'
    always comes with its reason."""
    import dataclasses

    from depthport.cli.export import why
    from depthport.core.report_model import load_report

    (art,) = load_report(json.loads((exported / "report.json").read_text())).artifacts
    assert art.status == "unverified" and why(art) == (f"{art.status_reason}; GPU runtime: runtime check not run "
                                                       "(use --run-gpu)")
    shipped = dataclasses.replace(art, status="shipped", status_reason="")
    assert why(shipped) == (f"parity: {art.verdict('parity').reason}; GPU runtime: runtime check not run (use "
                            "--run-gpu)")


def test_predict_writes_png_and_npy(exported, tmp_path, capsys):
    png, npy = tmp_path / "d.png", tmp_path / "d.npy"
    assert main(["predict", str(exported / "da2_tiny_fp32.tflite"), ASSET, "-o", str(png), "--npy", str(npy)]) == 0
    depth = np.load(npy)
    w, h = Image.open(ASSET).size
    assert depth.shape == (h, w) and depth.std() > 0  # at the photo's size
    assert Image.open(png).size == (w, h)


def test_models_lists_licences(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "da2-small" in out and "Apache-2.0" in out and "CC-BY-NC-4.0" in out and "da2-tiny" not in out


def test_depthport_alone_and_help_describe_the_tool_and_each_command(capsys):
    """`depthport` alone printed only "the following arguments are required: command", and `-h` described the tool
    with a fragment of a module docstring ("cli: the `depthport` command line, one module per ...")."""
    assert main([]) == 2
    alone = capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(["-h"])
    helped = capsys.readouterr().out
    assert done.value.code == 0 and " ".join(alone.split()) == " ".join(helped.split())
    text = " ".join(helped.split())
    assert "Monocular depth models" in text and "cli:" not in text and "depthport COMMAND -h" in text
    assert "export a model to on-device files" in text and "predict run an exported file" in text
    for command in ("predict", "serve"):  # each command's own help opens with what it does
        with pytest.raises(SystemExit):
            main([command, "-h"])
        assert capsys.readouterr().out.split("\n\n")[1].split()[:2] == {"predict": ["run", "an"],
                                                                          "serve": ["serve", "a"]}[command]


def test_version_names_depthport_python_and_the_runtimes(capsys):
    import platform
    from importlib.metadata import version

    from depthport import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    lines = capsys.readouterr().out.splitlines()
    assert done.value.code == 0 and lines[0] == f"depthport {__version__}"
    assert f"python {platform.python_version()}" in lines
    assert f"torch {version('torch')}" in lines and f"executorch {version('executorch')}" in lines


def test_python_m_depthport_is_the_command():
    """`python -m depthport` (the usual way to run a tool in a venv one has not activated) said "No module named
    depthport.__main__"."""
    run = subprocess.run([sys.executable, "-m", "depthport", "--version"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.startswith("depthport "), run.stderr[-500:]


@pytest.mark.parametrize("args,message", [
    (["export", "da9-huge"], "unknown model 'da9-huge'"),
    (["export", "da2-tiny", "--size", "56by70"], "malformed size"),
    (["export", "da2-tiny", "--size", "50x70"], "patch size 14 on both sides; the nearest is 56x70"),
    (["export", "da2-tiny", "--size", "56x70", "--targets", "litert-fp64"],
     "unknown target(s) litert-fp64: did you mean litert-fp32, litert-fp16 or litert-int8?"),
    (["export", "da2-tiny", "--size", "56x70", "--targets", "onnx,tflite"],
     "unknown target(s) tflite: did you mean litert-fp32, litert-fp16, litert-int8 or litert-int8-weight?"),
    (["export", "da2-tiny", "--size", "56x70", "--targets", "pte,nope"], "unknown target(s) pte: did you mean "
     "xnnpack-fp32, coreml, xnnpack-fp16, xnnpack-fp16-split or xnnpack-int8?; nope; available: coreml, "),
    (["export", "da2-tiny", "--size", "56x70", "--weights", "/nope/ckpt.pth"], "checkpoint not found"),
])
def test_bad_export_input_is_one_line_exit_2(args, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_target_names_ignore_case_underscores_and_repeats_and_the_help_lists_them_all():
    """What people type for litert-fp32: the same targets, each once; `export -h` names every target (written out
    there, so that the help imports no torch)."""
    from depthport.cli.export import TARGET_NAMES
    from depthport.export.targets import TARGETS
    from depthport.pipeline import parse_targets

    assert parse_targets("LiteRT_FP32, onnx,litert-fp32") == ("litert-fp32", "onnx")
    assert sorted(TARGET_NAMES) == sorted(TARGETS) and len(set(TARGET_NAMES)) == len(TARGET_NAMES)


def test_an_output_folder_whose_name_is_not_utf8_is_refused_before_any_work(tmp_path, capsys):
    """litert-torch's native writer and the runtimes' loaders take UTF-8 paths only (a TypeError deep inside)."""
    out = Path(os.fsdecode(bytes(tmp_path) + b"/r\xe9sultats"))  # a Latin-1 name
    assert main(["export", "da2-tiny", "--size", "56x70", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("r\ufffdsultats: the path is not valid UTF-8, and the runtimes' native code takes UTF-8 paths "
                        "only; rename it or give another one") and len(err.splitlines()) == 1
    assert os.listdir(bytes(tmp_path)) == []


def test_mismatched_checkpoint_leaves_no_output(tmp_path, capsys):
    from safetensors.torch import save_file
    import torch

    save_file({"backbone.embeddings.cls_token": torch.zeros(1, 1, 32)}, tmp_path / "c.safetensors")
    out = tmp_path / "out"
    rc = main(["export", "da2-tiny", "--size", "56x70", "--weights", str(tmp_path / "c.safetensors"), "--out", str(out)])
    assert rc == 2 and not out.exists()
    assert "does not match the architecture" in capsys.readouterr().err


@pytest.mark.parametrize("make,message", [
    (lambda p: p.write_bytes(b"garbage"), "cannot read image"),
    (lambda p: Image.fromarray(np.zeros((8, 8), np.float32), mode="F").save(p.with_suffix(".tiff")), "unsupported image mode"),
])
def test_bad_images(exported, tmp_path, capsys, make, message):
    path = tmp_path / "img.png"
    make(path)
    target = path if path.exists() else path.with_suffix(".tiff")
    rc = main(["predict", str(exported / "da2_tiny_fp32.tflite"), str(target), "-o", str(tmp_path / "o.png")])
    assert rc == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o.png").exists()


def test_gpu_target_that_is_not_gpu_clean_fails_loudly(tmp_path, capsys, monkeypatch):
    from depthport import rewrites

    monkeypatch.setattr(rewrites.steps, "default_rewrites",
                        lambda resize="exact", fold_normalization=False, fp16_safe=False: ["bake_pos_embed",
                                                                                          "fold_layerscale"])
    monkeypatch.setattr("depthport.pipeline.default_rewrites", rewrites.steps.default_rewrites)
    out = tmp_path / "out"
    rc = main(["export", "da2-tiny", "--size", "56x70", "--out", str(out), "--skip", "ledger,verify,bench,report,card"])
    err = capsys.readouterr().err
    assert rc == 1 and "litert-fp32 (not-shipped/da2_tiny_fp32.tflite) not shipped" in err and "TRANSPOSE_CONV" in err
    report = json.loads((out / "report.json").read_text())
    [art] = report["artifacts"]
    assert art["status"] == "not shipped" and art["checks"]["gpu_static"]["state"] == "fail"
    assert (out / "not-shipped" / "da2_tiny_fp32.tflite").is_file() and not (out / "da2_tiny_fp32.tflite").exists()


def test_gpu_options_reject_what_cannot_run_on_the_gpu(exported, tmp_path, capsys):
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"not used")
    rc = main(["predict", str(onnx), ASSET, "-o", str(tmp_path / "o.png"), "--accelerator", "gpu"])
    assert rc == 2 and "runs .tflite files only" in capsys.readouterr().err
    tflite = str(exported / "da2_tiny_fp32.tflite")
    rc = main(["predict", tflite, ASSET, "-o", str(tmp_path / "o.png"), "--swiftshader"])
    assert rc == 2 and "--swiftshader goes with --accelerator gpu" in capsys.readouterr().err
    for command in (["predict", tflite, ASSET, "-o", str(tmp_path / "o.png")], ["bench", tflite, "--no-memory"]):
        assert main([*command, "--gpu-precision", "fp16"]) == 2  # was run on the CPU, the option ignored
        assert "--gpu-precision goes with --accelerator gpu" in capsys.readouterr().err
    rc = main(["bench", tflite, "--accelerator", "gpu", "--api", "both", "--no-memory"])
    assert rc == 2 and "CompiledModel API only" in capsys.readouterr().err
    assert not (tmp_path / "o.png").exists()


CLI_CHILD = "import sys\nfrom depthport.cli import main\nsys.exit(main(sys.argv[1:]))"


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_predict_on_the_gpu_accelerator_matches_the_cpu(exported, tmp_path, capsys, precision):
    """`predict --accelerator gpu` with an explicit precision runs every op on the GPU (SwiftShader here), and its
    line says so (it said nothing without -v). Its stdout holds the command's own output only: LiteRT's GPU
    accelerator printed 'INFO: Failed to load OpenCL library ...' there, past the muting of native log lines on
    stderr."""
    vulkan_or_skip()
    tflite = str(exported / "da2_tiny_fp32.tflite")
    cpu, gpu = tmp_path / "cpu.npy", tmp_path / "gpu.npy"
    assert main(["predict", tflite, ASSET, "-o", str(tmp_path / "c.png"), "--npy", str(cpu)]) == 0
    assert "accelerator" not in capsys.readouterr().out
    run = subprocess.run([sys.executable, "-c", CLI_CHILD, "predict", tflite, ASSET, "-o", str(tmp_path / "g.png"),
                          "--npy", str(gpu), "--accelerator", "gpu", "--gpu-precision", precision, "--swiftshader"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("wrote ") and "INFO" not in run.stdout, run.stdout
    compute = {"fp32": "FP32 compute", "fp16": "FP16 compute allowed"}[precision]
    assert f"; every op on the LiteRT GPU accelerator ({compute}, SwiftShader)\n" in run.stdout, run.stdout
    a, b = np.load(gpu), np.load(cpu)
    # SwiftShader has no FP16 shaders, so both precisions compute in FP32 here.
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-5


def test_no_runtime_teardown_line_trails_an_error_raised_after_the_model_loaded_or_a_verify(exported, tmp_path):
    """LiteRT logs 'DestroyAccelerator' lines when a loaded file is freed. A refusal raised after the model loaded
    (--prompt given to a file without a prompt input) held it in its traceback until after the error line, and
    verify held its first file until the command returned: both printed them under the command's last line."""
    tflite = str(exported / "da2_tiny_fp32.tflite")
    np.save(tmp_path / "prompt.npy", np.ones((192, 256), np.float32))
    (tmp_path / "images").mkdir()
    Image.open(ASSET).save(tmp_path / "images" / "cat.png")
    for args, code in ((["predict", tflite, ASSET, "--prompt", str(tmp_path / "prompt.npy"), "-o",
                         str(tmp_path / "d.png")], 2),
                       (["verify", tflite, "--images", str(tmp_path / "images"), "--out", str(tmp_path / "v")], 0)):
        run = subprocess.run([sys.executable, "-m", "depthport", *args], capture_output=True, text=True, timeout=300)
        assert run.returncode == code and "DestroyAccelerator" not in run.stderr, run.stderr[-2000:]
    assert (tmp_path / "v" / "report.json").is_file() and "wrote" in run.stdout


def test_the_gpu_accelerator_that_finds_no_driver_says_what_to_do(exported, tmp_path):
    """`--accelerator gpu` where no GPU driver is found (none named: VK_ICD_FILENAMES and OCL_ICD_VENDORS point at
    nothing) said only LiteRT's source location ('LiteRT cannot load X: ERROR: [litert/runtime/compiled_model.cc:
    1036]'), as if the file were bad; now that the GPU accelerator did not start, where its log is, and that
    --swiftshader runs the GPU path without a GPU."""
    env = {**os.environ, "VK_ICD_FILENAMES": str(tmp_path / "none.json"), "OCL_ICD_VENDORS": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "depthport", "predict", str(exported / "da2_tiny_fp32.tflite"), ASSET,
                          "--accelerator", "gpu", "-o", str(tmp_path / "d.png")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr[-2000:]
    assert "da2_tiny_fp32.tflite: its GPU accelerator did not start (" in run.stderr
    assert "-v shows LiteRT's log; on a machine without a GPU or its driver, --swiftshader runs" in run.stderr
    assert not (tmp_path / "d.png").exists()


def test_export_with_the_fp16_safe_norm_rewrite(tmp_path):
    out = tmp_path / "out"
    rc = main(["export", "da2-tiny", "--size", "56x70", "--out", str(out), "--fp16-safe-norm",
               "--skip", "verify,bench,report,card"])
    report = json.loads((out / "report.json").read_text())
    assert rc == 0 and report["rewrites"][-1] == "fp16_safe_norm"
    (step,) = [s for s in report["rewrite_ledger"] if s["rewrite"] == "fp16_safe_norm"]
    assert step["exact"] and step["rel_l2_step"] < 1e-6


def test_stress_weights_export_fp16_safe_by_construction(tmp_path):
    """Planted trained-weight outliers: the plain file's FP16 prediction fails and names where (Q·Kᵀ: the norms are
    guarded by default, fp16_safe_stream); with --fp16-safe
    every FP16 route ships (GPU rules, XNNPACK delegation, FP16 arithmetic predicted), the FP32 file as exact."""
    plain, safe = tmp_path / "plain", tmp_path / "safe"
    args = ["export", "da2-tiny", "--size", "56x70", "--weights", "stress"]
    main([*args, "--skip", "ledger,bench,report,card", "--targets", "litert-fp32", "--out", str(plain)])
    check = json.loads((plain / "report.json").read_text())["artifacts"][0]["checks"]["fp16_compute"]
    assert check["state"] == "fail" and "overflow FP16, first encoder.blocks.1.attn (matmul)" in check["reasons"][0]
    rc = main([*args, "--skip", "bench,report,card", "--targets", "litert-fp32,xnnpack-fp16", "--fp16-safe",
               "--out", str(safe)])
    report = json.loads((safe / "report.json").read_text())
    assert "stress" in report["weights_detail"]["source"] and report["random_weights"] is True
    assert report["rewrites"][-2:] == ["fp16_safe_norm", "fp16_safe_attention"]
    (step,) = [s for s in report["rewrite_ledger"] if s["rewrite"] == "fp16_safe_attention"]
    assert step["exact"] and step["rel_l2_step"] < 1e-6
    arts = {a["target"]: a for a in report["artifacts"]}
    assert rc == 0 and all(a["status"] == "shipped" for a in arts.values())
    assert arts["litert-fp32"]["checks"]["fp16_compute"]["state"] == "pass"
    assert arts["xnnpack-fp16"]["checks"]["fp16_arithmetic"]["state"] == "pass"


@pytest.mark.gpu
def test_bench_on_the_gpu_accelerator_records_the_precision(exported, tmp_path):
    vulkan_or_skip()
    out = tmp_path / "bench.json"
    args = ["bench", str(exported / "da2_tiny_fp32.tflite"), "--accelerator", "gpu", "--swiftshader",
            "--rounds", "1", "--iters", "1", "--warmup", "0", "--json", str(out)]
    run = subprocess.run([sys.executable, "-c", CLI_CHILD, *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    (rec,) = result["results"]
    assert result["accelerator"] == "gpu" and result["gpu_precision"] == "fp32"
    assert rec["runtime"] == "litert-gpu-fp32" and rec["median"] > 0
