"""What every report.json starts with: the model, its weights and where they came from, shapes, output and units,
the input normalisation and rewrites, the command, the versions and the machine. The one builder for `depthport
export`, `depthport verify` and the web half of verify, so their reports say the same things the same way."""

from __future__ import annotations

from ..core.provenance import machine, versions

PROMPT_LINE = ("second input 'prompt': coarse metric depth in metres (a phone's LiDAR / ToF map), min-max "
               "normalised inside the model; the output is stretched back to its range")
FOLDED, IMAGENET = "folded (input RGB 0..1)", "ImageNet mean/std, RGB, x/255"


def base_model(spec, weights) -> str | None:
    """The Hub repo the weights came from (the model's published repo for a local checkpoint); None when random."""
    if weights.random:
        return None
    if weights.source.startswith("hf://"):
        return weights.source.removeprefix("hf://")
    return spec.hf_repo or spec.official_repo or None


def base_model_chain(spec, weights) -> list[str]:
    """``base_model`` followed by what that checkpoint says it was fine-tuned from (its model card or config)."""
    first = base_model(spec, weights)
    return [first, *(b for b in weights.base_models if b != first)] if first else []


def new_report(spec, built, command: str, **fields) -> dict:
    """report.json before the stages fill in the artifacts: the header of ``built`` (a ``build.Built`` of
    ``spec``) and the command's own ``fields``."""
    prompt = {"prompt_shape": [1, 1, *built.prompt_hw], "prompt": PROMPT_LINE} if built.prompt_hw else {}
    w = built.weights
    return {
        "command": command,
        "model": spec.id,
        "weights": w.argument,
        "random_weights": w.random,
        "input_shape": [1, 3, *built.input_hw],
        **prompt,
        "output": spec.output,
        "output_space": spec.output_space,
        "output_units": spec.units(),
        "versions": versions(),
        "machine": machine(),
        "weights_detail": {"source": w.source, "format": w.format, "revision": w.revision, "licence": spec.licence,
                           "licence_note": spec.licence_note or None, "non_commercial": spec.non_commercial},
        "base_model": base_model(spec, w),
        "base_model_chain": base_model_chain(spec, w),
        "normalization": FOLDED if "fold_input_normalization" in built.rewrites else IMAGENET,
        "pos_embed_formula": built.pos_formula,
        "rewrites": list(built.rewrites),
        **fields,
        "artifacts": [],
    }
