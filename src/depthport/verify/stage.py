"""verify: parity of every artifact against the upstream PyTorch reference, ground-truth accuracy, gates."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import numpy as np
import torch

from ..check.fp16_compute import fp16_arithmetic_here
from ..core.evidence_cache import EvidenceCache, weights_digest
from ..core.memory import give_back
from ..core.metrics import DELTA_DEFINITION
from ..core.report_model import Units, load
from ..core.prompts import builtin_prompt, prompt_input
from ..core.schema import (SKIPPED, UNAVAILABLE, ArtifactJson, Fp16ArithmeticJson, ReportJson, VerifyJson,
                           failed_section, not_measured_section)
from ..errors import error_text
from ..preprocess import InputError, to_tensor
from ..runtimes import load_runner
from ..runtimes.torch import TorchRunner
from . import accuracy, fp16_emulated, gates, shapes, web_folder
from .parity import References, check_shapes, depth_of, parity_record, run_file

PREPROCESS = "stretched to the export shape (Pillow bicubic), RGB x/255, ImageNet mean/std"


def reference_label(model, weights) -> str:
    """'transformers' DepthAnythingForDepthEstimation (upstream PyTorch), weights ...' from the reference's doc."""
    what = (type(model).__doc__ or type(model).__name__).split(";")[0].strip()
    what = "the" + what[3:] if what.startswith("The ") else what  # inside a sentence ('Parity is against the ...')
    label = f"{what} (upstream PyTorch), weights {weights.source}"
    return label + (" (RANDOM weights, identical to the export's)" if weights.random else "")


def make_references(spec, weights, input_hw, eager_model, eager_normalized: bool, images, threads: int,
                    fp64: bool = False, cache: bool | EvidenceCache = True, prompts: dict | None = None,
                    cache_id: tuple | None = None, fp64_count: int | None = None, eager_id: tuple = (),
                    eager_count: int | None = None) -> References:
    """The upstream model with ``weights`` (also in float64 with ``fp64``) and depthport's ``eager_model``
    (may be None) over ``images`` (with their ``prompts``, for a prompted model); the upstream outputs kept in
    the on-disk evidence cache (``cache``: True for the default one, or the cache to use) unless ``cache`` is
    False. ``cache_id``: (model id, weights digest) when the caller has it already. ``fp64_count``: the float64
    reference runs on the first this-many images (the evidence budget), all by default; ``eager_count`` the same for
    ``eager_model``. ``eager_id`` (what ``eager_model`` is beyond the weights: its rewrites and position formula)
    keeps its outputs in the cache too."""
    hw = tuple(input_hw)
    extra = (next(iter(prompts.values())).shape,) if prompts else ()
    eager = TorchRunner(eager_model, hw, threads, "depthport-eager") if eager_model is not None else None
    rebuild = functools.partial(_reference_model, spec, weights)
    ref64 = (TorchRunner(None, hw, threads, "reference-eager-fp64", torch.float64, extra, rebuild) if fp64 else None)
    reference = rebuild()
    return References(images, hw, TorchRunner(reference, hw, threads, "reference-eager", extra_shapes=extra,
                                              rebuild=rebuild), eager,
                      eager_normalized,
                      reference_label(reference, weights), ref64, spec,
                      cache=(EvidenceCache() if cache is True else cache) or None,
                      cache_id=(cache_id or (spec.id, weights_digest(weights.state))) if cache else (), prompts=prompts,
                      fp64_count=fp64_count, eager_id=eager_id if eager_model is not None else (),
                      eager_count=eager_count)


def _reference_model(spec, weights):
    """The upstream model, built; the weights then wait on disk while it runs (``LoadedWeights.release``)."""
    from ..reference import reference_model

    model = reference_model(spec, weights)
    weights.release()
    return model


@functools.lru_cache(maxsize=1)
def _motorcycle():
    return accuracy.motorcycle()


def _scene_inputs(runner, input_hw: tuple[int, int], normalized: bool = True) -> list[np.ndarray]:
    """The motorcycle scene as ``runner`` takes it: the image, then (a prompted model) its simulated LiDAR prompt
    (``core.prompts.lidar_prompt``)."""
    left, _ = _motorcycle()
    extra = [prompt_input(builtin_prompt("motorcycle_left", shape[2:])[0], shape[2:], "motorcycle_left")
             for shape in getattr(runner, "extra_shapes", ())]
    return [to_tensor(left, input_hw, normalize=normalized), *extra]


def scene_name(refs: References) -> str | None:
    """The verification image that is the motorcycle scene, with the inputs ``accuracy_of`` would feed (the same
    pixels and prompt), so its outputs serve for accuracy too; None when the set has no such image."""
    left, _ = _motorcycle()
    want = np.asarray(left.convert("RGB"))
    for name, image in refs.images:
        if image.size == left.size and np.array_equal(np.asarray(image.convert("RGB")), want):
            scene = _scene_inputs(refs.reference, refs.input_hw)
            if all(np.array_equal(a, b) for a, b in zip(scene[1:], refs.extra(name))):
                return name
    return None


def accuracy_of(runner, input_hw: tuple[int, int], normalized: bool = True,
                space: str = "inverse depth", units: dict | None = None, depth: np.ndarray | None = None) -> dict:
    """Accuracy on the motorcycle scene; a metric output (``units``: ``ModelSpec.units()``) is scored in metres.
    ``depth``: the runner's output on the scene when it was computed already (``scene_name``)."""
    left, disparity = _motorcycle()
    to_metres = accuracy.metres_factor(units, input_hw, (left.height, left.width))
    if depth is None:
        x, *extra = _scene_inputs(runner, input_hw, normalized)
        depth = depth_of(runner, x, input_hw, "model", *extra)
    return accuracy.score(depth, disparity, space, to_metres)


