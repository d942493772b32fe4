"""report.json: the three-state verdict, each file's shipping status, writing a report and reading it back.

With ``core.report_model`` (the typed view that readers take, and its loader) the one place that handles
report.json's keys: the stages write it through ``ReportJson``, ``ArtifactJson`` and their sections' views, named
fields over the JSON objects, changed in place (so the JSON is what the stages always wrote).

Every check that depthport makes ends in a ``Verdict``: **pass**, **fail** or **not measured** (with the
reason). Nothing reads "not measured" as a pass: a file ships only when every check that applies to it
passed (``file_status``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# 3: an artifact's gpu_ok, gpu_reason, shipped, gate and gpu_check's gpu_clean and static dropped, duplicates of
# its checks and status (check.verdict.gpu_outcome reads the GPU verdict from the checks; the parity gate is
# checks.parity).
SCHEMA_VERSION = 3
PASS, FAIL, NOT_MEASURED = "pass", "fail", "not measured"
STATES = (PASS, FAIL, NOT_MEASURED)
# Why a check was not measured: the user asked (--skip), the file cannot run on this machine by design
# (Core ML on Linux), or it should have run and could not (missing device, crash, missing package).
SKIPPED, UNAVAILABLE, ERROR = "skipped on request", "cannot run here", "could not run"
CAUSES = (SKIPPED, UNAVAILABLE, ERROR)
SHIPPED, UNVERIFIED, NOT_SHIPPED = "shipped", "unverified", "not shipped"


class ReportError(ValueError):
    """A report.json that is missing, unreadable or not of this schema."""


@dataclass(frozen=True)
class Verdict:
    """One check's outcome, with the figures and thresholds that decided it."""

    state: str
    reasons: tuple[str, ...] = ()
    figures: dict = field(default_factory=dict)
    thresholds: dict = field(default_factory=dict)
    cause: str | None = None  # only for NOT_MEASURED: one of CAUSES

    def __post_init__(self):
        if self.state not in STATES:
            raise ValueError(f"verdict state {self.state!r} is not one of {STATES}")
        if (self.state == NOT_MEASURED) != (self.cause is not None) or (self.cause and self.cause not in CAUSES):
            raise ValueError(f"a {self.state!r} verdict cannot have cause {self.cause!r}")

    @classmethod
    def passed(cls, figures: dict | None = None, thresholds: dict | None = None, note: str = "") -> Verdict:
        return cls(PASS, (note,) if note else (), dict(figures or {}), dict(thresholds or {}))

    @classmethod
    def failed(cls, reasons, figures: dict | None = None, thresholds: dict | None = None) -> Verdict:
        reasons = (reasons,) if isinstance(reasons, str) else tuple(reasons)
        return cls(FAIL, reasons or ("failed",), dict(figures or {}), dict(thresholds or {}))

    @classmethod
    def not_measured(cls, reason: str, cause: str = ERROR, thresholds: dict | None = None) -> Verdict:
        return cls(NOT_MEASURED, (reason,), {}, dict(thresholds or {}), cause)

    @property
    def ok(self) -> bool:
        return self.state == PASS

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def text(self) -> str:
        """'pass', 'FAIL: ...' or 'not measured: ...' (the words every output uses)."""
        if self.state == PASS:
            return "pass" + (f" ({self.reason})" if self.reasons else "")
        if self.state == FAIL:
            return f"FAIL: {self.reason}"
        return f"not measured: {self.reason}"

    def to_dict(self) -> dict:
        """JSON form; ``passed`` (True / False / None) mirrors ``state`` for readers of the older reports."""
        out = {"state": self.state, "passed": {PASS: True, FAIL: False}.get(self.state),
               "reasons": list(self.reasons), "figures": self.figures, "thresholds": self.thresholds}
        if self.cause:
            out["cause"] = self.cause
        return out

    @classmethod
    def from_dict(cls, data: dict, where: str = "verdict") -> Verdict:
        if not isinstance(data, dict) or data.get("state") not in STATES:
            raise ReportError(f"{where}: 'state' must be one of {', '.join(STATES)}, got {_show(data)}")
        try:
            return cls(data["state"], tuple(data.get("reasons", ())), dict(data.get("figures") or {}),
                       dict(data.get("thresholds") or {}), data.get("cause"))
        except (TypeError, ValueError) as exc:
            raise ReportError(f"{where}: {exc}") from None


