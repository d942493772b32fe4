"""The model card: front matter, tables, snippets, regeneration from report.json."""

import json
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

from depthport.cli import main
from depthport.core.report_model import load_report
from depthport.report.card import render

ASSET = Path(__file__).resolve().parents[2] / "src" / "depthport" / "assets" / "chelsea.jpg"


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("card") / "out"
    assert main(["export", "da2-tiny", "--size", "56x70", "--out", str(out), "--skip", "verify,bench,report"]) == 0
    return out


def _front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_card_front_matter_is_yaml(export_dir):
    meta = _front_matter((export_dir / "README.md").read_text())
    assert meta["license"] == "apache-2.0" and meta["pipeline_tag"] == "depth-estimation"
    assert {"litert", "on-device", "depth-estimation", "random-weights"} <= set(meta["tags"])


def test_card_tables_render(export_dir):
    text = (export_dir / "README.md").read_text()
    tokens = MarkdownIt("commonmark").enable("table").parse(text.split("---\n", 2)[2])
    assert sum(t.type == "table_open" for t in tokens) >= 4
    assert "RANDOM WEIGHTS" in text
    assert "da2_tiny_fp32.tflite" in text and "[1, 3, 56, 70]" in text
    assert "fold_layernorm" in text and "Accelerator.GPU" in text


def test_card_regenerates_from_report(export_dir, capsys):
    before = (export_dir / "README.md").read_text()
    (export_dir / "README.md").unlink()
    assert main(["card", str(export_dir)]) == 0
    assert (export_dir / "README.md").read_text() == before


def test_card_lists_builds_that_did_not_earn_a_slot(export_dir):
    report = json.loads((export_dir / "report.json").read_text())
    failed = dict(report["artifacts"][0], file="x_int8.tflite", target="litert-int8", shipped=False,
                  gate={"passed": False, "reasons": ["delta125_worst 0.95 < 0.99"]}, status="not shipped",
                  status_reason="parity: FAIL: delta125_worst 0.95 < 0.99",
                  parity={"pearson_worst": 0.97, "rel_l2_pooled": 0.05, "delta125_worst": 0.95})
    report["artifacts"].append(failed)
    text = render(report)
    section = text.split("## Builds that did not earn a slot")[1].split("##")[0]
    assert "x_int8.tflite" in section and "delta125_worst 0.95 < 0.99" in section
    assert "x_int8.tflite" not in text.split("## Variants")[1].split("##")[0]


def test_card_without_report_is_a_clear_error(tmp_path, capsys):
    assert main(["card", str(tmp_path)]) == 2
    assert "no report.json" in capsys.readouterr().err


MACHINE = {"cpu": "Test CPU", "cores": 4, "threads": 2, "isa": {"avx2": True, "fma": False}}
HEADER = {"model": "m", "input_shape": [1, 3, 28, 28]}  # what every report has (schema.validate)


def _latency_cell_and_caption(latency: dict, bench: dict) -> tuple[str, str]:
    """The latency cell of the Variants table and the paragraph under the table, parsed as Markdown."""
    report = {"model": "m", "weights": "w", "random_weights": False, "input_shape": [1, 3, 28, 28], "bench": bench,
              "machine": {"cpu": "Test CPU", "cores": 4},
              "artifacts": [{"file": "x.tflite", "target": "litert-fp32", "bytes": 1000, "input_shape": [1, 3, 28, 28],
                             "output_shape": [1, 28, 28], "status": "shipped", "latency_ms": latency}]}
    section = render(report).split("## Variants")[1].split("\n## ")[0]
    tokens = MarkdownIt("commonmark").enable("table").parse(section)
    cells = [t.content for t in tokens if t.type == "inline"]
    header = cells.index(next(c for c in cells if c.startswith("latency on")))
    n_cols = cells.index("ExecuTorch delegation") + 1
    after = [t.content for t in tokens[[t.type for t in tokens].index("table_close"):] if t.type == "inline"]
    return cells[header + n_cols], after[0]


def test_card_latency_column_has_gmac_rate_and_share_of_peak():
    latency = {"runtime": "litert", "threads": 2, "median": 12.5, "rounds": 3, "iters": 2, "gmac": 1.234,
               "gmac_per_s": 98.7, "pct_of_peak": 45.6}
    probe = {"chain": "4 FC", "peak_gmac_per_s": 216.4}
    cell, caption = _latency_cell_and_caption(latency, {"machine": MACHINE, "probe": probe})
    assert cell.startswith("12.5 ms (median of 3 rounds x 2 calls") and "1.23 GMAC, 98.7 GMAC/s, 45.6 % of" in cell
    assert "Test CPU, 4 cores, 2 threads; avx2" in caption and "216.4 GMAC/s" in caption


