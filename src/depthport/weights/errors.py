class WeightsError(ValueError):
    """Weights could not be found or read; the message says which file and how to get it."""


class CheckpointMismatch(WeightsError):
    """A checkpoint that does not fit the architecture: names the missing, unexpected and misshapen keys."""

    def __init__(self, source: str, missing=(), unexpected=(), misshapen=()):
        self.missing, self.unexpected, self.misshapen = list(missing), list(unexpected), list(misshapen)
        parts = []
        for label, keys in (("missing", self.missing), ("unexpected", self.unexpected), ("wrong shape", self.misshapen)):
            if keys:
                shown = ", ".join(keys[:6]) + (f" (+{len(keys) - 6} more)" if len(keys) > 6 else "")
                parts.append(f"{len(keys)} {label}: {shown}")
        super().__init__(f"checkpoint {source} does not match the architecture: " + "; ".join(parts))


class WeightsUnavailable(WeightsError):
    """Published weights that are neither in the Hugging Face cache nor downloadable from here."""
