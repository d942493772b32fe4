"""The browser target: `--targets web,web-onnx` folders run in headless Chromium (LiteRT.js and onnxruntime-web,
WASM and WebGPU on SwiftShader), their verdicts, the page's preprocessing, `depthport serve` and `depthport verify
DIR`. The tiny model: one export to `web-onnx` through the whole pipeline, and one LiteRT.js folder made by the `web`
target from the shared tiny .tflite and verified by `depthport verify DIR`; one browser serves every test
(web.browser.shared_browser). Under CI (CI=true) a missing browser setup fails these tests instead of skipping."""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from helpers import TINY_HW, browser_or_skip

pytestmark = pytest.mark.browser


@pytest.fixture(scope="session")
def one_image(tmp_path_factory):
    """One verification image (the browser runs are dominated by shader compilation, not by images)."""
    from depthport.core.images import builtin_image

    folder = tmp_path_factory.mktemp("web-images")
    builtin_image("chelsea").save(folder / "chelsea.png")
    return folder


@pytest.fixture(scope="session")
def web_export(tmp_path_factory, tiny_weights, one_image):
    """report.json and folder of one export of the tiny model to `web-onnx`, verified in Chromium by the pipeline."""
    from depthport.export.context import StageOptions
    from depthport.pipeline import ExportOptions, run_export

    browser_or_skip()
    out = tmp_path_factory.mktemp("web-export") / "out"
    opts = ExportOptions(model="da2-tiny", weights=tiny_weights, input_hw=TINY_HW, out_dir=out,
                         targets=("web-onnx",), stages=StageOptions(
                             images=str(one_image), skip={"ledger", "bench"}, web_fast_shaders=True))
    return run_export(opts), out


@pytest.fixture(scope="session")
def litert_verified(tmp_path_factory, tiny_tflite, tiny_built, one_image):
    """A LiteRT.js web folder made from the shared tiny .tflite by the `web` target, then `depthport verify DIR`
    on all three backends: (folder, report.json of the verification, its output folder, exit status)."""
    from depthport.cli import main
    from depthport.export.context import ExportContext, StageOptions
    from depthport.export.web import web_target

    browser_or_skip()
    out = tmp_path_factory.mktemp("web-litert")
    ctx = ExportContext(tiny_built, out, "da2_tiny", options=StageOptions(skip={"verify"}))
    ctx.fp32_source = tiny_tflite  # what the litert-fp32 target would have written
    entry = web_target(ctx, "web")
    folder = out / entry["file"]
    code = main(["verify", str(folder), "--images", str(one_image), "--fast-shaders", "--out", str(out / "v")])
    return folder, json.loads((out / "v" / "report.json").read_text()), out / "v", code, entry


def artifact(report: dict, target: str) -> dict:
    return next(a for a in report["artifacts"] if a["target"] == target)


def test_web_folders_are_self_contained(web_export, litert_verified):
    report, out = web_export
    folders = [(out / artifact(report, "web-onnx")["file"], "model.onnx",
                "runtime/ort/ort-wasm-simd-threaded.asyncify.wasm"),
               (litert_verified[0], "model.tflite", "runtime/litert/wasm/litert_wasm_internal.wasm")]
    for folder, model, runtime_file in folders:
        for name in ("index.html", "depthport.js", "depthport-web.json", "example.jpg", model, runtime_file):
            assert (folder / name).is_file(), f"{folder.name}: {name} missing"
        config = json.loads((folder / "depthport-web.json").read_text())
        assert config["input_shape"] == [1, 3, *TINY_HW] and config["model"] == "da2-tiny"
        assert config["random_weights"] is True
        page = (folder / "index.html").read_text() + (folder / "depthport.js").read_text()
        assert "http://" not in page and "https://" not in page, "the page must load nothing from elsewhere"
    assert '"@litertjs/wasm-utils": "./runtime/litert/wasm-utils.js"' in (folder / "index.html").read_text()
    entry = litert_verified[4]
    assert entry["target"] == "web" and entry["web"]["runtime"] == "litert.js" and entry["op_count"] > 0


