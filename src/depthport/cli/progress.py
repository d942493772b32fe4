"""Stages a person can watch: a spinner with the stage's name, how far it is and the elapsed time, then one
line with the stage's time; and a bar for many inputs (`item_progress`). Nothing when the output is not a
terminal or with --quiet."""

from __future__ import annotations

import contextlib
import time
from typing import Callable, NamedTuple


def time_left(elapsed: float, done: int, total: int) -> str:
    """'about 2 min left' from the time the first ``done`` of ``total`` units took; '' before the first."""
    if not done or done >= total:
        return ""
    left = elapsed / done * (total - done)
    return f"about {left / 60:.0f} min left" if left >= 90 else f"about {max(left, 1):.0f} s left"


class StageProgress:
    """A stage's spinner; the stage's ``detail(text, done, total)`` shows what runs, and with units of work
    (images n/N) the time left, estimated from the units done since the count last started."""

    def __init__(self, console):
        self.console = console
        self._update = None

    @contextlib.contextmanager
    def stage(self, name: str):
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        start = time.perf_counter()
        columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("[dim]{task.fields[left]}"),
                   TimeElapsedColumn())
        count = {"t0": start, "done": 0}
        with Progress(*columns, console=self.console, transient=True) as bar:
            task = bar.add_task(name, left="")

            def update(text: str, done: int | None, total: int | None) -> None:
                now = time.perf_counter()
                if done is None or done < count["done"] or done == 0:
                    count["t0"] = now
                count["done"] = done or 0
                left = time_left(now - count["t0"], done, total) if done is not None and total else ""
                bar.update(task, description=f"{name}: {text}", left=left)

            self._update = update
            try:
                yield
            finally:
                self._update = None
        self.console.print(f"[green]done[/] {name} [dim]{time.perf_counter() - start:.1f} s[/]")

    def detail(self, text: str, done: int | None = None, total: int | None = None) -> None:
        if self._update is not None:
            self._update(text, done, total)


class ItemBar(NamedTuple):
    """``advance(name, error)`` moves the bar on, printing a line above it for a skipped input; ``phase(what,
    total)`` starts it again from 0 for a second pass over the same units (a metric video's colouring)."""

    advance: Callable[..., None]
    phase: Callable[[str, int], None]


@contextlib.contextmanager
def item_progress(console, noun: str, total: int | None, estimated: bool = False):
    """A bar for many inputs: done/total ('~' before an ``estimated`` total: a Matroska video's, from its duration
    and frame rate, which a variable frame rate makes far off), inputs per second and the time left; yields an
    ``ItemBar``."""
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    class Count(ProgressColumn):
        def render(self, task):
            of = "?" if task.total is None else f"{'~' if estimated else ''}{task.total:.0f}"
            return Text(f"{task.completed:.0f}/{of}", style="progress.download")

    class Rate(ProgressColumn):
        def render(self, task):
            return Text(f"{task.speed:.1f} fps" if task.speed else "-- fps")

    columns = (TextColumn("{task.description}"), BarColumn(), Count(), Rate(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(noun, total=total)

        def advance(name: str = "", error: str | None = None) -> None:
            if error:
                bar.console.print(f"[yellow]skipped[/] {escape(name)}: {escape(error)}", soft_wrap=True)
            bar.advance(task)

        def phase(what: str, total: int) -> None:
            nonlocal estimated
            estimated = False
            bar.reset(task, total=total, description=f"{noun}: {what}")

        yield ItemBar(advance, phase)