def _show(data) -> str:
    text = json.dumps(data.get("state") if isinstance(data, dict) else data, default=str)
    return text if len(text) < 60 else text[:57] + "..."


def not_measured_section(reason: str, cause: str | None = None) -> dict:
    """A section with no figures because its measurement did not run (skipped, or cannot run here): why, and the
    cause (``CAUSES``; None leaves it out)."""
    return {"not_measured": reason, **({"cause": cause} if cause is not None else {})}


def failed_section(reason: str, cause: str | None = ERROR) -> dict:
    """A section with no figures because its measurement failed: why (``cause`` None leaves it out)."""
    return {"error": reason, **({"cause": cause} if cause is not None else {})}


class Field:
    """One key of a report.json object, read and written as an attribute of its view (None when absent)."""

    def __set_name__(self, owner, name: str) -> None:
        self.key = name

    def __get__(self, obj, owner=None):
        return self if obj is None else obj.data.get(self.key)

    def __set__(self, obj, value) -> None:
        obj.data[self.key] = value


class JsonObject:
    """A report.json object as the stages write it: its ``Field`` attributes read and change ``data``, the parsed
    JSON, in place. Built from the dict or from another view of it."""

    def __init__(self, data: dict | JsonObject):
        self.data = data.data if isinstance(data, JsonObject) else data

    def update(self, **fields) -> None:
        """Set several fields at once, in the order given (unknown names are an error: a typo is not a new key)."""
        unknown = [name for name in fields if not isinstance(getattr(type(self), name, None), Field)]
        if unknown:
            raise AttributeError(f"{type(self).__name__} has no field {', '.join(unknown)}")
        for name, value in fields.items():
            setattr(self, name, value)


class ArtifactJson(JsonObject):
    """One artifact of report.json: what the export wrote, then each stage's sections and checks."""

    file, target, precision, backend, bytes, input_shape = Field(), Field(), Field(), Field(), Field(), Field()
    runtime, web, runnable_here, parity_note, verify_shapes = Field(), Field(), Field(), Field(), Field()
    delegation, gpu_check, gpu_runtime, fp16_compute, fp16_arithmetic = Field(), Field(), Field(), Field(), Field()
    parity, accuracy, shapes_parity, browser, latency_ms = Field(), Field(), Field(), Field(), Field()
    status, status_reason = Field(), Field()

    @property
    def checks(self) -> dict[str, dict]:
        """{check: its JSON verdict with "required"}; empty before any check."""
        return self.data.get("checks") or {}

    @property
    def parity_failed(self) -> bool:
        """True when there is no parity section, or its measurement failed (``failed_section``)."""
        return not self.parity or "error" in self.parity

    def verdict(self, check: str) -> Verdict | None:
        return verdict_of(self.data, check)

    def set_check(self, check: str, verdict: Verdict, required: bool) -> None:
        set_check(self.data, check, verdict, required)

    def required(self) -> dict[str, Verdict]:
        """The verdicts of the checks that decide whether the file ships."""
        return required_checks(self.data)

    def settle(self) -> str:
        """Set the status from the required checks (``file_status``); returns it."""
        self.status, self.status_reason = file_status(self.data)
        return self.status


class ParityJson(JsonObject):
    """A file's ``parity`` (``verify.parity.parity_record``): the figures against upstream, then against depthport's
    eager model and the float64 reference where they were computed, and how the file was run."""

    reference, rel_l2_pooled, parity_images, vs_eager, eager_images = Field(), Field(), Field(), Field(), Field()
    vs_reference_fp64, upstream_fp32_vs_fp64, fp64_error_ratio, fp64_images = Field(), Field(), Field(), Field()
    runtime, compute, compute_reason, skipped = Field(), Field(), Field(), Field()

    def summary(self) -> dict:
        """The figures without the per-image ones and the comparisons with other references (``vs_*``): what a
        not-shipped build and a dynamic file's other shapes keep."""
        return {k: v for k, v in self.data.items() if k != "per_image" and not k.startswith("vs_")}


