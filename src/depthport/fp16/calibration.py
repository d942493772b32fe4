"""FP16-arithmetic measurements that the XNNPACK prediction is checked against on machines that cannot compute
FP16 themselves (``calibration.json``: CPU, ISA, versions, model, shape, images and the measured errors)."""

from __future__ import annotations

import json
from pathlib import Path

CALIBRATION = Path(__file__).with_name("calibration.json")


def load_calibration() -> list[dict]:
    return json.loads(CALIBRATION.read_text(encoding="utf-8"))
