"""The guard in front of every ``exec:`` child: its process group dies when the pipeline does.

Run by the adapter as ``python -I -S exec_guard.py LIFELINE_FD COMMAND [ARGS...]``, as the
leader of a new session and process group (stdlib only, so it starts without importing the
pipeline). It forks COMMAND into its group, with the adapter's stdin/stdout pipes, and then
only watches:

- the lifeline, a pipe whose only writer is the pipeline. The kernel closes it when the
  pipeline exits in any way, SIGKILL included, so end of file there kills the whole group
  (COMMAND, anything COMMAND started, the guard itself);
- COMMAND itself: when it exits, the guard exits with the same status, so the adapter sees
  COMMAND's exit code. The adapter then kills what is left of the group.

Why not ``PR_SET_PDEATHSIG``: it fires when the *thread* that forked the child ends (the
driver starts children from short-lived worker threads), reaches only the direct child and
not what a shell wrapper starts, is Linux-only, and needs ``preexec_fn``, which is unsafe
in a threaded parent.
"""

from __future__ import annotations

import os
import select
import signal
import sys


def _exit_like(status: int) -> None:
    """Leave with the child's wait status: the same exit code, or death by the same signal."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)


def _kill_group() -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux 5.3+), else None: then we poll."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def main(argv: list[str]) -> None:
    lifeline = int(argv[1])
    command = argv[2:]
    os.set_inheritable(lifeline, False)
    pid = os.fork()
    if pid == 0:
        # As subprocess does: Python ignores SIGPIPE and SIGXFSZ, and an ignored signal
        # would stay ignored in COMMAND.
        for name in ("SIGPIPE", "SIGXFSZ"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        try:
            os.execv(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"exec runtime: cannot start {command[0]}: {exc}\n")
            os._exit(127)
    # Only the child speaks on the protocol pipes: the adapter sees end of file when it goes.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    # The adapter ends a timed-out or closed child by killing the group; a terminal's
    # signals do not reach a new session, so the lifeline is the only other way out.
    pidfd = _pidfd(pid)
    watched = [lifeline] if pidfd is None else [lifeline, pidfd]
    while True:
        ready, _, _ = select.select(watched, [], [], 0.2 if pidfd is None else None)
        if lifeline in ready and not os.read(lifeline, 1):
            _kill_group()
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            _exit_like(status)


if __name__ == "__main__":
    main(sys.argv)
