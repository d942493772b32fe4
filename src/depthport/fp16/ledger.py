"""The FP16 error ledger: where a model's FP16 error comes from, and what keeping each part in FP32 would buy.

Each row re-runs the FP16 simulation (``simulate_fp16``) with one group of modules computed in FP32 and reports
the output's error then, beside the all-FP16 run: the share of the error that group is responsible for. The
groups are read from the module names of the DINOv2 + DPT models (``default_groups``): the encoder's norms,
attention and MLPs, the patch embedding, and each part of the head.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torch import nn

from .simulate import simulate_fp16

# (group label, regex over module names); a module matching a group's pattern is kept in FP32 with its children.
GROUPS = (
    ("patch embedding", r"encoder\.patch_embed"),
    ("encoder norms", r"encoder\.blocks\.\d+\.norm\d|encoder\.norm"),
    ("encoder attention", r"encoder\.blocks\.\d+\.attn"),
    ("encoder MLPs", r"encoder\.blocks\.\d+\.mlp"),
    ("head: projections and resizes", r"head\.(projects|resize)\.\d+"),
    ("head: layer_rn convs", r"head\.layer_rn\.\d+"),
    ("head: fusion residual convs", r"head\.fusion\.\d+\.res\d"),
    ("head: fusion out convs", r"head\.fusion\.\d+\.out_conv"),
    ("head: output convs", r"head\.out_conv\d|head\.out_resize"),
)


@dataclass
class LedgerRow:
    group: str
    modules: int
    rel_l2: float
    delta125_worst: float
    share_removed: float  # 1 - rel_l2 / baseline rel_l2

    def as_dict(self) -> dict:
        return vars(self).copy()


def default_groups(model: nn.Module) -> dict[str, list[str]]:
    """{label: [module names]} of ``GROUPS`` that match at least one module of ``model``."""
    names = [n for n, _ in model.named_modules() if n]
    out = {}
    for label, pattern in GROUPS:
        found = [n for n in names if re.fullmatch(pattern, n)]
        if found:
            out[label] = found
    return out


def fp16_ledger(model: nn.Module, inputs, accumulate: str = "xnnpack", groups: dict | None = None,
                progress=None) -> dict:
    """{"accumulate", "baseline": {rel_l2, delta125_worst, pearson_worst}, "rows": [LedgerRow dicts]}, rows sorted
    by the share of the error they remove. ``progress(text)`` is told each group as it starts."""
    groups = default_groups(model) if groups is None else groups
    base = simulate_fp16(model, inputs, accumulate=accumulate)
    rows = []
    for i, (label, scopes) in enumerate(groups.items(), 1):
        if progress is not None:
            progress(f"FP16 ledger {i}/{len(groups)}: {label} in FP32")
        run = simulate_fp16(model, inputs, accumulate=accumulate, fp32_scopes=scopes)
        share = 1.0 - run.rel_l2 / base.rel_l2 if base.rel_l2 > 0 else 0.0
        rows.append(LedgerRow(label, len(scopes), run.rel_l2, run.figures["delta125_worst"], share))
    rows.sort(key=lambda r: -r.share_removed)
    return {"accumulate": accumulate,
            "baseline": {"rel_l2": base.rel_l2, "delta125_worst": base.figures["delta125_worst"],
                         "pearson_worst": base.figures["pearson_worst"]},
            "rows": [r.as_dict() for r in rows]}
