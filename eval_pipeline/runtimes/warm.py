"""Runtimes kept warm for a whole invocation: one worker pool serves every lane and split.

A CPU-bound ``python:`` runtime in worker processes pays its start-up (imports, model
loading) once per worker. Inside :func:`warm_runtimes` (one ``eval-pipeline run``, one
Dagster run of several lanes) a runtime built twice with the same spec and options is the
same pool: the first build starts it, later builds get it back, and closing it is left to
the end of the scope. Outside a scope every build is its own runtime, closed by its user.
A worker that crashes is restarted by its pool (the turn it was serving is a fault), so one
crash never costs the rest of the invocation its pool.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING

from eval_pipeline.runtimes.base import Capabilities, ChatRuntime, ChatSession

if TYPE_CHECKING:  # the adapters lend their pools here: a type only, no import circle
    from eval_pipeline.runtimes.adapters.exec_process import ExecRuntime

_lock = threading.Lock()
_scopes = 0
_pools: dict[Hashable, ExecRuntime] = {}


class SharedRuntime:
    """A pool lent to one user: its spec, capabilities, sessions and process groups are the
    pool's; ``close`` leaves it up."""

    def __init__(self, pool: ExecRuntime) -> None:
        self._pool = pool

    @property
    def spec(self) -> str:
        return self._pool.spec

    @property
    def capabilities(self) -> Capabilities:
        return self._pool.capabilities

    @property
    def process_groups(self) -> list[int]:
        return self._pool.process_groups

    def open_session(self, session_id: str, seed: int | None = None) -> ChatSession:
        return self._pool.open_session(session_id, seed)

    def close(self) -> None:
        """The pool stays up for the rest of the scope."""


def shared(key: Hashable, build: Callable[[], ExecRuntime]) -> ChatRuntime:
    """The scope's runtime for ``key`` (built on first use), or a fresh one outside any scope."""
    with _lock:
        if _scopes == 0:
            return build()
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = build()
        return SharedRuntime(pool)


@contextlib.contextmanager
def warm_runtimes() -> Iterator[None]:
    """Share runtimes built in this block; close them all when the outermost block ends."""
    global _scopes
    with _lock:
        _scopes += 1
    try:
        yield
    finally:
        with _lock:
            _scopes -= 1
            closing = list(_pools.values()) if _scopes == 0 else []
            if _scopes == 0:
                _pools.clear()
        for pool in closing:
            with contextlib.suppress(Exception):
                pool.close()
