"""FP16-arithmetic measurements that the XNNPACK prediction is checked against on machines that cannot compute
FP16 themselves (``calibration.json``: CPU, ISA, versions, model, shape, images, the target's backend form and the
measured errors). An entry counts only for the form it measured: when a target's form changes, its entries stop
matching until they are measured again."""

from __future__ import annotations

import json
from pathlib import Path

from ..atomic import atomic_path

CALIBRATION = Path(__file__).with_name("calibration.json")


def load_calibration() -> list[dict]:
    return json.loads(CALIBRATION.read_text(encoding="utf-8"))


def write_calibration(entries: list[dict]) -> None:
    with atomic_path(CALIBRATION) as tmp:
        Path(tmp).write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")


def target_of(entry: dict) -> str:
    """The fp16 .pte target an entry measured (entries written before targets were recorded: ``xnnpack-fp16``)."""
    return entry.get("target", "xnnpack-fp16")


def same_form(entry: dict, form: dict) -> bool:
    """Whether ``entry`` measured a file of the backend form ``form`` (``export.executorch.FORMS[target]``)."""
    return entry.get("form") == json.loads(json.dumps(form))


def matching(model: str, size, weights: str = "random (seed 0)", hardware: str | None = None,
             target: str = "xnnpack-fp16", *, form: dict) -> dict | None:
    """The entry measured for ``model``'s ``target`` file of backend form ``form`` at ``size`` (H, W) with
    ``weights`` (on ``hardware`` when given: an entry's ``hardware`` is "x86 avx512_fp16" or "arm64 neonfp16arith
    (qemu)"), or None."""
    for entry in load_calibration():
        if (entry["model"] == model and tuple(entry["size"]) == tuple(size) and entry["weights"] == weights
                and hardware in (None, entry["hardware"]) and target_of(entry) == target and same_form(entry, form)):
            return entry
    return None
