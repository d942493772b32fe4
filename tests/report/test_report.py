"""report.html: written by the export steps, self-contained, with the figures and the tables."""

from __future__ import annotations

import base64
import io
import re
import shutil

import numpy as np
import pytest
from PIL import Image

from depthport.report.html import render
from helpers import TINY_HW as HW
from helpers import shipped


@pytest.fixture(scope="module")
def exported(tiny_built, tiny_tflite, tmp_path_factory):
    """verify -> bench -> report steps over two copies of a tiny LiteRT file; one is gated out."""
    from depthport.bench import stage as bench_step
    from depthport.check import stage as check_step
    from depthport.export.litert import tflite_entry
    from depthport.export.context import StageOptions
    from depthport.export.targets import ExportContext
    from depthport.report import stage as report_step
    from depthport.verify import stage as verify_step
    from depthport.core.images import builtin_image

    built, path = tiny_built, tiny_tflite
    out = tmp_path_factory.mktemp("export")
    images = out.parent / "report-images"
    images.mkdir()
    builtin_image("coffee").save(images / "coffee.png")
    ctx = ExportContext(built, out, "da2_tiny", options=StageOptions(threads=1, images=str(images),
                                                                 gates={"fp16": {"rel_l2_pooled": 0.0}}))
    report = {"model": "da2-tiny", "weights": "random", "random_weights": True, "input_shape": [1, 3, *HW],
              "command": "depthport export da2-tiny", "machine": {"cpu": "test"}, "artifacts": []}
    for name, precision in (("tiny_fp32.tflite", "fp32"), ("tiny_<fp16>.tflite", "fp16")):
        shutil.copy(path, out / name)
        report["artifacts"].append(tflite_entry(ctx, out / name, f"litert-{precision}", precision=precision))
    for step in (check_step, verify_step, bench_step, report_step):
        step.apply(ctx, report)
    return out, report, (out / "report.html").read_text(encoding="utf-8")


