"""bench: latency of exported files, interleaved, with MACs counted from the graph and the GEMM peak probed in the
same run. Layer 5, above verify: may import core, runtimes, check (graph reading) and export; not report,
predict, pipeline or cli."""

from .timing import Entry, paired_ratio, peak_memory, sample_input, time_interleaved

__all__ = ["Entry", "paired_ratio", "peak_memory", "sample_input", "time_interleaved"]