def test_card_says_not_measured_for_missing_latency_figures():
    cell, caption = _latency_cell_and_caption(
        {"runtime": "litert", "threads": 2, "median": 12.5, "rounds": 3, "iters": 2}, {"method": "older report"})
    assert "GMAC not measured" in cell and "GMAC/s not measured" in cell and "GEMM peak not measured" in cell
    assert "Test CPU (4 cores); threads and ISA flags not measured" in caption and "GEMM peak not measured" in caption
    cell, _ = _latency_cell_and_caption({"error": "RuntimeError: no runtime"}, {"machine": MACHINE})
    assert cell == "not measured: RuntimeError: no runtime"


def test_every_template_ships_in_the_wheel():
    import fnmatch
    import tomllib
    from pathlib import Path, PurePosixPath

    import depthport

    root = Path(depthport.__file__).parent
    pyproject = tomllib.loads((root.parents[1] / "pyproject.toml").read_text())
    patterns = [PurePosixPath(p).parts for p in pyproject["tool"]["setuptools"]["package-data"]["depthport"]]
    templates = [p.relative_to(root).parts for p in (root / "report" / "templates").rglob("*") if p.is_file()]

    def shipped(parts) -> bool:
        return any(len(pat) == len(parts) and all(map(fnmatch.fnmatch, parts, pat)) for pat in patterns)

    assert {"card.md.j2", "report.html.j2"} <= {t[-1] for t in templates}
    assert all(shipped(t) for t in templates), [t for t in templates if not shipped(t)]


def _int8_report(isa: dict | None, gain: float | None) -> dict:
    def art(name, target, median):
        return {"file": name, "target": target, "bytes": 1000, "input_shape": [1, 3, 28, 28],
                "output_shape": [1, 28, 28], "status": "shipped",
                "latency_ms": {"runtime": "litert", "threads": 2, "median": median, "rounds": 3, "iters": 2}}

    probe = {"chain": "4 FC", "peak_gmac_per_s": 80.0,
             "int8_gain": {"int8_dynamic": {"median": gain, "paired": gain}} if gain else {}}
    bench = {"machine": {**MACHINE, "isa": isa}, "probe": probe} if isa is not None else {"probe": probe}
    return {"model": "m", "weights": "w", "random_weights": False, "input_shape": [1, 3, 28, 28], "bench": bench,
            "machine": {"cpu": "Test CPU", "cores": 4},
            "artifacts": [art("a_fp32.tflite", "litert-fp32", 100.0), art("a_int8.tflite", "litert-int8", 80.0),
                          art("a_int8_weight.tflite", "litert-int8-weight", 101.0)]}


def _int8_section(report: dict) -> tuple[list[list[str]], str]:
    section = render(report).split("## INT8: on which CPUs it pays off")[1].split("\n## ")[0]
    tokens = MarkdownIt("commonmark").enable("table").parse(section)
    cells = [t.content for t in tokens if t.type == "inline"]
    return [cells[i:i + 5] for i in range(5, 15, 5)], cells[15]


def test_card_says_where_each_int8_file_pays_off():
    rows, text = _int8_section(_int8_report({"avx2": True, "fma": True, "avx512_vnni": False}, 1.5))
    assert rows[0] == ["a_int8.tflite", "1.25x litert-fp32", "1.50x", "50 %", "yes"]
    assert rows[1][0] == "a_int8_weight.tflite" and rows[1][2].startswith("none: weight-only")
    assert rows[1][1] == "0.99x litert-fp32" and rows[1][4] == "no"
    assert "no INT8 dot-product instructions" in text and "not measured here" in text
    _, text = _int8_section(_int8_report({"avx2": True, "avx512_vnni": True}, 3.0))
    assert "has INT8 dot-product instructions (AVX512-VNNI)" in text


def test_card_int8_section_says_not_measured():
    rows, text = _int8_section(_int8_report(None, None))
    assert rows[0][2] == "not measured" and rows[0][3] == "-"
    assert "CPU features were not measured" in text
    report = _int8_report({"avx2": True}, 1.1)
    report["artifacts"] = report["artifacts"][:1]
    assert "## INT8" not in render(report)


