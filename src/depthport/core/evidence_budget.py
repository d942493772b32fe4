"""The evidence budget: on how many verification images the two costliest pieces of evidence run, and at what
shape the rewrite ledger runs.

The float64 reference and the FP16-compute prediction cost, per image, about the model's parameter count times its
token count (a ViT's work): on 2 cores of an AMD Zen 5, da3-metric-large at 896x504 (0.77e12 parameter-tokens)
took 130-160 s an image for the FP16 prediction, da2-small at 518x686 (0.045e12) 9 s. Each runs on the first ``k``
verification images, ``k = BUDGET // per image``, at least 1 and at most all; ``--evidence-images N|all`` sets
``k``. Fewer images are never used silently: a figure measured on a subset carries ``line`` (report.json
``evidence_budget``, the FP16 prediction's ``subset``, the verdicts' reasons, the card and the console).
Depthport's eager model (the converter's share of the error, ``vs_eager``) runs on the same ``k`` images.

Parity (the upstream FP32 reference and every file, one float32 forward pass each an image) covers every image up to
``PARITY_BUDGET``; beyond it, on ``PARITY_BUDGET // per image`` of them, at least ``MIN_PARITY`` and never fewer than
``k`` (the ground-truth scene, when the set holds it, is always one: ``verify.parity.References.parity_names``).

The rewrite ledger runs one float32 forward pass per rewrite (and one before any). When those passes cost more than
``LEDGER_BUDGET`` at the export shape, the ledger runs at the export shape scaled down (aspect kept, an even number
of patches a side) until they fit, and says so (``ledger``); ``--evidence-images all`` runs it at the export shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Parameter x token products per kind of costly evidence: every image of a Base model at its default shape, two of a
# Large one at 518x686, one at 896x504 or more (on 2 cores of an AMD Zen 5, da3-metric-large at 896x504 took about
# 52 s an image for the float64 reference and 130-160 s for the FP16 prediction; a second image would take its
# whole export past 15 minutes).
BUDGET = 1.5e12
# A ledger pass is a float32 forward pass: on 2 cores of the same Zen 5, da3-metric-large at 896x504 took 17 s where
# its float64 reference took 52 s an image and its FP16 prediction 111 s.
LEDGER_BUDGET = 2 * BUDGET
# Parity's passes cost a third of a float64 image each (and the file's, as much again): every image up to 2.5 times
# the budget. On 2 cores of an AMD Zen 3, prompt-da-large at 756x1008 (1.3e12 an image) took 28 s an image for the
# upstream FP32 reference and 29 s for its .tflite, and with 3 images its export took 17.1 minutes: it gets 2.
PARITY_BUDGET = 2.5 * BUDGET
MIN_PARITY = 2
PATCH = 14


@dataclass(frozen=True)
class EvidenceBudget:
    images: int  # the verification images
    count: int  # the images the float64 reference, the FP16-compute prediction and depthport eager run on
    per_image: float  # parameter x token products of one image
    requested: int | None = None  # --evidence-images (0: all), None: the budget decides
    input_hw: tuple[int, int] | None = None  # the export shape
    ledger_hw: tuple[int, int] | None = None  # the shape the rewrite ledger runs at
    parity: int | None = None  # the images the upstream FP32 reference and every file run on; None: all

    @property
    def subset(self) -> bool:
        return self.count < self.images

    @property
    def parity_count(self) -> int:
        return self.images if self.parity is None else self.parity

    @property
    def ledger(self) -> str:
        """'rewrite ledger at 560x308 instead of 896x504 (evidence budget)' or '' at the export shape."""
        if self.ledger_hw is None or self.input_hw is None or tuple(self.ledger_hw) == tuple(self.input_hw):
            return ""
        (h, w), (eh, ew) = self.ledger_hw, self.input_hw
        return f"rewrite ledger at {h}x{w} instead of {eh}x{ew} (evidence budget)"

    def of(self, what: str) -> str:
        """'float64 reference on 2 of 6 images (evidence budget)' or '' when every image is used."""
        if not self.subset:
            return ""
        why = "--evidence-images" if self.requested else "evidence budget"
        return f"{what} on {self.count} of {self.images} images ({why})"

    @property
    def parity_line(self) -> str:
        """'parity (upstream FP32 reference and each file) on 3 of 6 images (evidence budget)' or ''."""
        if self.parity_count >= self.images:
            return ""
        return (f"parity (upstream FP32 reference and each file) on {self.parity_count} of {self.images} images "
                "(evidence budget)")

    @property
    def line(self) -> str:
        """What was measured on less than all, '' when nothing was."""
        return "; ".join(part for part in (self.parity_line,
                                           self.of("float64 reference, FP16-compute prediction and depthport eager"),
                                           self.ledger)
                         if part)

    def as_entry(self) -> dict:
        return {"images": self.images, "fp64_images": self.count, "fp16_images": self.count, "eager_images": self.count,
                "per_image": self.per_image, "budget": BUDGET,
                "requested": "all" if self.requested == 0 else self.requested,  # --evidence-images all is 0 here
                "rule": "images = budget // (parameters x tokens per image), at least 1",
                "parity_images": self.parity_count, "parity_budget": PARITY_BUDGET,
                "parity_rule": f"images = parity budget // (parameters x tokens per image), at least {MIN_PARITY} and "
                               "the images above, the ground-truth scene among them",
                **({"ledger_hw": list(self.ledger_hw), "ledger_budget": LEDGER_BUDGET,
                    "ledger_rule": "passes x parameters x tokens <= ledger budget, else the export shape scaled "
                                   "down (aspect kept, an even number of patches a side)"} if self.ledger_hw else {}),
                **({"line": self.line} if self.line else {})}


def evidence_budget(params: int, input_hw: tuple[int, int], images: int, requested: int | None = None,
                    ledger_passes: int = 0) -> EvidenceBudget:
    """The budget for a model of ``params`` parameters at ``input_hw`` over ``images`` verification images;
    ``requested`` (``--evidence-images``): that many images, 0 for all. With ``ledger_passes`` (the rewrite ledger's
    forward passes), also the ledger's shape."""
    per_image = float(params) * (input_hw[0] // PATCH) * (input_hw[1] // PATCH)
    if requested is not None:
        count = images if requested == 0 else min(requested, images)
    else:
        count = min(images, max(1, int(BUDGET // per_image)))
    parity = images if requested == 0 else min(images, max(count, MIN_PARITY, int(PARITY_BUDGET // per_image)))
    ledger = ledger_hw(per_image * ledger_passes, input_hw) if ledger_passes and requested != 0 else None
    return EvidenceBudget(images, count, per_image, requested, tuple(input_hw),
                          ledger or (tuple(input_hw) if ledger_passes else None), parity)


def ledger_hw(cost: float, input_hw: tuple[int, int]) -> tuple[int, int]:
    """``input_hw`` when ``cost`` (the ledger's parameter x token products there) is within ``LEDGER_BUDGET``, else
    the shape scaled down so that it is: aspect kept, an even number of patches a side (the DPT head halves and
    doubles), at least 2."""
    if cost <= LEDGER_BUDGET:
        return tuple(input_hw)
    scale = math.sqrt(LEDGER_BUDGET / cost)
    return tuple(max(2, int(n // PATCH * scale) // 2 * 2) * PATCH for n in input_hw)
