"""``exec:<command>``: a runtime in any language, as long-lived child processes speaking JSON lines.

Protocol v2 (one JSON object per line, UTF-8, on the child's stdin and stdout)::

    → {"id": "fluency_truth_001:0#1", "session": "fluency_truth_001", "prompt": "What is truth?"}
    ← {"id": "fluency_truth_001:0#1", "surface": "Truth is ...", "grounding_source": "pack"}

- Each request gets exactly one reply line, which echoes the request's ``id``: an opaque
  string, unique among the requests a child receives (today ``<session>:<turn>#<n>``).
  ``session`` is the case id: the child keeps one conversation per session id (turns of a
  session arrive in order). With a run seed (``--seed``) every request also carries its
  sample's ``seed`` (an integer, the same for every turn of a session).
- A reply must carry ``surface`` (a string). ``grounding_source``, ``surface_tag`` and
  ``epistemic_status`` are optional strings; any other key is kept in the transcript's
  ``raw``. A reply ``{"id": ..., "error": "..."}`` records that turn as failed.
- With the option ``end_sessions=true`` the child also receives
  ``{"id": ..., "session": id, "end": true}`` when a session is over, and answers
  it with a line echoing the id, so it can free the session.
- Blank lines on stdout are ignored; whatever the child writes to stderr passes through to ours.

Options: ``workers`` (child processes, default 1; sessions are spread across them and every
turn of a session goes to the same child), ``timeout_s`` per turn, writing the request
included (default 60), ``max_reply_bytes`` (default 1 MB), ``env`` (added to the child's
environment), ``cwd``, ``end_sessions``.

Faults (the transcript's ``error`` starts with the kind):

- ``protocol_mismatch``: a line that does not echo the request's id (an extra line, a stale
  reply, a v1 child), or a reply before the request was read;
- ``malformed_reply``: a line that is not UTF-8, not JSON or not an object (at once, without
  waiting out the timeout), or a reply whose fields have the wrong types;
- ``reply_too_large``: a reply line over ``max_reply_bytes``;
- ``timeout``: the request was not read, or no reply came, within ``timeout_s``;
- ``runtime_exited``: the child exited (or closed its stdout) during the turn;
- ``runtime_error``: an ``error`` reply; ``session_lost``: see below.

After any fault but the last three kinds the child's output can no longer be trusted to be
in step, so the child is killed with its process group and restarted. A restarted child has
lost its conversations, so the remaining turns of sessions that lived on it fail too
(``session_lost``); other sessions carry on. None of these faults is transient: sending the
turn again would reach a child without the conversation.

Every child runs in its own process group behind a small guard
(:mod:`eval_pipeline.runtimes.exec_guard`): the group is killed on timeout, on close, and
when this process dies in any way, SIGKILL included (POSIX only).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.cases.jsonl import LineProblem, parse_json_line
from eval_pipeline.runtimes import exec_guard
from eval_pipeline.runtimes.base import Capabilities, ChatSession, RuntimeSpecError, TurnResponse
from eval_pipeline.runtimes.faults import TurnFault
from eval_pipeline.runtimes.options import validate_options
from eval_pipeline.runtimes.redaction import redacted_spec
from eval_pipeline.runtimes.registry import register_runtime

TYPED_FIELDS = ("grounding_source", "surface_tag", "epistemic_status")
CLOSE_GRACE_S = 5.0  # how long a closed child may take to exit by itself, at most its timeout
_READ_CHUNK = 1 << 16
_GUARD = Path(exec_guard.__file__).resolve()


class ExecOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int = Field(1, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    max_reply_bytes: int = Field(default=1_000_000, ge=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    end_sessions: bool = False


def fault(kind: str, detail: str) -> TurnFault:
    """A non-transient turn fault whose message starts with its kind."""
    return TurnFault(f"{kind}: {detail}", kind=kind)


class StreamFault(Exception):
    """The child's stdout is out of step or unusable: the turn fails and the child is restarted."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def reply_to_response(reply: Any) -> TurnResponse:
    """A protocol reply as a TurnResponse; a malformed or ``error`` reply raises TurnFault."""
    if not isinstance(reply, dict):
        raise fault("malformed_reply", f"expected a JSON object, got {type(reply).__name__}")
    if reply.get("error") is not None:
        raise fault("runtime_error", str(reply["error"]))
    surface = reply.get("surface")
    if not isinstance(surface, str):
        raise fault("malformed_reply", "'surface' must be a string")
    typed: dict[str, str | None] = {}
    for name in TYPED_FIELDS:
        value = reply.get(name)
        if value is not None and not isinstance(value, str):
            raise fault("malformed_reply", f"{name!r} must be a string or null")
        typed[name] = value
    raw = {k: v for k, v in reply.items() if k not in ("surface", "error", *TYPED_FIELDS)}
    return TurnResponse(surface=surface, raw=raw, **typed)