def prompt_baselines(reference: TorchRunner, input_hw: tuple[int, int]) -> dict:
    """What a prompted model's accuracy on the motorcycle scene compares with: the same upstream model with no prompt
    (transformers' ``prompt_depth=None``: depth without a unit, scored after scale-and-shift alignment, as a relative
    model is), and the scene's simulated LiDAR prompt alone, upsampled (bilinear) to the ground truth, in metres."""
    _, disparity = _motorcycle()
    prompt_hw = reference.extra_shapes[0][2:]
    lidar = builtin_prompt("motorcycle_left", prompt_hw)[0]
    x = _scene_inputs(reference, input_hw)[0]
    without = depth_of(reference, x, input_hw, "reference without prompt")
    return {
        "without_prompt": {**accuracy.score(without, disparity, "depth"),
                           "label": "upstream model without the prompt (prompt_depth=None), aligned by scale and shift"},
        "prompt_alone": {**accuracy.score(lidar, disparity, "depth", to_metres=1.0),
                         "label": f"the {prompt_hw[0]}x{prompt_hw[1]} LiDAR prompt alone, bilinear upsampling, metres"},
    }


def _space_units(refs: References, space: str | None) -> tuple[str, dict | None]:
    """The output space (given, else the reference model's) and units of what ``refs`` verifies."""
    spec = refs.spec
    return space or (spec.output_space if spec is not None else "inverse depth"), (
        spec.units() if spec is not None else None)


