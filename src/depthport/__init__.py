"""depthport: monocular depth models to on-device files, with the proof part of the output."""

__version__ = "0.1.0"
