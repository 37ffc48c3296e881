"""Batches worked on with Python's cyclic garbage collector paused, memory handed back between.

Scoring a batch builds hundreds of thousands of short-lived objects (case models, verdict
columns, table rows). Reference counting frees them; the cyclic collector, triggered by their
sheer number, would meanwhile walk every live object of the process again and again. It is
paused while a batch is made and used and runs as usual between batches, so whatever cyclic
garbage a batch leaves is still collected: memory stays bounded by a batch.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off inside (back on after, unless it was off before)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def frozen_after() -> Iterator[None]:
    """The collector paused inside, and every object alive at the end frozen: left out of
    every later collection.

    For a command's start-up: importing Dagster, pandas and pyarrow and opening the instance
    make about a million objects that live until the process ends. The collector, triggered by
    their number, would walk them all at each full collection during the start-up and after it.
    Whatever cyclic garbage the start-up leaves stays uncollected: a bounded, one-time amount."""
    with collector_paused():
        yield
        # Frozen before the collector is back on: the objects made while it was paused all
        # count as young, so its first young collection would otherwise walk every one of them.
        gc.freeze()


def each_without_collector(items: Iterable[T]) -> Iterator[T]:
    """``items`` one by one, the collector paused while each is made and while the caller works
    on it, and running between them, when the memory Arrow freed is handed back too."""
    iterator = iter(items)
    while True:
        with collector_paused():
            try:
                item = next(iterator)
            except StopIteration:
                return
            yield item
        return_arrow_memory()


def return_arrow_memory() -> None:
    """Hand the memory Arrow's allocator freed back to the system: it keeps it for reuse, so a
    process would otherwise hold, between batches, the most any batch took."""
    import pyarrow as pa  # not with the module: the command line imports it before any work

    pa.default_memory_pool().release_unused()


def no_final_collection() -> None:
    """Make the interpreter's exit skip its last walk of the heap (freeze it, in an exit hook).

    A command that has imported Dagster, pandas and pyarrow and run lanes holds millions of
    objects; the collection the interpreter runs as it exits walks them all once more, to free
    memory the process is about to give back anyway. Called first thing, the hook runs after
    every exit handler registered later (exit handlers run last-in, first-out), so those still
    do their closing and flushing first."""
    atexit.register(gc.freeze)