def test_litert_page_verdicts(litert_verified):
    """WASM parity against transformers, WebGPU FP32 on the GPU and equal to the CPU, FP16 measured beside its
    prediction, and the page's preprocessing bit for bit depthport's."""
    _, report, _, code, _ = litert_verified
    art = report["artifacts"][0]
    assert code == 0 and art["status"] == "shipped", art["status_reason"]
    checks, browser = art["checks"], art["browser"]
    assert checks["parity"]["state"] == "pass" and art["parity"]["rel_l2_pooled"] <= 2e-6
    assert art["parity"]["fp64_error_ratio"] is not None
    assert browser["preprocess"]["exact"] and browser["preprocess"]["max_abs_diff"] == 0.0
    gpu32 = browser["backends"]["webgpu-fp32"]
    assert checks["webgpu_fp32"]["state"] == "pass", checks["webgpu_fp32"]["reasons"]
    assert gpu32["on_gpu"]["on_gpu"] and gpu32["info"]["accelerator"] == "webgpu" and gpu32["gpu"]["dispatches"] > 0
    assert gpu32["vs_cpu"]["rel_l2_pooled"] <= 2e-6
    assert "SwiftShader" in gpu32["time"]["label"] and gpu32["time"]["median_ms"] is not None
    fp16 = browser["backends"]["webgpu-fp16"]["fp16"]
    assert fp16["mode"] == "storage" and fp16["shader_f16"] == "not offered" and fp16["packing_shaders"] > 0
    assert fp16["agrees"] is True, fp16["note"]
    assert checks["webgpu_fp16"]["state"] == "pass" and checks["webgpu_fp16"]["required"] is False
    assert 1e-6 < browser["backends"]["webgpu-fp16"]["vs_cpu"]["rel_l2_pooled"] < 1e-2


def test_onnxruntime_page_verdicts(web_export):
    art = artifact(web_export[0], "web-onnx")
    assert art["status"] == "shipped", art["status_reason"]
    assert art["checks"]["parity"]["state"] == "pass" and art["parity"]["rel_l2_pooled"] <= 2e-6
    run = art["browser"]["backends"]["webgpu-fp32"]
    assert art["checks"]["webgpu_fp32"]["state"] == "pass" and run["vs_cpu"]["rel_l2_pooled"] <= 2e-6
    assert run["gpu"]["dispatches"] > 0 and not run["console_fallback"]
    fp16 = art["checks"]["webgpu_fp16"]
    assert fp16["state"] == "not measured" and fp16["cause"] == "cannot run here"


def test_report_html_and_card_show_the_browser(web_export, litert_verified):
    from PIL import Image

    report, out = web_export
    shots = [out / artifact(report, "web-onnx")["browser"]["screenshot"], litert_verified[2] / "screenshot.png"]
    for shot in shots:
        with Image.open(shot) as img:
            assert img.format == "PNG" and img.width >= 800
    html = (out / "report.html").read_text()
    assert "In the browser" in html and 'alt="screenshot of the page"' in html and "SwiftShader" in html
    card = (out / "README.md").read_text()
    assert "## In the browser" in card and "depthport serve" in card and "| WebGPU FP32 | 56x70 | yes:" in card
    html = (litert_verified[2] / "report.html").read_text()
    assert "FP16 <b>storage</b>" in html and 'alt="screenshot of the page"' in html


def test_page_preprocessing_is_pillow_bicubic(web_export):
    """Down- and upscaling, odd sizes, greyscale: the page's JS gives depthport's tensor bit for bit."""
    from PIL import Image

    from depthport.preprocess import to_tensor
    from depthport.web.chromium import shared_browser
    from depthport.web.server import serving

    report, out = web_export
    rng = np.random.default_rng(0)  # noise: every level and rounding shows
    shapes = [(37, 53), (301, 199), (56, 70), (120, 30), (20, 200), (84, 42)]  # both pass orders of Pillow 13
    images = [Image.fromarray(rng.integers(0, 256, (h, w, 3), np.uint8)) for h, w in shapes]
    images.append(Image.fromarray(rng.integers(0, 256, (90, 40), np.uint8)).convert("RGB"))
    with serving(out / artifact(report, "web-onnx")["file"]) as url:
        page = shared_browser(True).open(url)
        try:
            for img in images:
                buf = io.BytesIO()
                img.save(buf, format="PNG")
                got = page.tensor_of(buf.getvalue(), [1, 3, 42, 84])
                np.testing.assert_array_equal(got, to_tensor(img, (42, 84)))
        finally:
            page.close()


