"""bench: latency of exported files, interleaved, with MACs counted from the graph and the GEMM peak probed
in the same run. May import runtimes, check (graph reading) and export; not verify, report, pipeline or cli."""

from .timing import Entry, peak_memory, sample_input, time_interleaved

__all__ = ["Entry", "peak_memory", "sample_input", "time_interleaved"]