def test_report_html_is_written_and_self_contained(exported):
    out, report, page = exported
    assert report["report_html"] == "report.html"
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"<(script|link|iframe)\b", page, re.I)
    assert "href=" not in page.lower()
    sources = re.findall(r'src="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "url(" not in page


def test_report_html_embeds_the_depth_maps_and_error_maps(exported):
    _, _, page = exported
    sources = re.findall(r'src="data:image/png;base64,([^"]*)"', page)
    # input, reference, depthport eager, two variants, two error maps
    assert len(sources) == 7
    images = [Image.open(io.BytesIO(base64.b64decode(s))) for s in sources]
    assert all(img.format == "PNG" and img.mode == "RGB" for img in images)
    assert images[0].size[0] / images[0].size[1] == pytest.approx(HW[1] / HW[0], rel=0.05)
    assert "|litert-fp32 - reference|" in page and "coffee" in page


def test_report_html_has_the_tables_and_the_random_banner(exported):
    _, report, page = exported
    for heading in ("Parity", "Against depthport", "Accuracy against ground truth",
                    "Files", "Latency (CPU)", "GPU delegate check", "Not shipped"):
        assert f">{heading}" in page, heading
    assert 'class="banner">RANDOM WEIGHTS' in page
    fp32, fp16 = report["artifacts"]
    assert f"{fp32['parity']['rel_l2_pooled']:.3e}" in page
    assert f"{fp32['latency_ms']['median']:.2f}" in page
    assert shipped(fp16) is False and "not-shipped/tiny_&lt;fp16&gt;.tflite" in page
    assert "<fp16>" not in page  # file names are escaped
    assert '<span class="fail">FAIL</span>' in page and '<span class="pass">pass</span>' in page


def test_render_without_figures_or_random_weights():
    report = {"model": "m", "weights": "w", "random_weights": False, "artifacts": [
        {"file": "x.tflite", "target": "litert-fp32", "precision": "fp32", "bytes": 2_000_000}]}
    page = render(report)
    assert "verification was skipped" in page and "RANDOM WEIGHTS" not in page
    assert "<td>2.0</td>" in page


def test_heatmap_scale_and_tiny_maps_are_enlarged():
    from depthport.report.html import heatmap, png_data_uri

    img, top = heatmap(np.array([[0.0, -2.0], [1.0, 0.5]]))
    assert top == 2.0 and img.size == (2, 2)
    assert np.asarray(img)[0, 0].sum() < np.asarray(img)[0, 1].sum()  # 0 dark, max bright
    shown = Image.open(io.BytesIO(base64.b64decode(png_data_uri(img).split(",", 1)[1])))
    assert min(shown.size) >= 192


LATENCY = {"runtime": "litert", "threads": 2, "median": 12.5, "min": 12.0, "max": 13.0, "rounds": 3, "iters": 2}
MACHINE = {"cpu": "Test CPU <x>", "cores": 4, "threads": 2, "isa": {"avx2": True, "fma": False}}


def _latency_page(latency: dict, bench: dict) -> tuple[str, str]:
    """(the file's latency row, the latency table's caption) of a one-file report."""
    report = {"model": "m", "weights": "w", "random_weights": False, "input_shape": [1, 3, 28, 28], "bench": bench,
              "artifacts": [{"file": "x.tflite", "target": "litert-fp32", "precision": "fp32", "bytes": 1000,
                             "latency_ms": latency}]}
    page = render(report)
    table = page.split(">Latency (CPU)</h2>")[1].split("</table>")[0]
    return re.search(r'<td class="l">x\.tflite</td>(.*?)</tr>', table).group(1), \
        re.search(r"<caption>(.*?)</caption>", table, re.S).group(1)


def test_latency_table_shows_gmac_rate_and_share_of_peak_with_the_machine_as_caption():
    row, caption = _latency_page({**LATENCY, "gmac": 1.234, "gmac_per_s": 98.7, "pct_of_peak": 45.6},
                                 {"machine": MACHINE, "probe": {"chain": "4 FC 384<->1536", "peak_gmac_per_s": 216.4}})
    assert "<td>12.50</td>" in row and "<td>1.23</td><td>98.7</td><td>45.6</td>" in row
    assert "Test CPU &lt;x&gt;, 4 cores, 2 threads; avx2" in caption and "fma" not in caption
    assert "216.4 GMAC/s" in caption and "384&lt;-&gt;1536" in caption


def test_latency_table_says_not_measured_when_the_figures_are_missing():
    row, caption = _latency_page(dict(LATENCY), {"method": "older report"})
    assert "<td>12.50</td>" in row and row.count('<span class="nm">not measured</span>') == 3
    assert 'Machine <span class="nm">not measured</span>' in caption
    assert 'GEMM peak <span class="nm">not measured</span>' in caption
    row, caption = _latency_page({**LATENCY, "gmac": 1.0, "gmac_per_s": 80.0, "pct_of_peak": None},
                                 {"machine": MACHINE, "probe": {"skipped": "the probe was switched off"}})
    assert "<td>80.0</td>" in row and row.endswith('<td><span class="nm">not measured</span></td>')
    assert 'GEMM peak <span class="nm">not measured</span>: the probe was switched off' in caption
    row, _ = _latency_page({"error": "RuntimeError: no runtime"}, {"machine": MACHINE})
    assert '<span class="nm">not measured</span>: RuntimeError: no runtime' in row


def test_the_bench_times_the_runners_verify_ran_without_loading_them_again(exported):
    _, report, _ = exported
    for art in report["artifacts"]:  # the gated-out file too: timed on the runner verify ran, after its move
        lat = art["latency_ms"]
        assert (lat["warm_from"], lat["warmup"]) == ("verify", 0) and 0 < lat["min"] <= lat["median"], art["file"]


def test_exported_latency_row_carries_the_bench_figures(exported):
    from markupsafe import escape

    from depthport.core.machine import describe

    _, report, page = exported
    lat = report["artifacts"][0]["latency_ms"]
    table = page.split(">Latency (CPU)</h2>")[1].split("</table>")[0]
    assert str(escape(describe(report["bench"]["machine"]))) in table
    assert f"<td>{lat['gmac']:.3g}</td><td>{lat['gmac_per_s']:.1f}</td>" in table