def test_serve_sends_isolation_headers(litert_verified):
    from depthport.web.server import make_server, serving

    folder = litert_verified[0]
    with serving(folder) as url:
        with urllib.request.urlopen(url + "index.html") as resp:
            assert resp.headers["Cross-Origin-Opener-Policy"] == "same-origin"
            assert resp.headers["Cross-Origin-Embedder-Policy"] == "require-corp"
        with urllib.request.urlopen(url + "runtime/litert/wasm/litert_wasm_internal.wasm") as resp:
            assert resp.headers["Content-Type"] == "application/wasm"
    server = make_server(folder)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def test_a_browser_leaving_mid_file_is_not_a_traceback(tmp_path, capsys):
    """A reload or a closed tab while the model downloads resets the connection: nothing on the console (the
    handler thread printed a ConnectionResetError traceback, into whichever test ran next)."""
    from depthport.web.server import serving

    (tmp_path / "model.tflite").write_bytes(bytes(32 << 20))
    with serving(tmp_path) as url:
        parts = urllib.parse.urlsplit(url)
        with socket.create_connection((parts.hostname, parts.port)) as client:
            client.sendall(b"GET /model.tflite HTTP/1.0\r\n\r\n")
            status = b""
            while len(status) < 12 and (chunk := client.recv(12 - len(status))):
                status += chunk
            assert status == b"HTTP/1.0 200"
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = reset
        deadline = time.monotonic() + 60
        while any(t.name.endswith("(process_request_thread)") for t in threading.enumerate()):
            assert time.monotonic() < deadline, "the handler thread did not finish"
            time.sleep(0.05)
    assert capsys.readouterr().err == ""