def _shown(text: str | bytes, limit: int = 80) -> str:
    return repr(text[:limit]) + ("…" if len(text) > limit else "")


def parse_reply_line(line: bytes, request_id: str) -> dict[str, Any]:
    """One stdout line as the reply to ``request_id``; raises StreamFault when it is not that."""
    # The strict reader of case files: a key twice, NaN, a lone surrogate or deep nesting is
    # malformed here too (a reply whose "surface" came twice would otherwise record the last).
    reply = parse_json_line(line)
    if isinstance(reply, LineProblem):
        where = "" if reply.field == "(line)" else f"{reply.field}: "
        raise StreamFault("malformed_reply", f"{where}{reply.message}: {_shown(line)}")
    if "id" not in reply:
        raise StreamFault(
            "protocol_mismatch", f"the reply has no 'id' (request {request_id!r}; protocol v2 echoes it)"
        )
    if reply["id"] != request_id:
        raise StreamFault(
            "protocol_mismatch", f"the reply echoes id {_shown(str(reply['id']))}, not {request_id!r}"
        )
    return reply


def take_line(pending: bytearray, max_bytes: int) -> bytes | None:
    """Remove and return the first non-blank line of ``pending`` (no newline), None if incomplete.

    Raises StreamFault when the line (complete or not) is longer than ``max_bytes``.
    """
    while True:
        end = pending.find(b"\n", 0, max_bytes + 2)  # room for a CRLF ending
        if end < 0:
            if len(pending) > max_bytes:
                raise StreamFault("reply_too_large", f"a reply line longer than {max_bytes} bytes")
            return None
        line = bytes(pending[:end]).removesuffix(b"\r")
        if len(line) > max_bytes:
            raise StreamFault("reply_too_large", f"a reply line longer than {max_bytes} bytes")
        del pending[: end + 1]
        if line.strip():
            return line