def test_snippet_gpu_precision_needs_trained_weights_and_names_the_mode():
    from depthport.report.snippets import gpu_precision

    verdict = {"pass": {"state": "pass", "reasons": []}, "fail": {"state": "fail", "reasons": ["rel L2 0.02"]}}
    prediction = {"images": ["a.png"], "headroom_by_op": [{"op": "linear", "max_abs": 780.0, "headroom": 84.0}]}
    trained = {**HEADER, "random_weights": False, "verify": {"images": ["a.png"]}}

    def gpu_precision_of(report: dict, art: dict) -> tuple[str, str]:
        typed = load_report({**report, "artifacts": [{"file": "m.tflite", **art}]})
        return gpu_precision(typed, typed.artifacts[0])

    art = {"checks": {"fp16_compute": verdict["pass"]}, "fp16_compute": prediction}
    precision, why = gpu_precision_of(trained, art)
    assert precision == "FP16" and "84x (linear)" in why
    assert gpu_precision_of({**trained, "random_weights": True}, art)[0] == "FP32"
    accum = {"rel_l2": 3e-3, "needs_enforce_f32": False}
    art = {"checks": {"fp16_compute": verdict["fail"]}, "fp16_compute": {**prediction, "fp16_with_fp32_accum": accum}}
    assert gpu_precision_of(trained, art)[0] == "FP16_WITH_FP32_ACCUM"
    art["fp16_compute"]["fp16_with_fp32_accum"] = {**accum, "needs_enforce_f32": True}
    precision, why = gpu_precision_of(trained, art)
    assert precision == "FP32" and "rel L2 0.02" in why


def test_card_states_fp16_headroom_and_fp16_arithmetic_evidence():
    from depthport.report.card import fp16_arithmetic_rows, headroom_view

    prediction = {"images": ["a.png"], "figures": {"rel_l2_pooled": 1.2e-2, "delta125_worst": 0.967},
                  "headroom_by_op": [{"op": "matmul", "max_abs": 780.0, "headroom": 84.0}]}
    art = {"file": "m.pte", "checks": {"fp16_arithmetic": {"state": "fail", "reasons": ["delta"], "required": True}},
           "fp16_arithmetic": {"arithmetic": False, "evidence": "predicted", "cpu": "AMD EPYC",
                               "prediction": prediction}}
    report = load_report({**HEADER, "random_weights": True, "artifacts": [art]})
    [row] = fp16_arithmetic_rows(report)
    assert row["evidence"] == "predicted" and row["rel_l2"] == "1.200e-02" and row["delta"] == "0.9670"
    view = headroom_view(report)
    assert view["random"] and view["rows"][0]["op"] == "matmul" and view["rows"][0]["headroom"] == "84"


@pytest.fixture(scope="module")
def snippet_exports(tmp_path_factory):
    """Each runtime kind's file with its card: da2-tiny as .tflite, .pte and .onnx at 56x70; da3-tiny (its own
    resize) as .tflite at its tiny shape, 70x42 (the same file as the registry's test: one conversion for both).
    Verification is skipped: the snippets are the card's whatever the verdicts."""
    root = tmp_path_factory.mktemp("snippets")
    out = {}
    for model, size, targets in (("da2-tiny", "56x70", "litert-fp32,xnnpack-fp32,onnx"),
                                 ("da3-tiny", "70x42", "litert-fp32")):
        folder = root / model
        assert main(["export", model, "--size", size, "--targets", targets, "--out", str(folder),
                     "--skip", "ledger,verify,bench,report"]) == 0
        out[model] = folder
    return out


def python_snippets(card: str) -> list[str]:
    return [block.split("```", 1)[0] for block in card.split("```python\n")[1:]]


