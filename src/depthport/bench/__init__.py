"""Latency and memory of exported files, each runtime through its own Python API, interleaved."""

from .timing import Entry, peak_memory, sample_input, time_interleaved

__all__ = ["Entry", "peak_memory", "sample_input", "time_interleaved"]
