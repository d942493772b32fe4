"""`python -m depthport ...`, the same as the `depthport` console script (and `python -m depthport.cli`)."""

from .cli import entry

entry()