def verify_file(path: Path, refs: References, threads: int, normalized: bool = True,
                space: str | None = None, precision: str | None = None, on_image=None,
                keep=None) -> tuple[dict, dict, dict]:
    """(parity record, accuracy, {image: depth}) of one exported file; ``on_image(done)`` after each image;
    ``keep(runner, ms)`` receives the file's runner, warm, and the time of one of its calls."""
    runner = load_runner(path, threads=threads)
    check_shapes(runner, refs.input_hw, Path(path).name)
    t0 = time.perf_counter()
    outputs = run_file(runner, refs, Path(path).name, normalized, on_image)
    if keep is not None:
        keep(runner, (time.perf_counter() - t0) * 1e3 / max(1, len(outputs)))
    record = parity_record(outputs, refs, refs.label, "depthport eager model, same rewrites")
    record.update(runtime=runner.runtime)
    if precision == "fp16":
        found = Fp16ArithmeticJson(fp16_arithmetic_here())
        record.update(compute=found.mode, compute_reason=found.reason)
    if refs.reference64 is None:
        record.update(skipped=["fp64_error_ratio"])
    scene = scene_name(refs)
    return record, accuracy_of(runner, refs.input_hw, normalized, *_space_units(refs, space),
                               depth=outputs[scene] if scene else None), outputs


def summary_block(refs: References, source: str, threads: int, random_weights: bool,
                  prompt_origins: dict | None = None) -> dict:
    return {"reference": refs.label, "image_source": source, "images": refs.names,
            **({"parity_images": refs.parity_names} if refs.parity_names != refs.names else {}),
            **({"prompts": prompt_origins} if prompt_origins else {}),
            "preprocess": PREPROCESS, "threads": threads, "delta125": DELTA_DEFINITION,
            "random_weights": random_weights,
            **({"note": "RANDOM WEIGHTS: the reference is random too; parity still tests the conversion, "
                        "the depth means nothing"} if random_weights else {})}


def accuracy_block(refs: References, random_weights: bool, space: str | None = None) -> dict:
    space, units = _space_units(refs, space)
    metric, scene = units is not None and load(Units, units).metric, scene_name(refs)
    return {"dataset": accuracy.DATASET, "method": accuracy.__doc__.split("\n\n")[1].replace("\n", " "),
            "space": space, "metric": metric, "meaningful": not random_weights,
            "note": accuracy.meaning(random_weights, space, metric),
            "reference": accuracy_of(refs.reference, refs.input_hw, space=space, units=units,
                                     depth=refs.output("reference", scene) if scene else None),
            **({"baselines": prompt_baselines(refs.reference, refs.input_hw)}
               if refs.spec is not None and refs.spec.prompted else {})}


def figures_entry(refs: References, name: str) -> dict:
    """What the HTML report draws: the first image, its reference depth and each variant's depth."""
    return {"image_name": name, "image": dict(refs.images)[name], "input_hw": refs.input_hw,
            "reference": refs.output("reference", name),
            "eager": refs.output("eager", name) if refs.eager is not None else None, "variants": {}}


def needs_fp64(ctx, report: dict | ReportJson) -> bool:
    """Float64 reference by default whenever an FP32 file is verified; off with the ``no_fp64`` option."""
    return not ctx.options.no_fp64 and any(a.precision == "fp32" for a in ReportJson(report).artifacts)


def _settle_dir(ctx) -> Path | None:
    """Where files that do not ship are moved: the export folder, or nowhere for the user's own files."""
    return None if ctx.in_place else ctx.out_dir


def _label(ctx):
    """How report.html names each file's depth: by target in an export, by file name for the user's files (which
    may share a target)."""
    return (lambda art: Path(art.file).name) if ctx.in_place else (lambda art: art.target)


def skipped(ctx, report: dict | ReportJson) -> None:
    """``--skip verify``: every file's parity is not measured, so none ships (each is unverified)."""
    for art in ReportJson(report).artifacts:
        art.parity = not_measured_section("verification skipped on request (--skip verify)", SKIPPED)
    gates.apply_gates(report, _settle_dir(ctx), gates.thresholds(ctx.options.gates, ctx.built.spec.metric),
                      ctx.files)


