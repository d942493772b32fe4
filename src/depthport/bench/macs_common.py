"""What every MAC counter returns: the result record, the not-counted record and the precision classes."""

from __future__ import annotations

INT_TYPES = ("INT8", "UINT8", "INT4")


def precision_class(act: str, weight: str) -> str:
    """fp32 / int8_dynamic / int8 / "<act>x<weight>" from TFLite dtype names."""
    a_int, w_int = act.upper() in INT_TYPES, weight.upper() in INT_TYPES
    if not a_int and not w_int and act.upper() == weight.upper() == "FLOAT32":
        return "fp32"
    if w_int and not a_int:
        return "int8_dynamic"
    if w_int and a_int:
        return "int8"
    return f"{act.lower()}x{weight.lower()}"


def _result(method: str, by_op: dict, count: dict, by_precision: dict, uncounted: list) -> dict:
    total = sum(by_op.values())
    return {"counted": True, "method": method, "total": total, "gmac": total / 1e9,
            "by_op": dict(sorted(by_op.items(), key=lambda kv: -kv[1])), "op_count": dict(count),
            "by_precision": dict(by_precision), "uncounted": uncounted}


def not_counted(reason: str) -> dict:
    return {"counted": False, "reason": reason, "total": None, "gmac": None, "by_op": {}, "by_precision": {}}
