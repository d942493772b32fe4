"""runtimes: one runner per runtime, same interface: ``runner.run(x: (1,3,H,W) float32) -> depth``. Layer 2: may
import core and errors only; every stage imports runtimes, never the reverse."""

from .base import Runner, load_runner

__all__ = ["Runner", "load_runner"]