class Fp16ArithmeticJson(JsonObject):
    """An fp16 file's ``fp16_arithmetic``: whether this CPU computes in FP16 (``mode``) and why, what it does with
    FP16 subnormals, the emulated measurement and the prediction (``check.fp16_compute.fp16_arithmetic_entry``)."""

    arithmetic, mode, reason, subnormals, evidence, emulated, prediction = (Field(), Field(), Field(), Field(),
                                                                           Field(), Field(), Field())


class Fp16PredictionJson(JsonObject):
    """An FP16-compute prediction (``check.fp16_compute.predict_fp16``), or why it failed (``error``)."""

    error, figures, subset, accumulate, images, inputs = Field(), Field(), Field(), Field(), Field(), Field()
    rel_l2, pearson, max_abs_fp32, tolerance, mean_abs_worst = Field(), Field(), Field(), Field(), Field()
    unit, tolerance_m, needs_enforce_f32, overflow_layers, overflow_ops = Field(), Field(), Field(), Field(), Field()
    with_fp16_safe_norm, fp16_with_fp32_accum = Field(), Field()


class BrowserJson(JsonObject):
    """A web folder's ``browser`` section (``report_model.Browser``, built by ``verify.web_folder.assemble``): its
    screenshot's file, named once the screenshot is written beside the report."""

    screenshot = Field()


class VerifyJson(JsonObject):
    """report.json's ``verify``: what the files were verified against (``verify.stage.summary_block``)."""

    reference, images, reference_cache = Field(), Field(), Field()


class ReportJson(JsonObject):
    """report.json: the header (``report.header.new_report``), then what the stages add, and the artifacts."""

    command, model, weights, random_weights, input_shape, output_units = (Field(), Field(), Field(), Field(),
                                                                         Field(), Field())
    rewrites, pos_embed_formula, normalization, targets, evidence_budget = Field(), Field(), Field(), Field(), Field()
    rewrite_ledger, rewrite_ledger_hw, verify, accuracy, gates, not_shipped = (Field(), Field(), Field(), Field(),
                                                                             Field(), Field())
    bench, report_html, written_files = Field(), Field(), Field()

    @property
    def artifacts(self) -> list[ArtifactJson]:
        return [ArtifactJson(a) for a in self.data.get("artifacts") or ()]

    def add(self, art: dict | ArtifactJson) -> ArtifactJson:
        """Append an artifact (``export.context.artifact_entry``); returns its view."""
        art = ArtifactJson(art)
        self.data.setdefault("artifacts", []).append(art.data)
        return art

    def artifact(self, name: str) -> ArtifactJson | None:
        """The artifact whose file has the file name ``name`` (in any folder), or None."""
        return next((a for a in self.artifacts if isinstance(a.file, str) and Path(a.file).name == name), None)


def verdict_of(art: dict, check: str) -> Verdict | None:
    """The verdict of ``check`` for one artifact entry, or None when the check does not apply to it."""
    entry = ArtifactJson(art).checks.get(check)
    return None if entry is None else Verdict.from_dict(entry, f"{art.get('file', '?')}: checks.{check}")


def set_check(art: dict, check: str, verdict: Verdict, required: bool) -> None:
    """Record ``verdict`` for ``check``; ``required`` checks decide whether the file ships."""
    art.setdefault("checks", {})[check] = {**verdict.to_dict(), "required": required}


def required_checks(art: dict) -> dict[str, Verdict]:
    """{check: verdict} of the artifact's checks that decide whether it ships."""
    return {name: Verdict.from_dict(v, f"{art.get('file')}: checks.{name}")
            for name, v in ArtifactJson(art).checks.items() if v.get("required")}


