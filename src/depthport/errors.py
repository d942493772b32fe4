"""depthport's own errors: each is shown as one line on stderr with exit status 2 (bad input, cannot check)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: shown as one line, exit status 2."""


class MissingDependency(InputError):
    """An optional Python package that a step needs is not installed."""

    def __init__(self, package: str, needed_for: str):
        super().__init__(f"{needed_for} needs the Python package {package!r}, which is not installed; "
                         "`make venv` installs it")
        self.package = package
