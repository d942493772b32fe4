"""`python -m depthport.cli ...`, the same as the `depthport` console script."""

from . import entry

entry()
