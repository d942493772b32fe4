"""verify: a dynamic-shape file (``onnx-dynamic``) at every shape it is verified at, not only the export's.

The export shape is verified like any file (``parity``). At each other shape the same images are stretched to it
and the file is measured against the upstream model at that shape (and in float64 when the FP32 gate asks for it);
the ``parity_shapes`` check passes when the FP32 gate passes at every shape.
"""

from __future__ import annotations

from pathlib import Path

from ..core.report_model import NotMeasured, ShapeParity, load
from ..core.schema import (ERROR, FAIL, NOT_MEASURED, ArtifactJson, ParityJson, ReportJson, Verdict,
                           failed_section)
from ..errors import InputError, error_text
from ..runtimes import load_runner
from .gates import evaluate
from .parity import References, parity_record, run_file


def verify_shapes(path: Path, refs: References, shapes: list, threads: int, gates: dict) -> dict:
    """{"HxW": parity summary and its gate verdict} for every shape but the export's (measured in ``parity``)."""
    runner = load_runner(path, threads=threads)
    if not getattr(runner, "dynamic", False):
        raise InputError(f"{path.name} has a static input shape; only an onnx-dynamic file is verified at others")
    out = {}
    for hw in (tuple(s) for s in shapes):
        if hw == tuple(refs.input_hw):
            continue
        shaped = refs.at(hw, threads)
        outputs = run_file(runner, shaped, path.name, refs.eager_normalized)
        record = parity_record(outputs, shaped, refs.label)
        if shaped.reference64 is None:
            record.update(skipped=["fp64_error_ratio"])
        out[f"{hw[0]}x{hw[1]}"] = {**ParityJson(record).summary(), "gate": evaluate(record, "fp32", gates)}
    return out


def shapes_verdict(art: dict | ArtifactJson, export_gate: dict) -> Verdict:
    """Pass when the file passes the FP32 gate at the export shape (``export_gate``) and at every other shape."""
    art = ArtifactJson(art)
    per_shape = load(dict[str, ShapeParity] | NotMeasured, art.shapes_parity) if art.shapes_parity else {}
    if isinstance(per_shape, NotMeasured):
        return Verdict.not_measured(per_shape.reason, per_shape.cause or ERROR)
    _, _, h, w = art.input_shape
    verdicts = {f"{h}x{w}": Verdict.from_dict(export_gate), **{hw: v.gate for hw, v in per_shape.items()}}
    figures = {hw: v.figures.get("rel_l2_pooled") for hw, v in verdicts.items()}
    failed = [f"{hw}: {v.text()}" for hw, v in verdicts.items() if v.state == FAIL]
    if failed:
        return Verdict.failed(failed, figures)
    open_ = [(hw, v) for hw, v in verdicts.items() if v.state == NOT_MEASURED]
    if open_:
        cause = ERROR if any(v.cause == ERROR for _, v in open_) else open_[0][1].cause
        return Verdict.not_measured("; ".join(f"{hw}: {v.text()}" for hw, v in open_), cause)
    return Verdict.passed(figures, note="FP32 gate passed at " + ", ".join(verdicts))


def apply(ctx, report: dict | ReportJson, refs: References, gates: dict) -> None:
    """Measure each onnx-dynamic file at its other shapes and add its required ``parity_shapes`` check (the gates
    stage then settles the file's status with it)."""
    for art in (a for a in ReportJson(report).artifacts if a.verify_shapes):
        ctx.detail(f"{art.file} at {len(art.verify_shapes)} shapes")
        try:
            art.shapes_parity = verify_shapes(ctx.out_dir / art.file, refs, art.verify_shapes, ctx.options.threads,
                                              gates)
        except (InputError, RuntimeError, OSError, ValueError) as exc:
            art.shapes_parity = failed_section(f"verification at other shapes failed: {error_text(exc)}")
        art.set_check("parity_shapes", shapes_verdict(art, evaluate(art.parity, "fp32", gates)), required=True)
