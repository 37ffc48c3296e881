"""Worker processes that take a big stage's work side by side.

One pool per process, started when a stage first has enough work for it and kept for the
next stage of the same run: a run's driving and scoring stages share their workers, so each is
started (and imports what it runs) once for them. A worker keeps memory from the calls it made
(the heap does not shrink back to its imports), so the pool is closed where a run's work for it
ends: after the cases stage validated a big file side by side, and after the last scoring stage
(:func:`eval_pipeline.run.pipeline.measure`), and when the process exits. What comes after
(the history, the report) is not done beside idle workers. ``EVAL_PIPELINE_WORKERS`` says how
many (default: the CPUs this process may use; ``1``: every stage works in its own process).

Workers are spawned, not forked: this process may hold Dagster's threads and locks. A
daemonic process (itself a worker of some pool) may not start any, so it works alone.
"""

from __future__ import annotations

import atexit
import os
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import current_process, get_context
from typing import TypeVar

from eval_pipeline.core import return_arrow_memory, whole_number_env

T = TypeVar("T")

WORKERS_ENV = "EVAL_PIPELINE_WORKERS"

_pool: ProcessPoolExecutor | None = None
_pool_size = 0


def worker_count() -> int:
    """Processes a big stage is worked on by: ``EVAL_PIPELINE_WORKERS``, else the CPUs this
    process may use; 1 in a daemonic process, which may not start any."""
    value = whole_number_env(WORKERS_ENV, "processes") or (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    return 1 if current_process().daemon else value


def _worker_pool(workers: int) -> ProcessPoolExecutor:
    """This process's pool of ``workers`` processes (started now if it has none of that size)."""
    global _pool, _pool_size
    if _pool is None or _pool_size != workers:
        close_workers()
        _pool, _pool_size = ProcessPoolExecutor(workers, mp_context=get_context("spawn")), workers
    return _pool


@atexit.register
def close_workers() -> None:
    """Stop this process's workers, if it started any (a later stage starts them again): where
    a run's work for them ends (see the module), and when the process exits."""
    global _pool
    if _pool is not None:
        _pool.shutdown(cancel_futures=True)
        _pool = None


def in_order(
    calls: Iterable[Callable[[], T]], workers: int, ahead: int | None = None
) -> Generator[T, None, None]:
    """The result of each call, in the order of ``calls``, each made by one of ``workers``
    worker processes (a call and what it returns are pickled: a module's function with its
    arguments, e.g. a ``functools.partial``). At most ``ahead`` calls are handed out and not
    yet taken (None: all at once), so that many results are held at most.

    When the caller stops early or a call raises, calls not yet started are cancelled and the
    running ones waited for: none is left working on what the caller then cleans up. A worker
    that dies breaks the pool: its call raises ``BrokenProcessPool`` and the next stage starts
    a new one."""
    pool = _worker_pool(workers)
    pending: deque[Future[T]] = deque()
    try:
        for call in calls:
            pending.append(pool.submit(_returning_memory, call))
            if ahead is not None and len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool:
        close_workers()
        raise
    finally:
        for future in pending:
            future.cancel()
        wait(pending)


def _returning_memory(call: Callable[[], T]) -> T:
    """In a worker: ``call``, then the memory its Arrow buffers took handed back to the system
    (Arrow's allocator keeps freed memory for reuse: a worker between calls would hold the
    most any call took)."""
    try:
        return call()
    finally:
        return_arrow_memory()
