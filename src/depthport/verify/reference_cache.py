"""The upstream reference's outputs kept on disk, so that a re-export and `depthport verify` of the same model,
weights, shape and images reuse them instead of running the upstream model (in FP32 and in float64) again.

- Where: ``$DEPTHPORT_CACHE`` if set, else ``$XDG_CACHE_HOME/depthport/references`` (``~/.cache/...``).
- Key: the model id, the digest of the weights (every tensor's name, dtype, shape and bytes), the digest of the
  exact input array (the image as resized and normalised, so also its shape), the reference's dtype, and the
  versions of depthport and torch. Any change is a miss, never a stale hit.
- Each entry is ``KEY.npy`` with ``KEY.json`` holding the SHA-256 of the ``.npy``'s bytes: an entry whose bytes
  do not match, or that cannot be read, is deleted and recomputed, never trusted.
- Bound: ``$DEPTHPORT_CACHE_MB`` (default 2048) megabytes; the least recently used entries go first.
- ``--no-cache`` (export and verify) turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ..atomic import atomic_path

DEFAULT_MB = 2048


def default_folder() -> Path:
    if os.environ.get("DEPTHPORT_CACHE"):
        return Path(os.environ["DEPTHPORT_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "depthport" / "references"


def weights_digest(state: dict) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order."""
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


class ReferenceCache:
    def __init__(self, folder: Path | None = None, max_bytes: int | None = None):
        self.folder = Path(folder) if folder is not None else default_folder()
        mb = int(os.environ.get("DEPTHPORT_CACHE_MB", DEFAULT_MB))
        self.max_bytes = max_bytes if max_bytes is not None else mb * 1024 * 1024
        self.hits = self.misses = self.rejected = 0

    @staticmethod
    def key(model_id: str, weights: str, reference: str, x: np.ndarray, which: str) -> str:
        """The entry's name: ``reference`` names the upstream implementation (e.g. the official resampling)."""
        import torch

        from .. import __version__

        h = hashlib.sha256(np.ascontiguousarray(x).tobytes())
        parts = [model_id, weights, reference, h.hexdigest(), str(x.shape), str(x.dtype), which, __version__,
                 torch.__version__]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def get(self, key: str) -> np.ndarray | None:
        data, meta = self.folder / f"{key}.npy", self.folder / f"{key}.json"
        if not data.exists():
            self.misses += 1
            return None
        try:
            raw = data.read_bytes()
            if hashlib.sha256(raw).hexdigest() != json.loads(meta.read_text())["sha256"]:
                raise ValueError("checksum mismatch")
            array = np.load(data, allow_pickle=False)
        except (OSError, ValueError, KeyError, json.JSONDecodeError):
            self.rejected += 1
            for f in (data, meta):
                f.unlink(missing_ok=True)
            return None
        os.utime(data)  # recently used: evicted last
        self.hits += 1
        return array

    def put(self, key: str, array: np.ndarray) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with atomic_path(self.folder / f"{key}.npy") as tmp:
                with open(tmp, "wb") as fh:
                    np.save(fh, np.ascontiguousarray(array), allow_pickle=False)
                digest = hashlib.sha256(Path(tmp).read_bytes()).hexdigest()
                with atomic_path(self.folder / f"{key}.json") as meta:
                    Path(meta).write_text(json.dumps({"sha256": digest, "shape": list(array.shape)}))
            self._bound()
        except OSError:
            pass  # a cache that cannot be written is no cache; the figures are computed all the same

    def _bound(self) -> None:
        entries = sorted(self.folder.glob("*.npy"), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in entries)
        for p in entries:
            if total <= self.max_bytes:
                break
            total -= p.stat().st_size
            p.unlink(missing_ok=True)
            p.with_suffix(".json").unlink(missing_ok=True)

    def summary(self) -> dict:
        return {"folder": str(self.folder), "hits": self.hits, "misses": self.misses, "rejected": self.rejected}
