"""The test session's conversion memo keys a conversion by everything that can change its output."""

from __future__ import annotations

import torch

from conversion_memo import fingerprint


class Scaled(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn, self.linear = fn, torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.fn(self.linear(x))


def test_fingerprint_changes_with_weights_code_defaults_and_closures():
    torch.manual_seed(0)
    module = Scaled(lambda x, *, k=1.0: x * k)
    key = fingerprint(module, "litert", (1, 2))
    assert key == fingerprint(module, "litert", (1, 2)) and key.startswith("litert-")
    assert key != fingerprint(module, "litert", (1, 3))  # another shape
    with torch.no_grad():
        module.linear.weight[0, 0] += 1
    assert fingerprint(module, "litert", (1, 2)) != key  # another weight
    before = fingerprint(module, "litert", (1, 2))
    module.fn.__kwdefaults__ = {"k": 2.0}  # a keyword-only default
    assert fingerprint(module, "litert", (1, 2)) != before
    scale = 3.0
    with_closure = fingerprint(Scaled(lambda x: x * scale), "litert", (1, 2))
    scale = 4.0  # noqa: F841 (read by the lambda below through its closure cell)
    assert fingerprint(Scaled(lambda x: x * scale), "litert", (1, 2)) != with_closure


def test_a_module_without_a_reproducible_form_is_not_memoised():
    module = Scaled(lambda x: x)
    module.handle = object()  # printed with its address: different in every process
    assert fingerprint(module, "litert", (1, 2)) is None
