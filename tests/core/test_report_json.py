"""core.schema's writer views of report.json: named fields over the JSON, changed in place."""

from __future__ import annotations

import json

import pytest

from depthport.core.report_model import NotMeasured, Parity, load
from depthport.core.schema import (ERROR, SKIPPED, ArtifactJson, ReportJson, Verdict, dumps, failed_section,
                                   not_measured_section, recorded_files)


def test_views_read_and_write_the_json_in_place():
    data = {"model": "m", "artifacts": [{"file": "a.tflite", "target": "litert-fp32"}]}
    report = ReportJson(data)
    [art] = report.artifacts
    art.update(parity={"pearson_worst": 1.0}, precision="fp32")
    art.set_check("parity", Verdict.passed(), required=True)
    assert art.settle() == "shipped"
    added = report.add({"file": "b.onnx", "target": "onnx"})
    added.latency_ms = failed_section("no runtime", None)
    assert data["artifacts"][0] == {"file": "a.tflite", "target": "litert-fp32", "parity": {"pearson_worst": 1.0},
                                    "precision": "fp32", "checks": data["artifacts"][0]["checks"],
                                    "status": "shipped", "status_reason": "every required check passed: parity"}
    assert data["artifacts"][1]["latency_ms"] == {"error": "no runtime"}
    assert report.artifact("b.onnx").target == "onnx" and report.artifact("c.pte") is None
    assert ReportJson(report).data is data and dumps(report) == dumps(data)
    assert art.delegation is None  # an absent field reads None


def test_update_refuses_a_field_the_view_does_not_name():
    with pytest.raises(AttributeError, match="no field parityy"):
        ArtifactJson({"file": "a"}).update(parityy={})


def test_sections_without_figures_load_as_not_measured_with_their_cause():
    skipped = load(Parity | NotMeasured, not_measured_section("skipped on request (--skip verify)", SKIPPED))
    failed = load(Parity | NotMeasured, failed_section("verification failed: boom"))
    assert skipped == NotMeasured("skipped on request (--skip verify)", SKIPPED)
    assert failed == NotMeasured("verification failed: boom", ERROR)
    assert not_measured_section("why") == {"not_measured": "why"}
    assert ArtifactJson({"parity": failed_section("x")}).parity_failed and ArtifactJson({}).parity_failed
    assert not ArtifactJson({"parity": not_measured_section("y")}).parity_failed


def test_recorded_files_of_old_and_new_reports():
    new = {"artifacts": [], "written_files": ["a.tflite", "report.json"]}
    old = {"artifacts": [{"file": "a.pte", "mlpackage": {"file": "a.mlpackage"}}, "junk"], "report_html": "report.html"}
    assert recorded_files(new, ("report.html", "README.md")) == ["a.tflite", "report.json"]
    assert recorded_files(old, ("report.html", "README.md")) == ["report.json", "report.html", "README.md", "a.pte",
                                                                 "a.mlpackage"]
    assert recorded_files(json.loads("[1]"), ("README.md",)) == []
