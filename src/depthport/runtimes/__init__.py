"""One runner per runtime, same interface: ``runner.run(x: (1,3,H,W) float32) -> depth (1,H,W) float32``.

Exported files (LiteRT, ExecuTorch, ONNX) get theirs from ``load_runner``; a PyTorch module gets
``runtimes.torch.TorchRunner``.
"""

from .base import Runner, load_runner

__all__ = ["Runner", "load_runner"]