def apply(ctx, report: dict | ReportJson) -> None:
    report = ReportJson(report)
    thresholds = gates.thresholds(ctx.options.gates, ctx.built.spec.metric)
    threads = ctx.options.threads
    source, images, prompts, origins = ctx.verification_set()
    built = ctx.built
    space = built.spec.output_space
    normalized = "fold_input_normalization" not in built.rewrites
    budget = ctx.evidence_budget
    try:
        refs = make_references(built.spec, built.weights, built.input_hw, built.model if ctx.options.eager else None,
                               normalized, images, threads, fp64=needs_fp64(ctx, report), cache=ctx.cache or False,
                               prompts=prompts, cache_id=ctx.cache_id, fp64_count=budget.count,
                               eager_count=budget.count, eager_id=(tuple(built.rewrites), built.pos_formula, built.prompt_hw))
    except ModuleNotFoundError as exc:
        if ctx.in_place:  # the user's files: one line naming the package, not a report of errors
            raise
        reason = (f"the upstream reference needs the Python package {exc.name!r}, which is not installed "
                  "(`make venv` installs it)")
        for art in report.artifacts:
            art.parity = failed_section(reason)
        gates.apply_gates(report, ctx.out_dir, thresholds, ctx.files)
        return
    refs.parity_count, refs.keep = budget.parity_count, scene_name(refs)
    refs.seed_eager(ctx.eager_outputs)
    ctx.detail("the upstream reference on the ground-truth scene (accuracy) and the first image (report.html)")
    record_references(report, refs, source, threads, built.weights.random, space, origins)
    ctx.figures = figures_entry(refs, refs.names[0])
    verify_artifacts(ctx, report, refs, normalized, thresholds, space, _label(ctx))
    VerifyJson(report.verify).reference_cache = cache_summary(refs)
    gates.apply_gates(report, _settle_dir(ctx), thresholds, ctx.files)


def cache_summary(refs: References) -> dict:
    """Where the upstream outputs (and, in an export, the FP16-compute predictions) came from: the on-disk cache's
    folder, hits, misses and rejected entries."""
    if refs.cache is None:
        return {"used": False, "why": "off (--no-cache)"}
    return {"used": True, **refs.cache.summary()}


def record_references(report: dict | ReportJson, refs: References, source: str, threads: int,
                      random_weights: bool, space: str | None = None, prompt_origins: dict | None = None) -> None:
    """What the files were verified against (``verify``) and the reference's own accuracy (``accuracy``)."""
    ReportJson(report).update(verify=summary_block(refs, source, threads, random_weights, prompt_origins),
                              accuracy=accuracy_block(refs, random_weights, space))


KINDS = {"reference": "upstream FP32", "reference64": "upstream float64", "eager": "depthport eager"}


def park_eager(ctx, refs: References) -> None:
    """Every eager output is in: depthport's model waits on disk while the float64 model runs (``Built.release``),
    and the eager runner reads it back if it runs again."""
    eager, built = refs.eager, ctx.built
    if eager.built is not built.model or not built.release():
        return
    refs.eager = TorchRunner(None, refs.input_hw, eager.threads, eager.runtime, extra_shapes=eager.extra_shapes,
                             rebuild=lambda: built.model)
    give_back()


