"""Progress of a long run: a rich progress bar for the CLI, periodic log lines for Dagster.

Both are ``on_turn`` callbacks for :func:`eval_pipeline.run.drive.drive` (called from worker
threads, hence the lock) with a ``start(turns_to_drive)`` for its ``on_start``, and take many
turns at once through ``add_turns`` (a recording answers all of its turns in one call). They
share one tally, :class:`TurnTally`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from eval_pipeline.metrics.usage import was_retried


@dataclass
class TurnTally:
    """Turns done, failed and retried (answered or failed after more than one attempt) so far,
    thread-safe."""

    total: int | None = None
    done: int = 0
    errors: int = 0
    retried: int = 0
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_turns(self, turns: int, errors: int, retried: int = 0) -> None:
        with self._lock:
            self.done += turns
            self.errors += errors
            self.retried += retried

    @property
    def rate(self) -> float:
        """Turns per second since the tally started."""
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def summary(self) -> str:
        of_total = f"/{self.total}" if self.total is not None else ""
        share = f" ({100.0 * self.done / self.total:.0f}%)" if self.total else ""
        return f"turns {self.done}{of_total}{share}, errors {self.errors}, retried {self.retried}, {self.rate:.1f} turns/s"


def retried_turn(row: dict[str, Any]) -> int:
    """1 when the turn took more than one attempt (a transient fault was retried), else 0: the
    turns the run's ``retried_turns`` usage metric counts (:func:`eval_pipeline.metrics.usage.was_retried`)."""
    return int(was_retried(row.get("attempts")))


class Throttle:
    """Says when a tally is worth showing again: at most every ``every_s`` seconds, and always
    once the last turn is in (thread-safe)."""

    def __init__(self, every_s: float) -> None:
        self._every_s = every_s
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def due(self, tally: TurnTally) -> bool:
        now = time.monotonic()
        finished = tally.total is not None and tally.done >= tally.total
        with self._lock:
            if not finished and now - self._last < self._every_s:
                return False
            self._last = now
            return True


class LogProgress:
    """Logs the tally at most every ``every_s`` seconds, and once when the last turn is in."""

    def __init__(self, logger: logging.Logger | Any, every_s: float = 10.0, label: str = "") -> None:
        self.tally = TurnTally()
        self._logger = logger
        self._every_s = every_s
        self._label = f"{label}: " if label else ""
        self._throttle = Throttle(every_s)

    def start(self, turns_to_drive: int) -> None:
        self.tally = TurnTally(total=turns_to_drive)
        self._throttle = Throttle(self._every_s)
        self._logger.info(f"{self._label}driving {turns_to_drive} turns")

    def __call__(self, row: dict[str, Any]) -> None:
        self.add_turns(1, int(row.get("error") is not None), retried_turn(row))

    def add_turns(self, turns: int, errors: int, retried: int = 0) -> None:
        self.tally.add_turns(turns, errors, retried)
        if self._throttle.due(self.tally):
            self._logger.info(self._label + self.tally.summary())


class RichProgress:
    """A rich progress bar: turns done / total, errors, rate, elapsed.

    The bar is updated at most every ``every_s`` seconds (it redraws ten times a second
    anyway), and on the last turn: replayed turns, answered without waiting on a runtime,
    would otherwise spend their time on updates nobody sees."""

    def __init__(self, progress: Progress, description: str, every_s: float = 0.05) -> None:
        self.tally = TurnTally()
        self._progress = progress
        # Shown as written: a lane's "[public]" is its split, not a style.
        self._task: TaskID = progress.add_task(escape(description), total=None, errors=0, retried=0, rate=0.0)
        self._throttle = Throttle(every_s)

    def start(self, turns_to_drive: int) -> None:
        self.tally = TurnTally(total=turns_to_drive)
        self._progress.update(self._task, total=turns_to_drive, completed=0)

    def __call__(self, row: dict[str, Any]) -> None:
        self.add_turns(1, int(row.get("error") is not None), retried_turn(row))

    def add_turns(self, turns: int, errors: int, retried: int = 0) -> None:
        self.tally.add_turns(turns, errors, retried)
        if self._throttle.due(self.tally):
            self._progress.update(
                self._task,
                completed=self.tally.done,
                errors=self.tally.errors,
                retried=self.tally.retried,
                rate=self.tally.rate,
            )


# The bar and its figures at their widest (a million turns, thousands a second), so the
# description is shown in full on the bar's line only when both fit the terminal.
PROGRESS_FIGURES_WIDTH = 88
BAR_WIDTH = 20


def progress_columns() -> tuple[ProgressColumn, ...]:
    """The bar's columns: description, bar, turns done / total, errors, retried, rate, elapsed."""
    return (
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=BAR_WIDTH),
        MofNCompleteColumn(),
        TextColumn("errors {task.fields[errors]}"),
        TextColumn("retried {task.fields[retried]}"),
        TextColumn("{task.fields[rate]:.1f} turns/s"),
        TimeElapsedColumn(),
    )


@contextmanager
def rich_progress(description: str = "turns", console: Console | None = None) -> Iterator[RichProgress]:
    """``with rich_progress("fluency/dev") as progress: drive(..., on_turn=progress, on_start=progress.start)``.

    A description too long to share a line with the bar at the terminal's width is printed on
    its own line above it, whole, rather than cut."""
    console = console or Console()
    if cell_len(description) + PROGRESS_FIGURES_WIDTH > console.width:
        console.print(Text(description, style="bold"), highlight=False)
        description = ""
    with Progress(*progress_columns(), console=console, transient=False) as progress:
        yield RichProgress(progress, description)


class ProgressObserver(Protocol):
    def start(self, turns_to_drive: int) -> None: ...

    def __call__(self, row: dict[str, Any]) -> None: ...

    def add_turns(self, turns: int, errors: int, retried: int = 0) -> None:
        """Many turns done at once, ``errors`` of them faulted and ``retried`` sent more than once
        (a recording answers every turn in one call: a row each would cost more than the answers)."""
        ...


class FanOut:
    """One ``on_turn``/``on_start`` pair that forwards to several observers."""

    def __init__(self, *observers: ProgressObserver) -> None:
        self._observers = observers

    def start(self, turns_to_drive: int) -> None:
        for observer in self._observers:
            observer.start(turns_to_drive)

    def __call__(self, row: dict[str, Any]) -> None:
        for observer in self._observers:
            observer(row)

    def add_turns(self, turns: int, errors: int, retried: int = 0) -> None:
        for observer in self._observers:
            observer.add_turns(turns, errors, retried)


class NoProgress:
    """The observer of a run nobody watches (the UI and the schedule: Dagster logs suffice)."""

    def start(self, turns_to_drive: int) -> None:
        pass

    def __call__(self, row: dict[str, Any]) -> None:
        pass

    def add_turns(self, turns: int, errors: int, retried: int = 0) -> None:
        pass
