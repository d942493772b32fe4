"""Checkpoint formats: convert an upstream state dict to depthport names and back, accounting for every key."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import keymaps
from .errors import CheckpointMismatch

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class KeyMapFormat:
    name: str
    rules: list
    fused: list = field(default_factory=list)
    ignored: list = field(default_factory=list)
    aliases: list = field(default_factory=list)
    prefix: str = ""
    suffix: str = ".safetensors"  # the file type its checkpoints are published as

    def _normalise(self, key: str) -> str:
        if self.prefix and key.startswith(self.prefix):
            key = key[len(self.prefix):]
        for pattern, repl in self.aliases:
            key = re.sub(pattern, repl, key)
        return key

    def to_depthport(self, upstream: dict[str, torch.Tensor], expected: dict[str, torch.Size],
                     source: str) -> dict[str, torch.Tensor]:
        """Map ``upstream`` onto the keys and shapes in ``expected``; any key left over or missing is an error."""
        pool = {self._normalise(k): v for k, v in upstream.items()}
        used, out, missing, misshapen = set(), {}, [], []
        for key, shape in expected.items():
            name = keymaps.upstream_name(key, self.rules)
            if name is not None:
                tensor = pool.get(name)
            else:
                name, tensor = self._fused_part(key, pool)
            if tensor is None:
                missing.append(name or key)
                continue
            used.add(name)
            if tuple(tensor.shape) != tuple(shape):
                misshapen.append(f"{name} {tuple(tensor.shape)} != {tuple(shape)}")
                continue
            out[key] = tensor.detach().float()
        unexpected = [k for k in pool if k not in used and not any(re.fullmatch(p, k) for p in self.ignored)]
        if missing or unexpected or misshapen:
            raise CheckpointMismatch(source, missing, unexpected, misshapen)
        return out

    def _fused_part(self, key: str, pool: dict) -> tuple[str | None, torch.Tensor | None]:
        for pattern, template in self.fused:
            m = re.fullmatch(pattern, key)
            if m:
                name = m.expand(template)
                fused = pool.get(name)
                if fused is None:
                    return name, None
                part = keymaps.QKV_PART[m.group(2)]
                return name, fused.chunk(3, dim=0)[part]
        return None, None

    def from_depthport(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The upstream state dict for depthport weights (for writing test checkpoints and references)."""
        import torch

        out, parts = {}, {}
        for key, tensor in state.items():
            name = keymaps.upstream_name(key, self.rules)
            if name is not None:
                out[self.prefix + name] = tensor
                continue
            for pattern, template in self.fused:
                m = re.fullmatch(pattern, key)
                if m:
                    parts.setdefault(self.prefix + m.expand(template), {})[keymaps.QKV_PART[m.group(2)]] = tensor
                    break
            else:
                raise KeyError(f"no {self.name} name for {key}")
        for name, by_part in parts.items():
            out[name] = torch.cat([by_part[i] for i in range(3)], dim=0)
        return out


TRANSFORMERS = KeyMapFormat("transformers", keymaps.TRANSFORMERS_DA2, ignored=keymaps.TRANSFORMERS_IGNORED,
                            aliases=keymaps.TRANSFORMERS_ALIASES)
OFFICIAL = KeyMapFormat("official", keymaps.OFFICIAL_DA2, fused=keymaps.OFFICIAL_DA2_FUSED,
                        ignored=keymaps.OFFICIAL_IGNORED, suffix=".pth")
TRANSFORMERS_PROMPT = KeyMapFormat("transformers", keymaps.TRANSFORMERS_PROMPT_DA, ignored=keymaps.TRANSFORMERS_IGNORED,
                                   aliases=keymaps.TRANSFORMERS_ALIASES)