@pytest.mark.parametrize("model,kind,stored", [
    ("da2-tiny", "tflite", (90, 60)), ("da2-tiny", "pte", (90, 60)), ("da2-tiny", "onnx", (90, 60)),
    ("da3-tiny", "tflite", (90, 60)),  # shown 60x90, portrait like the model's 70x42
    ("da3-tiny", "tflite", (560, 700)),  # shown 700x560, landscape: Depth Anything 3's two-step resize to 70x42
])
def test_python_snippet_runs_as_written_and_equals_predict(snippet_exports, model, kind, stored, tmp_path):
    """The card's Python snippet, run as written by a fresh interpreter in the export folder on a phone photo
    (stored ``stored`` (W, H), shown turned by its EXIF orientation), gives the depth `depthport predict
    --model-size` gives."""
    import subprocess
    import sys

    import numpy as np
    from PIL import Image

    folder = snippet_exports[model]
    code = next(c for c in python_snippets((folder / "README.md").read_text()) if f'.{kind}"' in c)
    photo = Image.open(ASSET).convert("RGB").resize(stored)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    photo.save(folder / "photo.jpg", exif=exif, quality=95)
    script = tmp_path / "snippet.py"
    script.write_text(code + "\nnp.save('snippet_depth.npy', np.asarray(depth, np.float32))\n")
    run = subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    model_file = next(folder.glob(f"*.{kind}"))
    npy = tmp_path / "predict.npy"
    assert main(["predict", str(model_file), str(folder / "photo.jpg"), "-o", str(tmp_path / "p.png"),
                 "--npy", str(npy), "--model-size"]) == 0
    ours, theirs = np.load(folder / "snippet_depth.npy").reshape(-1), np.load(npy).reshape(-1)
    assert ours.size == theirs.size
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5 * float(np.abs(theirs).max()))


@pytest.mark.parametrize("form", ["profile", "transparent"])
def test_python_snippet_reads_colour_profiles_and_transparency_as_predict(snippet_exports, form, tmp_path):
    """A phone's photo carries a colour profile (an iPhone's is Display P3; here a real RGB profile with red and blue
    exchanged, so that the difference shows) and a PNG may be see-through: predict reads both as a viewer shows
    them (colours in sRGB, see-through pixels on white), and the snippet, which converted to RGB only (its comment
    said 'as a viewer shows it'), gave other depth (rel. L2 0.10 for a transparent PNG). It reads them the same now."""
    import subprocess
    import sys

    import numpy as np
    from PIL import Image

    from helpers import swapped_profile

    folder = snippet_exports["da2-tiny"]
    code = next(c for c in python_snippets((folder / "README.md").read_text()) if '.tflite"' in c)
    photo = Image.open(ASSET).convert("RGB").resize((90, 60))
    if form == "profile":
        photo.save(folder / "photo.jpg", icc_profile=swapped_profile(), quality=95)
    else:  # a PNG (named as the snippet opens it; Pillow reads by content) whose left half is see-through
        alpha = np.full((60, 90), 255, np.uint8)
        alpha[:, :45] = 0
        photo.putalpha(Image.fromarray(alpha))
        photo.save(folder / "photo.jpg", format="PNG")
    script = tmp_path / "snippet.py"
    script.write_text(code + "\nnp.save('snippet_depth.npy', np.asarray(depth, np.float32))\n")
    run = subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    npy = tmp_path / "predict.npy"
    assert main(["predict", str(next(folder.glob("*.tflite"))), str(folder / "photo.jpg"), "-o",
                 str(tmp_path / "p.png"), "--npy", str(npy), "--model-size"]) == 0
    ours, theirs = np.load(folder / "snippet_depth.npy").reshape(-1), np.load(npy).reshape(-1)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5 * float(np.abs(theirs).max()))


def test_mobile_snippets_name_what_the_app_must_add(snippet_exports):
    """Kotlin: the LiteRT artifacts (the GPU accelerator's own from 2.3.0), at the pinned version; Swift: the
    ExecuTorch products and the linker flag that registers the backend and kernels; each citing its API source."""
    from importlib.metadata import version

    card = (snippet_exports["da2-tiny"] / "README.md").read_text()
    litert, executorch = version("ai-edge-litert"), version("executorch")
    assert f"com.google.ai.edge.litert:litert-gpu:{litert}" in card and "import com.google.ai.edge.litert.Accelerator" in card
    assert "com/google/ai/edge/litert/Model.kt" in card and "model.close()" in card
    assert f"swiftpm-{executorch}" in card and "`backend_xnnpack`" in card and "-all_load" in card
    assert "ExecuTorchModule.h" in card and "guard let path = Bundle.main.path" in card


def test_card_names_the_base_model_chain():
    from depthport.report.card import base_model_line

    def line(**header) -> str:
        return base_model_line(load_report({**HEADER, **header}))

    chain = ["xingyang1/Distill-Any-Depth-Small-hf", "depth-anything/Depth-Anything-V2-Small-hf"]
    assert line(base_model=chain[0], base_model_chain=chain) == (
        "xingyang1/Distill-Any-Depth-Small-hf, fine-tuned from depth-anything/Depth-Anything-V2-Small-hf")
    assert line(base_model="a/b") == "a/b"
    assert line(base_model=None, base_model_chain=[]) == "-"
