"""Seeded, variance-preserving random weights, so that dry-run exports give a non-degenerate depth map."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..models.layers import LayerScale


@torch.no_grad()
def init_random(model: nn.Module, seed: int = 0) -> nn.Module:
    """Each conv/linear weight ~ N(0, gain/fan_in) (He for the ReLU convs), biases small, LayerScale 0.5.

    The last conv is then calibrated on a seeded input so that its pre-ReLU output has mean 3 and std 1:
    the depth map is positive almost everywhere and its spread is far from zero.
    """
    gen = torch.Generator().manual_seed(seed)
    convs = []
    for name, module in model.named_modules():
        if isinstance(module, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
            fan_in = module.weight[0].numel() if not isinstance(module, nn.ConvTranspose2d) else module.weight.shape[0]
            gain = 2.0 if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)) else 1.0
            module.weight.copy_(torch.randn(module.weight.shape, generator=gen) * math.sqrt(gain / fan_in))
            if module.bias is not None:
                module.bias.copy_(torch.randn(module.bias.shape, generator=gen) * 0.02)
            if isinstance(module, nn.Conv2d):
                convs.append(module)
        elif isinstance(module, nn.LayerNorm) and module.weight is not None:
            module.weight.copy_(1.0 + 0.1 * torch.randn(module.weight.shape, generator=gen))
            module.bias.copy_(0.1 * torch.randn(module.bias.shape, generator=gen))
        elif isinstance(module, LayerScale):
            module.gamma.copy_(0.5 + 0.1 * torch.randn(module.gamma.shape, generator=gen))
    for name, param in model.named_parameters():
        if name.endswith(("cls_token", "pos_embed")):
            param.copy_(torch.randn(param.shape, generator=gen) * 0.5)
    if convs:
        _calibrate_last(model, convs[-1], gen)
    return model


def _calibrate_last(model: nn.Module, last: nn.Conv2d, gen: torch.Generator) -> None:
    captured = {}
    hook = last.register_forward_hook(lambda mod, args, out: captured.update(out=out - mod.bias.view(1, -1, 1, 1)))
    try:
        hw = getattr(model, "input_hw", None)
        if hw is None:
            return
        inputs = [torch.randn((1, 3, *hw), generator=gen)]
        if getattr(model, "prompt_hw", None):  # a prompt depth of 1 to 5 m
            inputs.append(1.0 + 4.0 * torch.rand((1, 1, *model.prompt_hw), generator=gen))
        model.eval()(*inputs)
    finally:
        hook.remove()
    pre = captured["out"]
    scale = 1.0 / float(pre.std().clamp_min(1e-12))
    last.weight.mul_(scale)
    last.bias.copy_(3.0 - pre.mean(dim=(0, 2, 3)) * scale)


@torch.no_grad()
def recentre_logits(last: nn.Conv2d, mean: float, std: float) -> None:
    """Move the calibrated logits of ``last`` (mean 3, std 1 after `init_random`) to ``mean`` and ``std`` by an
    affine change of its weight and bias, without another forward pass (for heads that end in sigmoid or exp)."""
    last.weight.mul_(std)
    last.bias.copy_((last.bias - 3.0) * std + mean)
