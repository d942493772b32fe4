"""Conversion memo for the test session: the same module (same classes, attributes and weights) converted at
the same shape by the same converter is converted once per `pytest` run, and every later call writes the bytes
the real converter produced then. The converters still run for real (the first time, and whenever a module
differs in any way the fingerprint sees); what is saved is repeating a deterministic conversion that takes
15-60 s per call on two cores, dozens of times, for tests about verdicts, folders, cards and errors.

Shared across pytest-xdist workers through a folder beside their temp folders, with one lock per entry. A
module whose fingerprint cannot be made reproducible (an attribute printed with its address) is not memoised.
Exceptions are never memoised: a conversion that fails, fails every time.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import time
import types
from pathlib import Path

import torch
from filelock import FileLock

_CONTAINERS = ("_parameters", "_buffers", "_modules")


def _hash_code(h, code: types.CodeType) -> bool:
    h.update(code.co_code + repr(code.co_names).encode())
    return all(_hash_code(h, c) if isinstance(c, types.CodeType) else _hash_value(h, c) for c in code.co_consts)


def _hash_value(h, value) -> bool:
    """Feed ``value`` into ``h``; False when it has no reproducible form. A function (a toy graph's lambda) by its
    code, constants, defaults (keyword-only ones too) and closure."""
    if isinstance(value, types.FunctionType):
        cells = [c.cell_contents for c in value.__closure__ or ()]
        kwdefaults = sorted((value.__kwdefaults__ or {}).items())
        return _hash_code(h, value.__code__) and all(_hash_value(h, v) for v in (value.__defaults__, *kwdefaults,
                                                                                  *cells))
    if isinstance(value, torch.Tensor):
        t = value.detach().contiguous().cpu()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        return True
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return all(_hash_value(h, v) for v in value)
    if isinstance(value, (set, frozenset)):  # printed in hash-seed order: sort for a key stable across processes
        value = sorted(value, key=repr)
    text = repr(value)
    if " at 0x" in text or " object at " in text:
        return False
    h.update(text.encode())
    return True


def fingerprint(module: torch.nn.Module, *extra) -> str | None:
    """A key that changes with any module class, attribute, parameter or buffer, or with ``extra``."""
    h = hashlib.sha256(repr(extra).encode())
    for name, m in module.named_modules(remove_duplicate=False):
        h.update(f"|{name}:{type(m).__module__}.{type(m).__qualname__}".encode())
        for key, value in sorted(vars(m).items()):
            h.update(key.encode())
            if key in _CONTAINERS:
                for sub, item in value.items():
                    h.update(sub.encode())
                    if key != "_modules" and not _hash_value(h, item):
                        return None
            elif not _hash_value(h, value):
                return None
    return f"{extra[0] if extra else 'module'}-{h.hexdigest()[:24]}"


class Memo:
    """``memo.get(key, make)``: ``make()`` -> bytes-like payload, computed once per key across workers."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.hits = self.misses = 0

    def get(self, key: str, make):
        path = self.folder / f"{key}.pkl"
        asked = time.perf_counter()
        with FileLock(str(path) + ".lock"):
            if path.exists():
                self.hits += 1
                self._log(key, "hit", time.perf_counter() - asked)
                return pickle.loads(path.read_bytes())
            start = time.perf_counter()
            value = make()
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(pickle.dumps(value))
            os.replace(tmp, path)
            self.misses += 1
            self._log(key, "miss", time.perf_counter() - start)
            return value

    def unkeyed(self, what: str, real, *args):
        """A conversion the memo cannot key (its module has no reproducible fingerprint): run, timed in the log."""
        start = time.perf_counter()
        value = real(*args)
        self._log(f"{what}-unkeyed", "unkeyed", time.perf_counter() - start)
        return value

    def _log(self, key: str, what: str, seconds: float) -> None:
        """One line per call in log.txt: which test converted what, and for how long (for a hit: how long it waited
        for another worker converting the same thing)."""
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        with open(self.folder / "log.txt", "a") as f:
            f.write(f"{what}\t{seconds:.1f}\t{key}\t{test}\n")


class _Bytes:
    """Stands where a converter's result is only written out: LiteRT's edge model (``model_content()``) and
    ExecuTorch's program manager (``write_to_file(f)``)."""

    def __init__(self, data: bytes):
        self.data = data

    def model_content(self) -> bytes:
        return self.data

    def write_to_file(self, f) -> None:
        f.write(self.data)


def install(monkeypatch, memo: Memo) -> None:
    """Route depthport's LiteRT conversion, XNNPACK and Core ML lowering, Core ML conversion and static ONNX
    export through ``memo``."""
    from depthport.export import executorch, litert, onnx

    real_convert, real_lower, real_onnx = litert.convert, executorch.lower_xnnpack, onnx.export_onnx
    real_coreml, real_mlpackage = executorch.lower_coreml, executorch.convert_mlpackage

    def convert(model, input_hw):
        key = fingerprint(model, "litert", tuple(input_hw))
        if key is None:
            return memo.unkeyed("litert", real_convert, model, input_hw)

        return _Bytes(memo.get(key, lambda: real_convert(model, input_hw).model_content()))

    def lowering(real, name):
        def lower(module, *samples):
            key = fingerprint(module, name, *(tuple(s.shape) for s in samples))
            if key is None:
                return memo.unkeyed(name, real, module, *samples)

            def make():
                manager, report = real(module, *samples)
                return bytes(manager.buffer), report

            data, report = memo.get(key, make)
            return _Bytes(data), report

        return lower

    def convert_mlpackage(module, *samples):
        """The ML Program saved once, then loaded from the memo folder (structure only: Linux cannot run it)."""
        import coremltools as ct

        key = fingerprint(module, "mlpackage", *(tuple(s.shape) for s in samples))
        if key is None:
            return memo.unkeyed("mlpackage", real_mlpackage, module, *samples)
        package = memo.folder / f"{key}.mlpackage"

        def make():
            real_mlpackage(module, *samples).save(str(package))
            return str(package)

        return ct.models.MLModel(memo.get(key, make), skip_model_load=True)

    def export_onnx(model, input_hw, path, opset=onnx.OPSET):
        key = fingerprint(model, "onnx", tuple(input_hw), opset)
        if key is None:
            return memo.unkeyed("onnx", real_onnx, model, input_hw, path, opset)

        def make():
            with tempfile.TemporaryDirectory() as tmp:
                return real_onnx(model, input_hw, Path(tmp) / "m.onnx", opset).read_bytes()

        data = memo.get(key, make)
        path = Path(path)
        from depthport.atomic import atomic_path

        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
        return path

    monkeypatch.setattr(litert, "convert", convert)
    monkeypatch.setattr(executorch, "lower_xnnpack", lowering(real_lower, "xnnpack"))
    monkeypatch.setattr(executorch, "lower_coreml", lowering(real_coreml, "coreml"))
    monkeypatch.setattr(executorch, "convert_mlpackage", convert_mlpackage)
    monkeypatch.setattr(onnx, "export_onnx", export_onnx)


ENV = "DEPTHPORT_TEST_MEMO"  # the memo folder, for child processes that a test starts


def convert_toy(module: torch.nn.Module, sample: torch.Tensor, path: Path) -> Path:
    """``litert_torch.convert(module, (sample,))`` written to ``path``, through the session's memo when a test session
    runs (the static, runtime and WebGPU check tests convert the same toy graphs)."""
    import litert_torch

    def make():
        return litert_torch.convert(module.eval(), (sample,)).model_content()

    folder = os.environ.get(ENV)
    key = fingerprint(module, "litert-toy", tuple(sample.shape), sample.flatten()[:8].tolist()) if folder else None
    data = make() if key is None else Memo(Path(folder)).get(key, make)
    Path(path).write_bytes(data)
    return Path(path)


def install_from_env() -> None:
    """In a child process started by a test: use the session's memo (when the test passed its folder on)."""
    import pytest

    folder = os.environ.get(ENV)
    if folder:
        install(pytest.MonkeyPatch(), Memo(Path(folder)))
