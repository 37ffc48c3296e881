"""The command line in a child process with a deadline and a memory ceiling, for hostile inputs.

A hostile input may make a command grow without bound or never end; the test must not take the
machine with it. The child runs in its own process group under ``RLIMIT_AS`` (address space, a
ceiling well above the 1 GB it may use, since Arrow and the allocator reserve address space they
never touch); its peak resident memory is read from ``wait4`` and the whole group is killed at
the deadline. The property every input must meet: exit 0, 1, 2 or 4 with something said, no
traceback, at most :data:`MAX_RSS_BYTES` resident, and within its deadline.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_RSS_BYTES = 1 << 30
ADDRESS_SPACE_BYTES = 6 << 30
CLEAN_EXITS = frozenset({0, 1, 2, 4})


@dataclass(frozen=True)
class CliResult:
    exit_code: int | None  # None: killed at the deadline (or by a signal)
    stdout: str
    stderr: str
    peak_rss_bytes: int
    seconds: float
    timed_out: bool

    def violations(self, deadline_s: float) -> list[str]:
        """How this result breaks the property (empty: it holds)."""
        found = []
        if self.timed_out or self.seconds > deadline_s:
            found.append(f"ran past its deadline of {deadline_s:g}s ({self.seconds:.1f}s)")
        if self.exit_code not in CLEAN_EXITS:
            found.append(f"exit {self.exit_code}")
        if "Traceback (most recent call last)" in self.stdout + self.stderr:
            found.append("printed a traceback")
        if self.exit_code != 0 and not (self.stdout + self.stderr).strip():
            found.append("failed without a message")
        if self.peak_rss_bytes > MAX_RSS_BYTES:
            found.append(f"used {self.peak_rss_bytes / 2**20:.0f} MB")
        return found


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def run_cli(
    args: Sequence[str], *, deadline_s: float, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> CliResult:
    """``eval-pipeline ARGS`` in a child process, killed with its group at ``deadline_s``."""
    command = [sys.executable, "-c", "from eval_pipeline.cli import main; main()", *args]
    return run_bounded(command, deadline_s=deadline_s, env=env, cwd=cwd)


def run_bounded(
    command: Sequence[str], *, deadline_s: float, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> CliResult:
    """``command`` in a child process under the memory ceiling, killed with its group at ``deadline_s``."""
    started = time.monotonic()
    process = subprocess.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "100", **(env or {})},
        cwd=cwd,
        start_new_session=True,
        preexec_fn=_limit_memory,
    )
    output: dict[str, bytes] = {}

    def drain(name: str, stream: object) -> None:
        output[name] = stream.read()  # type: ignore[attr-defined]

    readers = [
        threading.Thread(target=drain, args=(name, stream), daemon=True)
        for name, stream in (("stdout", process.stdout), ("stderr", process.stderr))
    ]
    for reader in readers:
        reader.start()
    timed_out = threading.Event()

    def kill_at_deadline() -> None:
        timed_out.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    timer = threading.Timer(deadline_s, kill_at_deadline)
    timer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    # Whatever the group left behind goes with it (a child of the command must not outlive it).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    for reader in readers:
        reader.join(timeout=10)
    code = process.returncode if process.returncode >= 0 and not timed_out.is_set() else None
    return CliResult(
        exit_code=code,
        stdout=output.get("stdout", b"").decode("utf-8", "replace"),
        stderr=output.get("stderr", b"").decode("utf-8", "replace"),
        peak_rss_bytes=usage.ru_maxrss * 1024,  # kilobytes on Linux
        seconds=seconds,
        timed_out=timed_out.is_set(),
    )
