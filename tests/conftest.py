"""Shared fixtures: no network, the conversion memo (`conversion_memo`), the tiny Depth Anything V2 config, its
random weights, a tiny LiteRT export."""

from __future__ import annotations

import gc
import os
import signal
import threading
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers on two cores: torch in each computes on one thread (also in the children it starts), so that their
    # OpenMP pools do not spin against each other (make test on an AMD Zen 5, 2 cores: 290 s -> 261 s). Set before
    # torch is imported; tests that time threads set them explicitly.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from helpers import TINY_HW  # noqa: E402

# The cycle collector's full pass scans every live object (about 800,000 in a worker, most of them torch's and the
# converters' modules) and ran about 40 times per worker, 21-23 s of each worker's 265 s (AMD Zen 5): passes 14x
# further apart (a young collection every 10,000 allocations, a full one every 100th middle one), the same tests.
# The product keeps Python's default: there the memory held by cycles matters more (a da2-small XNNPACK lowering at
# 518x686 held 11 % more at its peak with these settings).
gc.set_threshold(10_000, 10, 100)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


# The files with the longest run first, longest first (seconds summed over their tests, `--durations=0`, on an
# Intel Sapphire Rapids, 2 workers): `make test` hands files to the two workers in collection order
# (`--no-loadscope-reorder`), so the last file a worker takes is a short one and neither waits long for the other.
LONGEST_FIRST = (
    "models/test_prompt_da.py",  # 147 s
    "e2e/test_cli.py",  # 110
    "export/test_executorch.py",  # 81
    "registry/test_registry.py",  # 75
    "export/test_fp32_head.py",  # 73
    "e2e/test_bad_input.py",  # 64
    "bench/test_bench.py",  # 50
    "verify/test_verify.py",  # 48
    "web/test_web.py",  # 28
    "check/test_check_static.py",  # 27
    "bench/test_roofline.py",  # 25
)


def pytest_collection_modifyitems(items):
    """The files in ``LONGEST_FIRST`` ahead of the rest, in its order; the rest and every file's tests as collected."""
    tests = Path(__file__).resolve().parent
    gone = [name for name in LONGEST_FIRST if not (tests / name).is_file()]
    if gone:
        raise pytest.UsageError(f"conftest.LONGEST_FIRST names files that are not there: {', '.join(gone)}")
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.resolve().relative_to(tests).as_posix(), len(rank)))


@pytest.fixture(autouse=True)
def sigint_is_keyboard_interrupt():
    """Every test starts with Python's own Ctrl-C handler, whatever an earlier test, a library or the xdist worker
    left (a SIGINT ignored there is ignored by every child too, and the Ctrl-C tests then fail)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session", autouse=True)
def conversion_memo(tmp_path_factory):
    """One real conversion per distinct module and shape for the whole run, shared by the xdist workers."""
    from conversion_memo import ENV, Memo, install

    base = tmp_path_factory.getbasetemp()
    memo = Memo((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "conversion-memo")
    with pytest.MonkeyPatch.context() as patch:
        install(patch, memo)
        patch.setenv(ENV, str(memo.folder))
        yield memo


@pytest.fixture(scope="session", autouse=True)
def reference_cache(tmp_path_factory):
    """The upstream outputs' on-disk cache (verify.reference_cache) in this run's own folder: tests never read
    entries an earlier run left, nor write into the user's cache."""
    folder = tmp_path_factory.getbasetemp() / "reference-cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPTHPORT_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="session")
def tiny_spec():
    from depthport.registry import get_spec

    return get_spec("da2-tiny")


@pytest.fixture(scope="session")
def tiny_weights(tiny_spec):
    from depthport.build import resolve_weights

    return resolve_weights(tiny_spec, "random")


@pytest.fixture(scope="session")
def tiny_reference(tiny_spec, tiny_weights):
    from depthport.reference import reference_model

    return reference_model(tiny_spec, tiny_weights)


@pytest.fixture(scope="session")
def tiny_built(tiny_spec, tiny_weights):
    from depthport.build import build

    return build(tiny_spec, TINY_HW, tiny_weights)


@pytest.fixture(scope="session")
def tiny_tflite(tiny_built, tmp_path_factory):
    from depthport.export.litert import export_tflite

    return export_tflite(tiny_built.model, TINY_HW, tmp_path_factory.mktemp("tflite") / "tiny_fp32.tflite")