def resolve_command(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> list[str]:
    """``argv`` with its program as an absolute path, found the way ``execvp`` would; else bad input."""
    program = argv[0]
    if os.sep in program:
        path = os.path.abspath(os.path.join(cwd or ".", program))
        found = path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise RuntimeSpecError(
            f"exec runtime: cannot start {redacted_spec(shlex.join(argv))}: {program!r} is not an executable file"
            + ("" if os.sep in program else " on PATH")
        )
    return [os.path.abspath(found), *argv[1:]]


class _Exited(Exception):
    """The child closed its stdout or its stdin: it is gone or going."""


class ChildProcess:
    """One long-lived child behind its guard. Requests are strictly serial (a lock)."""

    def __init__(self, command: list[str], env: dict[str, str], options: ExecOptions) -> None:
        self._command = command
        self._env = env
        self._cwd = options.cwd
        self._timeout_s = options.timeout_s
        self._max_reply_bytes = options.max_reply_bytes
        self._lock = threading.Lock()
        self.generation = 0  # bumped on every (re)start; sessions opened before a restart are lost
        self.sessions = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._lifeline: int | None = None  # our end of the guard's lifeline pipe
        self._pending = bytearray()  # stdout bytes read but not yet consumed as a reply
        self._numbering_lock = threading.Lock()
        self._requests_numbered = 0

    @property
    def pgid(self) -> int | None:
        """The process group of the running child (its guard's pid), None when none runs."""
        return self._process.pid if self._process is not None else None

    def _start(self) -> subprocess.Popen[bytes]:
        guard_end, lifeline = os.pipe()
        try:
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_GUARD), str(guard_end), *self._command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=self._env,
                cwd=self._cwd,
                pass_fds=(guard_end,),
                start_new_session=True,
                bufsize=0,
            )
        except OSError as exc:
            os.close(lifeline)
            raise RuntimeSpecError(
                f"exec runtime: cannot start {redacted_spec(shlex.join(self._command))}: {exc}"
            ) from None
        finally:
            os.close(guard_end)
        assert process.stdin is not None and process.stdout is not None
        os.set_blocking(process.stdin.fileno(), False)
        os.set_blocking(process.stdout.fileno(), False)
        self._process, self._lifeline = process, lifeline
        self._pending = bytearray()
        self.generation += 1
        return process

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None or _peek_exit(self._process) is not None:
            self._discard()
            return self._start()
        return self._process

    def next_request_number(self) -> int:
        """A number no other request to this child carries: ids stay unique when a session id recurs."""
        with self._numbering_lock:
            self._requests_numbered += 1
            return self._requests_numbered

    def ensure_started(self) -> int:
        with self._lock:
            self._running()
            return self.generation

    def request(self, message: dict[str, Any], generation: int) -> dict[str, Any]:
        """Send one request and return its reply (the id checked); a fault raises TurnFault."""
        payload = (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")
        request_id = str(message["id"])
        with self._lock:
            process = self._running()
            if self.generation != generation:
                raise fault("session_lost", "its runtime process exited and was restarted")
            try:
                return self._exchange(process, payload, request_id)
            except StreamFault as exc:
                self._discard()
                raise fault(exc.kind, f"{exc.detail}; runtime process restarted") from None
            except TimeoutError as exc:
                self._discard()
                raise fault("timeout", f"{exc}; runtime process restarted") from None
            except _Exited:
                # Closed pipes mostly mean an exit: wait a little for its code.
                code = _wait_unreaped(process, min(1.0, self._timeout_s))
                self._discard()
                how = f"exited (code {code})" if code is not None else "closed its stdout"
                raise fault("runtime_exited", f"runtime process {how}") from None

    def _exchange(self, process: subprocess.Popen[bytes], payload: bytes, request_id: str) -> dict[str, Any]:
        """Write the request and read its reply line under one deadline, both without blocking."""
        assert process.stdin is not None and process.stdout is not None
        deadline = time.monotonic() + self._timeout_s
        stdin_fd, stdout_fd = process.stdin.fileno(), process.stdout.fileno()
        unsent = memoryview(payload)
        with selectors.DefaultSelector() as selector:
            selector.register(stdout_fd, selectors.EVENT_READ)
            selector.register(stdin_fd, selectors.EVENT_WRITE)
            while True:
                line = take_line(self._pending, self._max_reply_bytes)
                if line is not None:
                    reply = parse_reply_line(line, request_id)
                    if unsent:
                        raise StreamFault("protocol_mismatch", "a reply before the request was read")
                    return reply
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    sent = len(payload) - len(unsent)
                    if unsent:
                        raise TimeoutError(
                            f"the request was not read within {self._timeout_s:g}s "
                            f"({sent} of {len(payload)} bytes taken)"
                        )
                    raise TimeoutError(f"no reply within {self._timeout_s:g}s")
                for key, _ in selector.select(remaining):
                    if key.fd == stdout_fd:
                        with contextlib.suppress(BlockingIOError):
                            chunk = os.read(stdout_fd, _READ_CHUNK)
                            if not chunk:
                                raise _Exited
                            self._pending += chunk
                    else:
                        try:
                            written = os.write(stdin_fd, unsent)
                        except BlockingIOError:
                            continue
                        except (BrokenPipeError, ConnectionResetError):
                            raise _Exited from None
                        unsent = unsent[written:]
                        if not unsent:
                            selector.unregister(stdin_fd)

    def _discard(self) -> None:
        """Kill the child's whole process group, reap it and close its pipes."""
        process, self._process = self._process, None
        if process is not None:
            # The guard is the group leader and not reaped yet, so its pid still names this group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None

    def hang_up(self) -> None:
        """Close the child's stdin: the end of its input, its cue to exit by itself."""
        with self._lock:
            process = self._process
            if process is not None and process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()

    def close(self) -> None:
        """Hang up, give the child a moment to exit by itself, then kill its group."""
        self.hang_up()
        with self._lock:
            if self._process is not None:
                _wait_unreaped(self._process, min(CLOSE_GRACE_S, self._timeout_s))
            self._discard()


def _peek_exit(process: subprocess.Popen[bytes]) -> int | None:
    """The guard's exit code (negative: the signal that killed it), None while it runs.

    The guard is not reaped, so its pid keeps naming the process group until we kill it.
    Where ``waitid`` is missing (macOS) it is reaped; its group's pgid stays valid while any
    member lives, which is all the kill needs.
    """
    if not hasattr(os, "waitid"):
        return process.poll()
    try:
        result = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped already
        return process.returncode if process.returncode is not None else -1
    if result is None:
        return None
    return result.si_status if result.si_code == os.CLD_EXITED else -result.si_status


def _wait_unreaped(process: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    """The guard's exit code once it exits, None if it still runs after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (code := _peek_exit(process)) is None:
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)
    return code


class ExecSession:
    def __init__(self, runtime: ExecRuntime, session_id: str, child: ChildProcess, seed: int | None) -> None:
        self._runtime = runtime
        self._session_id = session_id
        self._child = child
        self._seed = seed
        self._generation = child.ensure_started()
        self._requests_sent = 0

    def send(self, prompt: str) -> TurnResponse:
        request_id = f"{self._session_id}:{self._requests_sent}#{self._child.next_request_number()}"
        self._requests_sent += 1
        message: dict[str, Any] = {"id": request_id, "session": self._session_id, "prompt": prompt}
        if self._seed is not None:
            message["seed"] = self._seed
        reply = self._child.request(message, self._generation)
        del reply["id"]  # the protocol's, not the runtime's
        return reply_to_response(reply)

    def close(self) -> None:
        self._runtime.release(self._child)
        if self._runtime.end_sessions:
            request_id = f"{self._session_id}:end#{self._child.next_request_number()}"
            message = {"id": request_id, "session": self._session_id, "end": True}
            with contextlib.suppress(TurnFault):  # the conversation is over either way
                self._child.request(message, self._generation)


class ExecRuntime:
    """Child processes speaking JSON lines; each session lives on the least busy child."""

    def __init__(self, argv: Sequence[str], *, spec: str, options: ExecOptions) -> None:
        self.spec = spec
        self.end_sessions = options.end_sessions
        # A session per worker at once; a sample's seed travels in each of its session's
        # requests (``seed``), for the child to use.
        self.capabilities = Capabilities(concurrency=options.workers, seeded=True)
        child_env = {**os.environ, **options.env}
        command = resolve_command(argv, child_env, options.cwd)
        self._children = [ChildProcess(command, child_env, options) for _ in range(options.workers)]
        self._lock = threading.Lock()

    @property
    def process_groups(self) -> list[int]:
        """The process groups of the children running now (one per worker that has started)."""
        return [pgid for child in self._children if (pgid := child.pgid) is not None]

    def start(self) -> None:
        """Start every child now (they otherwise start with their first session)."""
        for child in self._children:
            child.ensure_started()

    def open_session(self, session_id: str, seed: int | None = None) -> ChatSession:
        with self._lock:
            child = min(self._children, key=lambda c: c.sessions)
            child.sessions += 1
        return ExecSession(self, session_id, child, seed)

    def release(self, child: ChildProcess) -> None:
        with self._lock:
            child.sessions -= 1

    def close(self) -> None:
        for child in self._children:  # every child is told at once; then each is waited for
            child.hang_up()
        for child in self._children:
            child.close()


def exec_argv(argument: str) -> list[str]:
    """The command an ``exec:`` spec names, split like a shell; an empty or unparsable one is bad input."""
    try:
        argv = shlex.split(argument)
    except ValueError as exc:
        raise RuntimeSpecError(
            f"exec runtime: cannot parse command {redacted_spec(argument)!r}: {exc}"
        ) from None
    if not argv:
        raise RuntimeSpecError("exec runtime needs a command: exec:<command> [args...]")
    return argv


@register_runtime("exec", ExecOptions)
def exec_runtime(argument: str, options: Mapping[str, Any]) -> ExecRuntime:
    argv = exec_argv(argument)
    return ExecRuntime(argv, spec=f"exec:{argument}", options=validate_options("exec", ExecOptions, options))
