"""The model card: front matter, tables, snippets, regeneration from report.json."""

import json

import pytest
import yaml
from markdown_it import MarkdownIt

from depthport.cli import main
from depthport.report.card import render


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