def test_serve_refuses_a_folder_that_is_not_a_web_export(tmp_path, capsys):
    from depthport.cli import main

    assert main(["serve", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a depthport web folder" in err[0]


def test_a_backend_not_asked_for_is_not_measured(litert_verified):
    """`depthport verify DIR --backends wasm`: WebGPU not asked for is "not measured (skipped on request)", never a
    pass; the file is then unverified, and `--backends` takes only known names."""
    from depthport.cli.verify_web import parse_backends
    from depthport.errors import InputError
    from depthport.core.schema import UNVERIFIED, Verdict, file_status, set_check, skipped_only
    from depthport.verify.web_folder import WebJob, not_run_reason

    job = WebJob(litert_verified[0], None, None, None, backends=parse_backends("wasm"))
    why, cause = not_run_reason(job, "webgpu-fp32", "google swiftshader")
    art = {"file": "f", "checks": {}}
    set_check(art, "parity", Verdict.passed(), required=True)
    set_check(art, "webgpu_fp32", Verdict.not_measured(why, cause), required=True)
    assert file_status(art)[0] == UNVERIFIED and skipped_only(art) and "not requested" in why
    with pytest.raises(InputError, match="unknown --backends cuda"):
        parse_backends("wasm,cuda")


def test_fallback_to_wasm_is_a_failure():
    """A WebGPU run that LiteRT.js recompiled for WASM (or that logged ops on the CPU) fails, with the reason."""
    from depthport.check.webgpu_verdict import fp16_mode, gpu_evidence, webgpu_fp32_verdict
    from depthport.core.report_model import BrowserRun, RunInfo, dump, load

    fallback = gpu_evidence(RunInfo(accelerator="wasm", fully_accelerated=True), {"dispatches": 0},
                            ["warn: [LiteRT] Model not fully compiled for webgpu on non-JSPI browser. Falling back"])
    assert not fallback.on_gpu and len(fallback.problems) == 3 and fallback.fallback_log
    partial = gpu_evidence(RunInfo(accelerator="webgpu", fully_accelerated=True), {"dispatches": 12},
                           ["log: 25 operations will run on the GPU, and the remaining 40 operations will run on the CPU."])
    assert not partial.on_gpu
    assert list(dump(partial)) == ["on_gpu", "problems", "accelerator", "fully_accelerated", "dispatches", "submits",
                                   "shaders", "fallback_log", "gpu_errors", "gpu_error"]  # report.json's order
    run = {"on_gpu": dump(partial), "vs_cpu": {"rel_l2_pooled": 1e-7, "pearson_worst": 1.0}, "shape": [56, 70]}
    verdict = webgpu_fp32_verdict(load(BrowserRun, run))
    assert verdict.state == "fail" and "not on the GPU" in verdict.reason
    assert webgpu_fp32_verdict(None, "no adapter").state == "not measured"
    shaders = [{"enable_f16": True, "f16_values": True, "pack": False, "unpack": False}]
    assert fp16_mode({"shaders": shaders, "devices": [{"granted": ["shader-f16"]}]}).mode == "arithmetic"


def test_shaders_webgpu_refuses_fail_the_run():
    """Measured with DA-V2-Small at 126x168: LiteRT.js 2.5.3 with precision 'fp16' on an adapter without shader-f16
    emits three Winograd shaders with f16 constants; WebGPU refuses them, the page gets no exception and reads back
    zeros (rel. L2 1.0 vs CPU). That is a failed run with the reason, not an FP16 precision figure."""
    from dataclasses import replace

    from depthport.check.webgpu_verdict import fp16_mode, gpu_evidence, webgpu_fp16_verdict
    from depthport.core.report_model import BrowserRun, Fp16Predicted, RunInfo, dump, load

    console = ["warning: Error while parsing WGSL: :12:25 error: 'f16' type used without 'f16' extension enabled\n"
               "const Bt_buffer = array<f16, 36>(", "warning: [Invalid CommandBuffer] is invalid due to a previous error."]
    evidence = gpu_evidence(RunInfo(accelerator="webgpu", fully_accelerated=True), {"dispatches": 2406}, console)
    assert evidence.on_gpu and evidence.gpu_errors == 2
    assert evidence.gpu_error == "'f16' type used without 'f16' extension enabled"
    shaders = [{"enable_f16": False, "f16_values": True, "pack": False, "unpack": False}] * 3 + [
        {"enable_f16": False, "f16_values": False, "pack": True, "unpack": True}] * 15
    mode = fp16_mode({"shaders": shaders, "devices": [{"granted": ["subgroups"], "adapter_features": []}]})
    assert mode.mode == "storage" and mode.invalid_f16_shaders == 3 and "refuses" in mode.evidence
    fp16 = replace(mode, predicted=Fp16Predicted(storage=8e-4, arithmetic=1.3e-3), note="not comparable")
    assert list(dump(fp16)) == ["mode", "evidence", "shaders", "f16_shaders", "invalid_f16_shaders", "packing_shaders",
                                "shader_f16", "predicted", "note", "agrees"]  # report.json's order
    run = {"on_gpu": dump(evidence), "vs_cpu": {"rel_l2_pooled": 1.0}, "shape": [126, 168], "fp16": dump(fp16)}
    verdict = webgpu_fp16_verdict(load(BrowserRun, run))
    assert verdict.state == "fail" and "WebGPU reported 2 validation error(s)" in verdict.reason


def test_a_run_is_kept_in_report_jsons_order():
    """``public_run`` builds each backend's ``BrowserRun`` typed: a WASM run, a WebGPU run with its comparisons and
    GPU counters, and a failed run keep the keys report.json always held, in its order, and read back equal."""
    from depthport.check.webgpu_verdict import gpu_evidence
    from depthport.core.report_model import BrowserRun, RunInfo, dump, load
    from depthport.verify.web_folder import PageRun, compare, public_run, timing

    depth = {"a": np.arange(12, dtype=np.float32).reshape(3, 4) + 1}
    info = RunInfo(runtime="onnxruntime-web", requested="wasm", accelerator="wasm", precision="fp32", threads=1)
    wasm = public_run(PageRun("wasm", (3, 4), info=info, outputs=depth, time=timing([5.0, 2.0, 3.0], "wasm", "")))
    assert list(dump(wasm)) == ["name", "shape", "info", "time", "console_fallback", "console_gpu_errors"]
    assert list(dump(wasm)["info"]) == ["runtime", "requested", "accelerator", "precision", "threads"]
    assert dump(wasm)["time"] == {"first_ms": 5.0, "median_ms": 2.5, "calls": 3, "label": "WASM on the CPU"}
    gpu_info = RunInfo("LiteRT.js", "webgpu", "webgpu", True, "fp32", True)
    gpu = {"submits": 3, "dispatches": 40, "pipelines": 5, "devices": [{"granted": ["subgroups"]}], "shaders": []}
    console = ["warning: [Invalid CommandBuffer] is invalid due to a previous error.\nmore"]
    run = PageRun("webgpu-fp32", (3, 4), info=gpu_info, gpu=gpu, console=console, outputs=depth,
                  time=timing([9.0, 1.0], "webgpu", "google swiftshader"))
    kept = public_run(run, file="m.tflite", on_gpu=gpu_evidence(gpu_info, gpu, console),
                      vs_cpu=compare(depth, depth), vs_reference=compare(depth, depth))
    assert list(dump(kept)) == ["name", "shape", "info", "time", "file", "on_gpu", "vs_cpu", "vs_reference", "gpu",
                                "console_fallback", "console_gpu_errors"]
    assert list(dump(kept)["info"]) == ["runtime", "requested", "accelerator", "fully_accelerated", "precision",
                                        "threads"]
    assert dump(kept)["gpu"] == {"submits": 3, "dispatches": 40, "pipelines": 5, "device_features": ["subgroups"]}
    assert kept.vs_cpu.rel_l2_pooled == 0.0 and dump(kept)["console_gpu_errors"] == [console[0].splitlines()[0]]
    failed = public_run(PageRun("webgpu-fp16", (3, 4), error="no adapter"), file="m.tflite")
    assert list(dump(failed)) == ["name", "shape", "error", "file", "console_fallback", "console_gpu_errors"]
    for section in (wasm, kept, failed):
        assert load(BrowserRun, json.loads(json.dumps(dump(section)))) == section


def test_missing_runtimes_are_one_clear_error(tmp_path, monkeypatch):
    from depthport.errors import InputError
    from depthport.web.folder import page_config, write_web_folder

    monkeypatch.setenv("DEPTHPORT_WEB_DIR", str(tmp_path / "empty"))
    model = tmp_path / "m.onnx"
    model.write_bytes(b"x")
    with pytest.raises(InputError, match="setup_web.sh"):
        write_web_folder(tmp_path / "page", model, "onnxruntime-web",
                         page_config("onnxruntime-web", "model.onnx", TINY_HW, True, {"model": "da2-tiny"}))
    assert not (tmp_path / "page").exists()


def test_web_target_refuses_a_model_the_page_cannot_feed(tmp_path, capsys):
    from depthport.cli import main

    out = tmp_path / "out"
    assert main(["export", "da3-tiny", "--weights", "random", "--size", "28x28", "--targets", "web", "--out", str(out),
                 "--skip", "ledger,bench,report,card", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "preprocessed otherwise" in err[0]
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_npm_lock_pins_the_runtimes():
    from depthport.web.runtimes import NPM_DIR, RUNTIMES, pinned_versions

    pins = pinned_versions()
    assert pins["@litertjs/core"] == "2.5.3" and pins["onnxruntime-web"] == "1.30.0"
    declared = json.loads((NPM_DIR / "package.json").read_text())["dependencies"]
    assert all(declared[p] == pins[p] for r in RUNTIMES.values() for p in r.packages)
    assert Path(NPM_DIR / "package-lock.json").is_file()
