"""Calling a bot in this process without letting it hang the run or write on our stdout.

A ``python:`` bot in-process is code we do not control: a turn may never return, and its
``print()`` would land in the middle of ``--json`` on stdout. :func:`call_with_deadline` runs
the call on a daemon thread of its own and gives up at the deadline (the thread is abandoned:
Python cannot stop it, but it never holds the process open at exit), and while a bot's call
runs, what that thread writes to ``sys.stdout`` goes to stderr instead (other threads' writes
are untouched). A bot that writes to file descriptor 1 directly is not caught here; worker
processes (``workers``) keep even that off the protocol.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

from eval_pipeline.runtimes.faults import TurnFault

T = TypeVar("T")

_bot_threads: set[int] = set()  # idents of the threads running a bot's call now
_install_lock = threading.Lock()


class _RoutedStdout:
    """``sys.stdout`` as it was, except that a bot thread's writes go to ``sys.stderr``."""

    def __init__(self, wrapped: TextIO) -> None:
        self.wrapped = wrapped

    def write(self, text: str) -> int:
        if threading.get_ident() in _bot_threads:
            return sys.stderr.write(text)
        return self.wrapped.write(text)

    def flush(self) -> None:
        if threading.get_ident() in _bot_threads:
            sys.stderr.flush()
            return
        self.wrapped.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer, …
        return getattr(self.wrapped, name)


def _route_bot_output() -> None:
    """Put the router in front of whatever ``sys.stdout`` is now (a test runner may swap it)."""
    with _install_lock:
        if not isinstance(sys.stdout, _RoutedStdout):
            sys.stdout = _RoutedStdout(sys.stdout)


def call_with_deadline(call: Callable[[], T], timeout_s: float) -> T:
    """``call()``'s result (or its exception), or a ``timeout`` TurnFault after ``timeout_s``."""
    _route_bot_output()
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def work() -> None:
        _bot_threads.add(threading.get_ident())
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc
        finally:
            _bot_threads.discard(threading.get_ident())
            done.set()

    threading.Thread(target=work, name="python-bot-turn", daemon=True).start()
    if not done.wait(timeout_s):
        raise TurnFault(f"timeout: no answer within {timeout_s:g}s (the call was abandoned)", kind="timeout")
    error = outcome.get("error")
    if isinstance(error, Exception):
        raise error
    if error is not None:  # SystemExit, KeyboardInterrupt from the bot's thread: its turn's fault
        raise TurnFault(f"runtime_error: the bot raised {type(error).__name__}", kind="runtime_error")
    return outcome["value"]
