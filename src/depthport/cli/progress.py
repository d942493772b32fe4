"""Stages a person can watch: a spinner with the stage's name, how far it is and the elapsed time, then one
line with the stage's time; and a bar for many inputs (`item_progress`). Nothing when the output is not a
terminal or with --quiet."""

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


@contextlib.contextmanager
def item_progress(console, noun: str, total: int | None):
    """A bar for many inputs: done/total, inputs per second and the time left; yields ``advance(name, error)``,
    which moves it on and prints a line for a skipped input above it."""
    from rich.markup import escape
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                               TimeRemainingColumn)
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task):
            return Text(f"{task.speed:.1f} fps" if task.speed else "-- fps")

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), Rate(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(noun, total=total)

        def advance(name: str, error: str | None = None) -> None:
            if error:
                bar.console.print(f"[yellow]skipped[/] {escape(name)}: {escape(error)}", soft_wrap=True)
            bar.advance(task)

        yield advance
