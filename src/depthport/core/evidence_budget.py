"""The evidence budget: on how many verification images the two costliest pieces of evidence run.

The float64 reference and the FP16-compute prediction cost, per image, about the model's parameter count times its
token count (a ViT's work): on 2 cores of an AMD Zen 5, da3-metric-large at 896x504 (0.77e12 parameter-tokens)
took 150 s an image for the FP16 prediction, da2-small at 518x686 (0.045e12) 9 s. Each runs on the first ``k``
verification images, ``k = BUDGET // per image``, at least 1 and at most all; ``--evidence-images N|all`` sets
``k``. Fewer images are never used silently: a figure measured on a subset carries ``line`` (report.json
``verify.evidence_budget``, the FP16 prediction's ``subset``, the verdicts' reasons, the card and the console).
Parity against the FP32 reference and the file's own runs always cover every image.
"""

from __future__ import annotations

from dataclasses import dataclass

# Parameter x token products per kind of costly evidence: every image of a Base model at its default shape, two of a
# Large one (about 5 minutes of FP16 prediction on 2 cores).
BUDGET = 1.6e12
PATCH = 14


@dataclass(frozen=True)
class EvidenceBudget:
    images: int  # the verification images
    count: int  # the images the float64 reference and the FP16-compute prediction run on
    per_image: float  # parameter x token products of one image
    requested: int | None = None  # --evidence-images (0: all), None: the budget decides

    @property
    def subset(self) -> bool:
        return self.count < self.images

    def of(self, what: str) -> str:
        """'float64 reference on 2 of 6 images (evidence budget)' or '' when every image is used."""
        if not self.subset:
            return ""
        why = "--evidence-images" if self.requested else "evidence budget"
        return f"{what} on {self.count} of {self.images} images ({why})"

    @property
    def line(self) -> str:
        return self.of("float64 reference and FP16-compute prediction")

    def as_entry(self) -> dict:
        return {"images": self.images, "fp64_images": self.count, "fp16_images": self.count,
                "per_image": self.per_image, "budget": BUDGET, "requested": self.requested,
                "rule": "images = budget // (parameters x tokens per image), at least 1",
                **({"line": self.line} if self.subset else {})}


def evidence_budget(params: int, input_hw: tuple[int, int], images: int,
                    requested: int | None = None) -> EvidenceBudget:
    """The budget for a model of ``params`` parameters at ``input_hw`` over ``images`` verification images;
    ``requested`` (``--evidence-images``): that many images, 0 for all."""
    per_image = float(params) * (input_hw[0] // PATCH) * (input_hw[1] // PATCH)
    if requested is not None:
        count = images if requested == 0 else min(requested, images)
    else:
        count = min(images, max(1, int(BUDGET // per_image)))
    return EvidenceBudget(images, count, per_image, requested)
