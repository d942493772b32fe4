"""report.json: the three-state verdict, each file's shipping status, and reading a report back.

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


def verdict_of(art: dict, check: str) -> Verdict | None:
    """The verdict of ``check`` for one artifact entry, or None when the check does not apply to it."""
    entry = (art.get("checks") or {}).get(check)
    return None if entry is None else Verdict.from_dict(entry, f"{art.get('file', '?')}: checks.{check}")


def set_check(art: dict, check: str, verdict: Verdict, required: bool) -> None:
    """Record ``verdict`` for ``check``; ``required`` checks decide whether the file ships."""
    art.setdefault("checks", {})[check] = {**verdict.to_dict(), "required": required}


def file_status(art: dict) -> tuple[str, str]:
    """(status, why) from the artifact's required checks.

    - any required check failed, or could not run when it should have: NOT_SHIPPED;
    - otherwise any required check not measured (skipped on request, or the file cannot run here): UNVERIFIED;
    - otherwise (every required check passed, and there is at least one): SHIPPED.
    """
    required = {name: Verdict.from_dict(v, f"{art.get('file')}: checks.{name}")
                for name, v in (art.get("checks") or {}).items() if v.get("required")}
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


def skipped_only(art: dict) -> bool:
    """True when the file is unverified only because checks were skipped on request."""
    return all(v.get("cause") in (None, SKIPPED) for v in (art.get("checks") or {}).values()
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
        for name, entry in (art.get("checks") or {}).items():
            Verdict.from_dict(entry, f"{where}: artifacts[{i}].checks.{name}")
        if art.get("status") not in (None, SHIPPED, UNVERIFIED, NOT_SHIPPED):
            raise ReportError(f"{where}: artifacts[{i}].status {art.get('status')!r} is not a known status")


def dumps(report: dict) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, **report}, indent=2, default=str) + "\n"
