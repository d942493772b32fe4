"""The export stage's conversions, each in a child process, side by side where the machine allows.

A converter holds several copies of the model while it works (traced graph, constants, the file's buffers) and its
process keeps that memory after it returns; and each conversion is mostly single-threaded Python. So every target
runs in a child of a ``forkserver`` pool: the children start from a process that never converted anything (a
process that has converted cannot fork safely: the converters' thread pools deadlock the child), their memory goes
back to the system when they end, and as many run at once as the cores and the memory budget allow
(``conversion_workers``). The children load the built model from one file in the export's scratch folder.

A target that needs another's file waits for it (``NEEDS``: a LiteRT variant or the ``web`` page needs the FP32
.tflite, ``web-onnx`` the .onnx), and the report entries come back in the order the targets were asked for. A
conversion that raises raises here, with its own error; a child that dies (killed for memory) is named.

While the children convert, the exporting process does what the next stages need that needs no file (``meanwhile``,
in a thread of its own: the check stage's FP16-compute predictions); the stages then read it from the context.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from ..core.machine import usable_cores
from ..core.memory import available_bytes, give_back
from .context import ExportContext, StageOptions

# What each conversion costs, relative (seconds for DA-V2-Small at 518x686 on 2 cores of a Sapphire Rapids): the
# costliest start first, so that the last to finish starts early.
COST = {"xnnpack-fp16-split": 120, "xnnpack-fp16": 90, "xnnpack-int8": 60, "coreml": 60, "xnnpack-fp32": 36,
        "litert-fp32": 22, "onnx-dynamic": 12, "onnx": 8, "litert-fp16": 1, "litert-int8": 1, "litert-int8-weight": 1}
# The file a target is made from, when that target is asked for too (else the target makes it itself).
FP32_SOURCE = "litert-fp32"
NEEDS = {"litert-fp16": FP32_SOURCE, "litert-int8": FP32_SOURCE, "litert-int8-weight": FP32_SOURCE,
         "web": FP32_SOURCE, "web-onnx": "onnx"}
# A conversion's memory beyond its process's own: about this many bytes per parameter (the FP32 .tflite of
# DA-V2-Small, 25 M parameters, peaked 1.1 GB above the model in its process) plus a fixed part for the imports.
BYTES_PER_PARAMETER = 48
CHILD_BYTES = 1 << 30
# Below this many parameters a model converts in a few seconds, less than a child takes to start (its imports, about
# 10 s): such exports (the tests' tiny configs) convert in the exporting process unless children are asked for.
MIN_PARAMETERS = 10_000_000


def conversion_workers(parameters: int, jobs: int, available: int | None = None, cores: int | None = None) -> int:
    """How many conversions may run at once: one per core, as many as the memory available now holds (each about
    ``CHILD_BYTES`` + ``BYTES_PER_PARAMETER`` per parameter), at least 1, at most ``jobs``."""
    available = available_bytes() if available is None else available
    cores = usable_cores() if cores is None else cores
    each = CHILD_BYTES + BYTES_PER_PARAMETER * parameters
    by_memory = int(available // each) if available else 1
    return max(1, min(jobs, cores or 1, by_memory))


@dataclass(frozen=True)
class Job:
    """What a child needs to write one target's file."""

    target: str
    model_file: Path  # the built model, ``torch.save``d once for every child
    spec_id: str
    weights: object  # ``LoadedWeights`` without its tensors: where they came from
    input_hw: tuple[int, int]
    pos_formula: str
    rewrites: tuple[str, ...]
    out_dir: Path
    scratch: Path
    stem: str
    options: StageOptions
    threads: int
    files: tuple[tuple[str, Path], ...] = ()
    fp32_source: Path | None = None


def in_children(ctx: ExportContext, targets: Iterable[str]) -> bool:
    """Whether ``convert_all`` converts in children: asked for (``StageOptions.convert_in_children``), or by
    default for a model of ``MIN_PARAMETERS`` or more when more than one conversion can run at once. Never for a
    model the registry does not know by id (a child builds its spec from it). One conversion at a time stays in the
    exporting process: a child's own runtime costs about 1 GB beside it (prompt-da-large's litert-fp32 export peaked
    at 7.99 GiB converting in a child, 7.21 GiB in process)."""
    from ..registry import MODELS

    spec = ctx.built.spec
    if MODELS.get(spec.id) is not spec:
        return False
    asked = ctx.options.convert_in_children
    if asked is not None:
        return asked
    jobs, parameters = len(list(targets)), ctx.built.parameter_count
    return parameters >= MIN_PARAMETERS and jobs > 1 and conversion_workers(parameters, jobs) > 1


def convert_all(ctx: ExportContext, targets: list[str], meanwhile: Callable[[], None] | None = None) -> list[dict]:
    """Every target's file and report entry, in ``targets``' order: converted here one after another, or in
    children (``in_children``) while ``meanwhile()`` runs here beside them (its exceptions are dropped: what it
    computes ahead, the stage that needs it computes again, and meets the same error there)."""
    from .targets import TARGETS

    if not in_children(ctx, targets):
        entries = []
        for i, name in enumerate(targets, 1):
            ctx.detail(f"{name} ({i}/{len(targets)})", i - 1, len(targets))
            entries.append(TARGETS[name](ctx))
        return entries
    return _convert_in_children(ctx, targets, meanwhile)


