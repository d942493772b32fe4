"""What every report.json starts with: the model, its weights, shapes, output and units, the command, the versions
and the machine. One builder for `depthport export`, `depthport verify` and the web half of verify, so their
reports say the same things the same way."""

from __future__ import annotations

from ..core.provenance import machine, versions

PROMPT_LINE = ("second input 'prompt': coarse metric depth in metres (a phone's LiDAR / ToF map), min-max "
               "normalised inside the model; the output is stretched back to its range")


def new_report(spec, built, command: str, **fields) -> dict:
    """report.json before the stages fill in the artifacts: the header of ``built`` (a ``build.Built`` of
    ``spec``) and the command's own ``fields``."""
    prompt = {"prompt_shape": [1, 1, *built.prompt_hw], "prompt": PROMPT_LINE} if built.prompt_hw else {}
    return {
        "command": command,
        "model": spec.id,
        "weights": built.weights.argument,
        "random_weights": built.weights.random,
        "input_shape": [1, 3, *built.input_hw],
        **prompt,
        "output": spec.output,
        "output_space": spec.output_space,
        "output_units": spec.units(),
        "versions": versions(),
        "machine": machine(),
        **fields,
        "artifacts": [],
    }
