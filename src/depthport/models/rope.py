"""2-D rotary position embedding and the QK-norm attention of Depth Anything 3, for one fixed token layout.

Upstream (`depth_anything_3/model/dinov2/layers/rope.py`) looks the cos/sin rows up at run time with
``F.embedding`` from positions whose maximum it reads back as a Python int. Here the positions are known when
the model is built, so each table row is computed once (with the upstream's float32 arithmetic, so the values
are bit-identical) and stored as a constant ``(N, head_dim)`` buffer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .layers import attend, attention_weights


def token_positions(grid_hw: tuple[int, int], same: bool) -> torch.Tensor:
    """(1 + gh*gw, 2) int64 (y, x) positions: the special token at (0, 0), patches from (1, 1).

    ``same`` gives every patch position (1, 1): the upstream's positions for "global" blocks.
    """
    gh, gw = grid_hw
    ys, xs = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    patches = torch.stack([ys.flatten(), xs.flatten()], dim=-1)
    patches = torch.zeros_like(patches) + 1 if same else patches + 1
    return torch.cat([torch.zeros(1, 2, dtype=patches.dtype), patches])


def _frequency_tables(dim: int, length: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The upstream's (length, dim) cos and sin tables for one axis, in its float32 arithmetic."""
    exponents = torch.arange(0, dim, 2).float() / dim
    inv_freq = 1.0 / (base**exponents)
    angles = torch.einsum("i,j->ij", torch.arange(length, dtype=inv_freq.dtype), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def rotation_matrix(head_dim: int) -> torch.Tensor:
    """(d, d) signed permutation R with t @ R == the upstream's per-axis rotate-half (-t2, t1)."""
    rot = torch.zeros(head_dim, head_dim)
    axis, half = head_dim // 2, head_dim // 4
    for offset in (0, axis):
        for j in range(half):
            rot[offset + half + j, offset + j] = -1.0
            rot[offset + j, offset + half + j] = 1.0
    return rot


class RopeTables(nn.Module):
    """Constant cos/sin rows for a fixed set of token positions; shared by every block that uses them."""

    def __init__(self, positions: torch.Tensor, head_dim: int, base: float = 100.0):
        super().__init__()
        if head_dim % 4:
            raise ValueError(f"2-D RoPE needs a head size divisible by 4, got {head_dim}")
        cos, sin = _frequency_tables(head_dim // 2, int(positions.max()) + 1, base)
        y, x = positions[:, 0], positions[:, 1]
        self.register_buffer("cos", torch.cat([cos[y], cos[x]], dim=-1), persistent=False)
        self.register_buffer("sin", torch.cat([sin[y], sin[x]], dim=-1), persistent=False)
        self.register_buffer("rot", rotation_matrix(head_dim), persistent=False)

    @staticmethod
    def rotate_half(t: torch.Tensor) -> torch.Tensor:
        """The upstream's rotation, by slices: (t1, t2) -> (-t2, t1) on each axis's half of the head."""
        out = []
        for part in t.chunk(2, dim=-1):
            a, b = part.chunk(2, dim=-1)
            out += [-b, a]
        return torch.cat(out, dim=-1)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        """(heads, N, d) -> rotated, in the upstream's form."""
        return t * self.cos + self.rotate_half(t) * self.sin

    def by_matmul(self, t: torch.Tensor) -> torch.Tensor:
        """The same rotation with the rotate-half as one constant matmul (exact: one +-1 term per output)."""
        turned = F.linear(t, self.rot_t) if hasattr(self, "rot_t") else t @ self.rot
        return t * self.cos + turned * self.sin

    def rotate_by_linear(self) -> None:
        """``by_matmul``'s rotate-half as a linear map of the last axis, t @ R = linear(t, Rᵀ): ExecuTorch lowers
        the (heads, N, d) @ (d, d) matmul with an expand_copy of R, which XNNPACK does not run (exact)."""
        self.register_buffer("rot_t", self.rot.t().contiguous(), persistent=False)


class RopeAttention(nn.Module):
    """Self-attention on one sample's tokens (N, C) with optional per-head QK LayerNorm and 2-D RoPE.

    The reference form: separate Q/K/V projections (the checkpoint's fused ``qkv`` split in three), heads by
    reshape, ``scale`` on the logits. ``rewrites.head_major_qkv`` turns it into `SplitHeadRopeAttention`.
    """

    def __init__(self, dim: int, heads: int, qk_norm: bool, rope: RopeTables | None, qk_eps: float = 1e-5):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim**-0.5
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.q_norm = nn.LayerNorm(self.head_dim, eps=qk_eps) if qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim, eps=qk_eps) if qk_norm else nn.Identity()
        self.proj = nn.Linear(dim, dim)
        self.rope = rope

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(t.shape[0], self.heads, self.head_dim).transpose(0, 1)

    def _weights(self, logits: torch.Tensor) -> torch.Tensor:
        return (logits * self.scale if self.scale != 1.0 else logits).softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        out = attend(q, k.transpose(1, 2), v, self._weights)
        return self.proj(out.transpose(0, 1).reshape(x.shape[0], -1))


def _split_heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    return t.reshape(t.shape[0], heads, -1).transpose(0, 1)


class _QueryKeyPath(nn.Module):
    """One of Q or K: x (N, C) -> (heads, N, d), normalised, scaled and rotated.

    The LayerNorm's mean-centering is folded into the projection (each head's output rows minus their mean),
    so the norm keeps only x * rsqrt(mean(x^2) + eps), mean and eps one constant linear map; its gain and bias, and the attention scale, are one per-channel affine map (without a norm the scale goes
    into the projection); the rotation uses the shared constant tables.
    """

    def __init__(self, linear: nn.Linear, heads: int, norm: nn.Module, rope: RopeTables | None, scale: float,
                 keep_bias: bool = True):
        super().__init__()
        d = linear.out_features // heads
        w = linear.weight.detach().reshape(heads, d, -1)
        b = linear.bias.detach().reshape(heads, d)
        self.heads = heads
        self.normed = isinstance(norm, nn.LayerNorm)
        if self.normed:
            w, b = w - w.mean(dim=1, keepdim=True), b - b.mean(dim=1, keepdim=True)
            self.register_buffer("avg", torch.full((1, d), 1.0 / d), persistent=False)
            self.register_buffer("eps", torch.tensor([norm.eps]), persistent=False)
            self.gain = nn.Parameter(norm.weight.detach() * scale)
            self.shift = nn.Parameter(norm.bias.detach() * scale)
        else:
            w, b = w * scale, b * scale
        keep_bias = keep_bias or self.normed or rope is not None
        self.proj = nn.Linear(linear.in_features, linear.out_features, bias=keep_bias)
        with torch.no_grad():
            self.proj.weight.copy_(w.reshape(-1, linear.in_features))
            if keep_bias:
                self.proj.bias.copy_(b.reshape(-1))
        self.rope = rope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = _split_heads(self.proj(x), self.heads)
        if self.normed:
            t = t * torch.rsqrt(F.linear(t * t, self.avg, self.eps)) * self.gain + self.shift
        return self.rope.by_matmul(t) if self.rope is not None else t


class SplitHeadRopeAttention(nn.Module):
    """`RopeAttention` for export, built by `rewrites.head_major_qkv`; exact.

    Q and K are `_QueryKeyPath`s; K's bias is dropped when there is neither norm nor RoPE (a per-query
    constant that softmax ignores); V's bias moves into the output projection (softmax rows sum to one).
    Heads are split from rank-2 projections by reshape + transpose: a batched matmul of the tokens with
    constant per-head weights (heads, C, d) is delegated by the LiteRT WebGPU accelerator but computed with a
    wrong output shape (rel L2 ~1 on SwiftShader).
    """

    def __init__(self, attn: RopeAttention):
        super().__init__()
        h = attn.heads
        self.heads = h
        self.q = _QueryKeyPath(attn.q, h, attn.q_norm, attn.rope, attn.scale)
        self.k = _QueryKeyPath(attn.k, h, attn.k_norm, attn.rope, 1.0, keep_bias=False)
        self.v = nn.Linear(attn.v.in_features, attn.v.out_features, bias=False)
        self.proj = nn.Linear(attn.proj.in_features, attn.proj.out_features)
        with torch.no_grad():
            self.v.weight.copy_(attn.v.weight)
            self.proj.weight.copy_(attn.proj.weight)
            self.proj.bias.copy_(attn.proj.bias + attn.proj.weight @ attn.v.bias)

    guarded = False  # set by fp16.safe.fp16_safe_attention, with a ``guard`` buffer (see layers.attention_weights)
    logit_mode = "shift"
    split_k: int | None = None  # set by export.split_k (see layers.matmul_split)
    scaled_weights = False  # as layers.Attention's

    def _weights(self, logits: torch.Tensor) -> torch.Tensor:
        return attention_weights(logits, self.guard if self.guarded else None, self.logit_mode,
                                 self.prob_scale if self.scaled_weights else None, self.split_k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = attend(self.q(x), self.k(x).transpose(1, 2), _split_heads(self.v(x), self.heads), self._weights,
                     self.split_k)
        return self.proj(out.transpose(0, 1).reshape(x.shape[0], -1))