def file_status(art: dict) -> tuple[str, str]:
    """(status, why) from the artifact's required checks.

    - any required check failed, or could not run when it should have: NOT_SHIPPED;
    - otherwise any required check not measured (skipped on request, or the file cannot run here): UNVERIFIED;
    - otherwise (every required check passed, and there is at least one): SHIPPED.
    """
    required = required_checks(art)
    if not required:
        return UNVERIFIED, "no check applies to this file"
    bad = [f"{name}: {v.text()}" for name, v in required.items()
           if v.state == FAIL or (v.state == NOT_MEASURED and v.cause == ERROR)]
    if bad:
        return NOT_SHIPPED, "; ".join(bad)
    open_ = [f"{name}: {v.text()}" for name, v in required.items() if v.state == NOT_MEASURED]
    if open_:
        return UNVERIFIED, "; ".join(open_)
    return SHIPPED, "every required check passed: " + ", ".join(required)


def skipped_only(art: dict | ArtifactJson) -> bool:
    """True when the file is unverified only because checks were skipped on request."""
    return all(v.get("cause") in (None, SKIPPED) for v in ArtifactJson(art).checks.values()
               if v.get("required") and v.get("state") == NOT_MEASURED)


def read_report(path: str | Path) -> dict:
    """A report.json written by depthport, validated; ReportError names what is wrong."""
    path = Path(path)
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"no report.json at {path}: run `depthport export` first") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path} cannot be read as JSON: {exc}") from None
    validate(report, str(path))
    return report


def validate(report, where: str = "report.json") -> None:
    if not isinstance(report, dict):
        raise ReportError(f"{where}: expected a JSON object")
    version = report.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ReportError(f"{where}: schema_version is {version!r}, this depthport reads {SCHEMA_VERSION}; "
                          "re-run the export")
    for key, kind in (("model", str), ("input_shape", list), ("artifacts", list), ("random_weights", bool)):
        if not isinstance(report.get(key), kind):
            raise ReportError(f"{where}: field {key!r} is missing or not a {kind.__name__}")
    for i, art in enumerate(report["artifacts"]):
        if not isinstance(art, dict) or not isinstance(art.get("file"), str):
            raise ReportError(f"{where}: artifacts[{i}].file is missing")
        for name, entry in ArtifactJson(art).checks.items():
            Verdict.from_dict(entry, f"{where}: artifacts[{i}].checks.{name}")
        if art.get("status") not in (None, SHIPPED, UNVERIFIED, NOT_SHIPPED):
            raise ReportError(f"{where}: artifacts[{i}].status {art.get('status')!r} is not a known status")


def recorded_files(report, report_files: tuple[str, ...] | list[str]) -> list[str]:
    """The paths (relative to its folder) that a parsed report.json, of any schema version, says its export wrote:
    its ``written_files``, else report.json, those of ``report_files`` it names (``README.md`` always) and every
    artifact's file (with its Core ML package); [] when it is not a report."""
    if not isinstance(report, dict) or not isinstance(report.get("artifacts"), list):
        return []
    if isinstance(report.get("written_files"), list):
        return [str(p) for p in report["written_files"]]
    names = ["report.json"] + [n for n in report_files if n == report.get("report_html") or n == "README.md"]
    for art in report["artifacts"]:
        if isinstance(art, dict) and isinstance(art.get("file"), str):
            names.append(art["file"])
            if isinstance(art.get("mlpackage"), dict):
                names.append(str(Path(art["file"]).parent / art["mlpackage"].get("file", "")))
    return names


def dumps(report: dict | ReportJson) -> str:
    report = ReportJson(report).data
    return json.dumps({"schema_version": SCHEMA_VERSION, **report}, indent=2, default=str) + "\n"


def write_report(folder: Path, report: dict | ReportJson) -> Path:
    """Write ``folder/report.json`` (atomically); returns its path."""
    from ..atomic import write_text

    path = Path(folder) / "report.json"
    write_text(path, dumps(report))
    return path