def _beside(ctx: ExportContext, work: Callable[[], None] | None) -> threading.Thread | None:
    """``work`` started in a thread of its own that shows no progress, or None when there is none."""
    if work is None:
        return None

    def run() -> None:
        with ctx.unseen():
            try:
                work()
            except Exception:  # noqa: BLE001 - computed ahead only: the stage that needs it meets the error again
                pass

    thread = threading.Thread(target=run, name="depthport-evidence-beside-conversions", daemon=True)
    thread.start()
    return thread


def _job_order(targets: list[str]) -> list[str]:
    """The targets, those another waits for first, then the costliest first (``COST``)."""
    needed = {NEEDS[t] for t in targets if t in NEEDS}
    return sorted(targets, key=lambda t: (t not in needed, -COST.get(t, 10)))


def _convert_in_children(ctx: ExportContext, targets: list[str], meanwhile: Callable[[], None] | None = None
                         ) -> list[dict]:
    import torch

    b = ctx.built
    model_file = ctx.scratch / "model-for-conversions.pt"
    torch.save(b.model, model_file)
    if b.release():  # a large model waits on disk while its children convert it: nothing beside them reloads it
        meanwhile = None
    give_back()
    workers = conversion_workers(b.parameter_count, len(targets))
    base = Job("", model_file, b.spec.id, replace(b.weights, _state=None, _spill=None), tuple(b.input_hw),
               b.pos_formula, tuple(b.rewrites), ctx.out_dir, ctx.scratch, ctx.stem, ctx.options,
               max(1, ctx.options.threads // workers))
    waiting, running, entries = _job_order(targets), {}, {}
    total = len(targets)
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver"),
                               initializer=_end_with, initargs=(os.getpid(),))
    beside = None
    try:
        while waiting or running:
            for name in [t for t in waiting if NEEDS.get(t) not in targets or NEEDS[t] in entries]:
                if len(running) >= workers:
                    break
                waiting.remove(name)
                job = replace(base, target=name, files=tuple(ctx.files.items()), fp32_source=ctx.fp32_source)
                running[pool.submit(convert_one, job)] = name
            beside = beside or _beside(ctx, meanwhile)
            also = "; evidence beside them" if beside is not None and beside.is_alive() else ""
            ctx.detail(f"converting {', '.join(running.values())} ({workers} at once; "
                       f"{len(entries)}/{total} done{also})", len(entries), total)
            done, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in done:
                name = running.pop(future)
                entries[name] = _result(future, name, ctx)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        model_file.unlink(missing_ok=True)
    if beside is not None:  # not after a failed conversion or Ctrl-C: the export ends there (a daemon thread)
        ctx.detail("the evidence beside the conversions")
        beside.join()
    return [entries[t] for t in targets]


def _result(future: Future, name: str, ctx: ExportContext) -> dict:
    """The child's report entry; its files and FP32 source recorded in ``ctx``."""
    try:
        entry, files, fp32_source = future.result()
    except BrokenProcessPool:
        raise RuntimeError(f"the conversion of {name} ended without a result: its child process died (out of memory? "
                           "run with fewer targets at once)") from None
    ctx.files.update(files)
    if fp32_source is not None:
        ctx.fp32_source = fp32_source
    return entry


def _end_with(pid: int) -> None:
    """In a child: end when the exporting process ``pid`` is gone. A pool's idle worker waits on a queue whose write
    end it holds itself: if the exporting process is killed, nothing else would end it."""
    import threading

    def watch():
        while True:
            time.sleep(1.0)
            try:
                os.kill(pid, 0)
            except (ProcessLookupError, PermissionError):  # gone (or its pid now another user's process)
                os._exit(1)

    threading.Thread(target=watch, name="depthport-end-with-parent", daemon=True).start()


_LOADED: dict[Path, object] = {}


def convert_one(job: Job) -> tuple[dict, dict[str, Path], Path | None]:
    """In a child: write ``job.target``'s file; returns (its report entry, the export's files, the FP32 source)."""
    import torch

    from ..build import Built
    from ..registry import get_spec
    from ..runtimes.torch import torch_threads
    from .targets import TARGETS

    if job.model_file not in _LOADED:
        _LOADED.clear()
        _LOADED[job.model_file] = torch.load(job.model_file, weights_only=False)
    built = Built(_LOADED[job.model_file], get_spec(job.spec_id), job.weights, job.input_hw, job.pos_formula,
                  list(job.rewrites))
    ctx = ExportContext(built, job.out_dir, job.stem, options=job.options, files=dict(job.files),
                        fp32_source=job.fp32_source, _scratch=job.scratch)
    with torch_threads(job.threads):
        entry = TARGETS[job.target](ctx)
    return entry, ctx.files, ctx.fp32_source
