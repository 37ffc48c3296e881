"""Calling a bot in this process without letting it hang the run or write on our stdout.

A ``python:`` bot in-process is code we do not control: a turn may never return, and its
``print()`` would land in the middle of ``--json`` on stdout. :func:`call_with_deadline` runs
the call on a daemon thread of its own and gives up at the deadline (the thread is abandoned:
Python cannot stop it, but it never holds the process open at exit), and while a bot's call
runs, what that thread writes to ``sys.stdout`` goes to stderr instead (other threads' writes
are untouched).

A bot may also write to file descriptor 1 itself (``os.write(1, …)``, a C extension's
``printf``), below ``sys.stdout``. So while any bot call runs, descriptor 1 is pointed at
stderr (``dup2``) and put back when the last running call returns or is abandoned: calls
running at once (concurrency > 1) share the one redirection, counted, so none of them restores
it under another. Meanwhile this process's own writes through ``sys.stdout`` (as it is from
the first bot call on) from other threads go to the real stdout, through the descriptor saved
when the redirection began. What an abandoned
call writes to descriptor 1 after its deadline is not caught; worker processes (``workers``)
keep even that off the protocol.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TextIO, TypeVar

from eval_pipeline.runtimes.faults import TurnFault

T = TypeVar("T")

_bot_threads: set[int] = set()  # idents of the threads running a bot's call now
_install_lock = threading.Lock()


class _Descriptor1:
    """File descriptor 1 pointed at stderr while any bot call runs (counted), then restored."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # a flush at the redirection's start writes through it
        self.calls = 0
        self.saved: int | None = None  # the real stdout, while redirected

    @contextlib.contextmanager
    def to_stderr(self) -> Iterator[None]:
        with self.lock:
            if self.calls == 0:
                _flush_stdout()  # what this process wrote so far goes where it was meant to
                self.saved = os.dup(1)
                os.dup2(2, 1)
            self.calls += 1
        try:
            yield
        finally:
            with self.lock:
                self.calls -= 1
                if self.calls == 0 and self.saved is not None:
                    _flush_c_stdio()  # a bot's buffered printf still goes to stderr
                    os.dup2(self.saved, 1)
                    os.close(self.saved)
                    self.saved = None

    def write(self, stream: TextIO, text: str) -> int:
        """``stream.write(text)`` for this process's own output: to the real stdout, bypassing
        the stream's buffer, while descriptor 1 is redirected and ``stream`` is on it. Under
        the lock, so a redirection never begins between a write and its flush."""
        with self.lock:
            if self.saved is None or not _on_descriptor_1(stream):
                return stream.write(text)
            data = text.encode(getattr(stream, "encoding", None) or "utf-8", "replace")
            view = memoryview(data)
            while view:
                view = view[os.write(self.saved, view) :]
            return len(text)

    def flush(self, stream: TextIO) -> None:
        with self.lock:  # redirected: its buffer is empty (flushed when the redirection began)
            if self.saved is None or not _on_descriptor_1(stream):
                stream.flush()


_DESCRIPTOR_1 = _Descriptor1()


def _on_descriptor_1(stream: TextIO) -> bool:
    try:
        return stream.fileno() == 1
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False


def _flush_stdout() -> None:
    for stream in (sys.stdout, sys.__stdout__):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            if stream is not None:
                stream.flush()
    _flush_c_stdio()


def _flush_c_stdio() -> None:
    """``fflush(NULL)``: the C library's buffered streams, written out now."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


class _RoutedStdout:
    """``sys.stdout`` as it was, except that a bot thread's writes go to ``sys.stderr``."""

    def __init__(self, wrapped: TextIO) -> None:
        self.wrapped = wrapped

    def write(self, text: str) -> int:
        if threading.get_ident() in _bot_threads:
            return sys.stderr.write(text)
        return _DESCRIPTOR_1.write(self.wrapped, text)

    def flush(self) -> None:
        if threading.get_ident() in _bot_threads:
            sys.stderr.flush()
            return
        _DESCRIPTOR_1.flush(self.wrapped)

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

    with _DESCRIPTOR_1.to_stderr():
        threading.Thread(target=work, name="python-bot-turn", daemon=True).start()
        answered = done.wait(timeout_s)
    if not answered:
        raise TurnFault(f"timeout: no answer within {timeout_s:g}s (the call was abandoned)", kind="timeout")
    error = outcome.get("error")
    if isinstance(error, Exception):
        raise error
    if error is not None:  # SystemExit, KeyboardInterrupt from the bot's thread: its turn's fault
        raise TurnFault(f"runtime_error: the bot raised {type(error).__name__}", kind="runtime_error")
    return outcome["value"]
