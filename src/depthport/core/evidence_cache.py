"""The evidence an export computes from the PyTorch models, kept on disk: the upstream reference's outputs (FP32
and float64, arrays) and the FP16-compute predictions (JSON), so that a re-export and `depthport verify` of the
same model, weights, shape and images reuse them instead of running the models again.

- Where: ``$DEPTHPORT_CACHE`` if set, else ``$XDG_CACHE_HOME/depthport/references`` (``~/.cache/...``).
- Key: the model id, the digest of the weights (every tensor's name, dtype, shape and bytes), the digest of the
  exact inputs (the images as resized and normalised, so also their shape), what was computed (the reference's
  dtype, the prediction's mode and model form), and the versions of depthport and torch. Any change is a miss,
  never a stale hit.
- Each entry is ``KEY.npy`` (an array) or ``KEY.value`` (JSON) with ``KEY.json`` holding the SHA-256 of its bytes:
  an entry whose bytes do not match, or that cannot be read, is deleted and recomputed, never trusted.
- Bound: ``$DEPTHPORT_CACHE_MB`` (default 2048) megabytes; the least recently used entries go first.
- ``--no-cache`` (export and verify) turns it off.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np

from ..atomic import atomic_path
from ..cache import cache_folder

DEFAULT_MB = 2048


def default_folder() -> Path:
    return cache_folder("references", "DEPTHPORT_CACHE")


def weights_digest(state: dict) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order."""
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


DATA_SUFFIXES = (".npy", ".value")


class EvidenceCache:
    """Arrays (``get``/``put``) and JSON values (``get_value``/``put_value``) under content keys (``key``), each
    checked against its SHA-256 when read; ``hits``, ``misses`` and ``rejected`` count this object's reads."""

    def __init__(self, folder: Path | None = None, max_bytes: int | None = None):
        self.folder = Path(folder) if folder is not None else default_folder()
        mb = int(os.environ.get("DEPTHPORT_CACHE_MB", DEFAULT_MB))
        self.max_bytes = max_bytes if max_bytes is not None else mb * 1024 * 1024
        self.hits = self.misses = self.rejected = 0

    @staticmethod
    def key(*parts: str, arrays=()) -> str:
        """The entry's name, from ``parts`` (what was computed, from which model and weights) and the bytes, shape
        and dtype of every input array."""
        import torch

        from .. import __version__

        described = [str(p) for p in parts]
        for x in arrays:
            x = np.ascontiguousarray(x)
            described += [hashlib.sha256(x.tobytes()).hexdigest(), str(x.shape), str(x.dtype)]
        return hashlib.sha256("\n".join([*described, __version__, torch.__version__]).encode()).hexdigest()

    def get(self, key: str) -> np.ndarray | None:
        return self._read(key, ".npy", lambda raw: np.load(io.BytesIO(raw), allow_pickle=False))

    def put(self, key: str, array: np.ndarray) -> None:
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
        self._write(key, ".npy", buffer.getvalue(), list(array.shape))

    def get_value(self, key: str):
        return self._read(key, ".value", json.loads)

    def put_value(self, key: str, value) -> None:
        """Keep a JSON value (what ``json.dumps`` writes: tuples come back as lists)."""
        self._write(key, ".value", json.dumps(value, sort_keys=True).encode(), None)

    def _read(self, key: str, suffix: str, parse):
        data, meta = self.folder / f"{key}{suffix}", self.folder / f"{key}.json"
        if not data.exists():
            self.misses += 1
            return None
        try:
            raw = data.read_bytes()
            if hashlib.sha256(raw).hexdigest() != json.loads(meta.read_text())["sha256"]:
                raise ValueError("checksum mismatch")
            value = parse(raw)
        except (OSError, ValueError, KeyError, json.JSONDecodeError):
            self.rejected += 1
            for f in (data, meta):
                f.unlink(missing_ok=True)
            return None
        os.utime(data)  # recently used: evicted last
        self.hits += 1
        return value

    def _write(self, key: str, suffix: str, raw: bytes, shape: list | None) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with atomic_path(self.folder / f"{key}{suffix}") as tmp:
                Path(tmp).write_bytes(raw)
                with atomic_path(self.folder / f"{key}.json") as meta:
                    Path(meta).write_text(json.dumps({"sha256": hashlib.sha256(raw).hexdigest(), "shape": shape}))
            self._bound()
        except OSError:
            pass  # a cache that cannot be written is no cache; the figures are computed all the same

    def _bound(self) -> None:
        entries = sorted((p for s in DATA_SUFFIXES for p in self.folder.glob(f"*{s}")), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in entries)
        for p in entries:
            if total <= self.max_bytes:
                break
            total -= p.stat().st_size
            p.unlink(missing_ok=True)
            p.with_suffix(".json").unlink(missing_ok=True)

    def summary(self) -> dict:
        return {"folder": str(self.folder), "hits": self.hits, "misses": self.misses, "rejected": self.rejected}
