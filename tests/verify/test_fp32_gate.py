"""The FP32 gate against float64 passes every correct FP32 file of every family and refuses the planted defects
that move the output beyond FP32 rounding (full-size figures: benchmarks/fp32_gate.py)."""

from __future__ import annotations

import pytest
import torch

from depthport.build import build, resolve_weights
from depthport.core.images import builtin_set
from depthport.export.litert import export_tflite
from depthport.registry import get_spec
from depthport.verify import gates
from depthport.runtimes.torch import TorchRunner
from depthport.verify.parity import parity_record, run_file
from depthport.verify.planted import BELOW_FP32_NOISE, DEFECTS
from depthport.verify.stage import make_references, verify_file

TINY_IDS = ("da2-tiny", "da2-metric-tiny", "da3-tiny", "da3-metric-tiny", "da3-mono-tiny")
VISIBLE = [name for name in DEFECTS if name not in BELOW_FP32_NOISE]


@pytest.fixture(scope="module", params=TINY_IDS)
def case(request, tmp_path_factory):
    spec = get_spec(request.param)
    weights = resolve_weights(spec, "random")
    refs = make_references(spec, weights, spec.default_hw, None, True, builtin_set()[:2], 2, fp64=True)
    return spec, weights, refs, tmp_path_factory.mktemp(spec.id)


def fp64_ratio(model, case, name) -> float:
    """The gate's ratio of ``model`` exported as FP32 .tflite and verified as a file."""
    spec, _, refs, folder = case
    path = export_tflite(model, spec.default_hw, folder / f"{name}.tflite")
    record, _, _ = verify_file(path, refs, threads=2)
    return record["fp64_error_ratio"]


def eager_fp64_ratio(model, case, name) -> float:
    """The same ratio computed on ``model`` itself in FP32 (no conversion): a planted defect is in the model, and
    the FP32 conversion of a correct model is tested above (the full-size files: benchmarks/fp32_gate.py)."""
    spec, _, refs, _ = case
    outputs = run_file(TorchRunner(model, spec.default_hw, 2, name), refs, name)
    return parity_record(outputs, refs, refs.label)["fp64_error_ratio"]


def test_correct_fp32_file_passes_the_gate(case):
    spec, weights, _, _ = case
    model = build(spec, spec.default_hw, weights).model
    ratio = fp64_ratio(model, case, "correct")
    assert 0 < ratio <= gates.DEFAULTS["fp32"]["fp64_error_ratio"]
    assert 0 < eager_fp64_ratio(model, case, "correct-eager") <= gates.DEFAULTS["fp32"]["fp64_error_ratio"]


@pytest.mark.parametrize("defect", VISIBLE)
def test_planted_defect_fails_the_gate(case, defect):
    spec, weights, _, _ = case
    model = DEFECTS[defect](spec, spec.default_hw, weights)
    x = torch.randn(1, 3, *spec.default_hw, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        moved = not torch.equal(model(x), build(spec, spec.default_hw, weights).model(x))
    if defect == "pos_formula_swapped" and not moved:
        pytest.skip(f"{spec.id} resamples no position embedding at {spec.default_hw}: the formulas agree")
    assert eager_fp64_ratio(model, case, defect) > gates.DEFAULTS["fp32"]["fp64_error_ratio"]
