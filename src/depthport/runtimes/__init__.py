"""runtimes: one runner per runtime, same interface: ``runner.run(x: (1,3,H,W) float32) -> depth``.
May import check.tflite_graph (file validation) and errors; no stage imports flow back into runtimes."""

from .base import Runner, load_runner

__all__ = ["Runner", "load_runner"]