def reference_outputs(ctx, refs: References) -> None:
    """Every image's reference outputs (upstream FP32, depthport's eager model, upstream float64 where asked),
    computed (or read from the cache) before any file is loaded: the progress counts them (images n/N, layers n/N,
    the time left), and no file's runtime is in memory beside a model's activations. One upstream model is in
    memory at a time, depthport's waits on disk while the float64 one runs (``park_eager``), and the upstream
    models are freed at the end (built again if another shape needs them)."""
    wanted = [("reference", name) for name in refs.parity_names]
    if refs.eager is not None:
        wanted += [("eager", name) for name in refs.eager_names]
    if refs.reference64 is not None:
        wanted += [("reference64", name) for name in refs.fp64_names]
    total = len(wanted)
    what = "reference outputs"
    ctx.detail(what, 0, total)
    runners = [r for r in (refs.reference, refs.reference64, refs.eager) if r is not None]
    at = {"i": 1, "kind": ""}

    def on_layer(done: int, layers: int) -> None:  # outputs n/N, layers n/N; the time left in thousandths of outputs
        ctx.detail(f"{what}: {at['i']}/{total} ({at['kind']}), layers {done}/{layers}",
                   (at["i"] - 1) * 1000 + done * 1000 // layers, total * 1000)

    for runner in runners:
        runner.on_layer = on_layer
    try:
        for i, (kind, name) in enumerate(wanted, 1):
            if kind != "reference" and refs.reference.built is not None:
                refs.reference.release()  # every FP32 output is in: one upstream model in memory at a time
                give_back()
            if kind == "reference64" and refs.eager is not None and refs.eager.rebuild is None:
                park_eager(ctx, refs)
            at.update(i=i, kind=KINDS[kind])
            refs.output(kind, name)
            ctx.detail(f"{what}: {i}/{total}", i * 1000, total * 1000)
    finally:
        for runner in runners:
            runner.on_layer = None
            runner.release()
    give_back()


def verify_artifacts(ctx, report: dict | ReportJson, refs: References, normalized: bool, thresholds: dict,
                     space: str | None = None, label=lambda art: art.target) -> None:
    """Parity and accuracy of every artifact (``ctx.out_dir / art.file``), into the artifact; each file's
    depth of the first image into ``ctx.figures`` under ``label(art)``; web folders in Chromium and dynamic
    files at their other shapes. A file that fails to run gets a parity error, not an exception."""
    report = ReportJson(report)
    threads, figures = ctx.options.threads, ctx.figures
    files = [a for a in report.artifacts if not a.web and a.runnable_here is not False]
    if files:
        try:
            reference_outputs(ctx, refs)
        except (ModuleNotFoundError, RuntimeError, OSError, ValueError):
            pass  # each file's verification below meets the same failure and records it as its parity error
    n, k, i = len(files), len(refs.parity_names), 0
    for art in report.artifacts:
        if art.web:  # a folder with a browser page: verified in Chromium below
            continue
        if art.runnable_here is False:
            art.parity = not_measured_section(art.parity_note or "this file cannot run on this machine", UNAVAILABLE)
            continue
        i += 1
        what = f"{Path(art.file).name} ({i}/{n})"
        ctx.detail(f"{what} on {k} images", (i - 1) * k, n * k)
        try:
            parity, scores, outputs = verify_file(
                ctx.out_dir / art.file, refs, threads, normalized, space, art.precision,
                on_image=lambda j: ctx.detail(f"{what}: images {j}/{k}", (i - 1) * k + j, n * k),
                keep=keep_warm(ctx, report, art))
        except (InputError, ModuleNotFoundError, RuntimeError, OSError, ValueError) as exc:
            art.parity = failed_section(f"verification failed: {error_text(exc)}")
            continue
        art.update(parity=parity, accuracy=scores)
        figures["variants"][label(art)] = np.asarray(outputs[refs.names[0]])
    fp16_emulated.apply(ctx, report, refs, normalized)
    web_folder.apply(ctx, report, refs, figures)
    shapes.apply(ctx, report, refs, thresholds)


def keep_warm(ctx, report: dict | ReportJson, art: dict | ArtifactJson):
    """Where verify leaves ``art``'s runner for the bench stage (``ExportContext.warm_runners``), or None: only in an
    export that benches, and not when verify's later steps load more (the emulated ARM CPU, a browser, references at
    other shapes) beside the files' runtimes."""
    if ctx.in_place or ctx.options.skips("bench") or ctx.options.fp16_arm64:
        return None
    if any(a.web or a.verify_shapes for a in ReportJson(report).artifacts):
        return None
    target = ArtifactJson(art).target

    def keep(runner, ms: float) -> None:
        ctx.warm_runners[target] = (runner, ms)

    return keep
