"""Stages a person can watch: a spinner with the stage's name, how far it is and the elapsed time, then one
line with the stage's time. Nothing when the output is not a terminal or with --quiet."""

from __future__ import annotations

import contextlib
import time


class StageProgress:
    def __init__(self, console):
        self.console = console
        self._update = None

    @contextlib.contextmanager
    def stage(self, name: str):
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        start = time.perf_counter()
        columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        with Progress(*columns, console=self.console, transient=True) as bar:
            task = bar.add_task(name)
            self._update = lambda text: bar.update(task, description=f"{name}: {text}")
            try:
                yield
            finally:
                self._update = None
        self.console.print(f"[green]done[/] {name} [dim]{time.perf_counter() - start:.1f} s[/]")

    def detail(self, text: str) -> None:
        if self._update is not None:
            self._update(text)
