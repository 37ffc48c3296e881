"""``exec:<command>``: a runtime in any language, as long-lived child processes speaking JSON lines.

The protocol (one JSON object per line, UTF-8, on the child's stdin and stdout)::

    → {"session": "fluency_truth_001", "prompt": "What is truth?"}
    ← {"surface": "Truth is ...", "grounding_source": "pack"}

- Each request gets exactly one reply line, in order. ``session`` is the case id: the child
  keeps one conversation per session id (turns of a session arrive in order).
- A reply must carry ``surface`` (a string). ``grounding_source``, ``surface_tag`` and
  ``epistemic_status`` are optional strings; any other key is kept in the transcript's
  ``raw``. A reply ``{"error": "..."}`` records that turn as failed.
- With the option ``end_sessions=true`` the child also receives ``{"session": id, "end": true}``
  when a session is over, and answers it with any one line (e.g. ``{}``), so it can free it.
- Whatever the child writes to stderr passes through to ours.

Options: ``workers`` (child processes, default 1; sessions are spread across them and every
turn of a session goes to the same child), ``timeout_s`` per turn (default 60; a child that
does not answer in time is killed and restarted), ``env`` (added to the child's
environment), ``cwd``, ``end_sessions``.

A malformed reply, an ``error`` reply, a timeout or a child that exits fails that turn. A
restarted child has lost its conversations, so the remaining turns of sessions that lived
on it fail too ("session lost"); other sessions carry on.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.runtimes.base import ChatSession, RuntimeSpecError, TurnResponse
from eval_pipeline.runtimes.faults import TurnFault
from eval_pipeline.runtimes.options import validate_options
from eval_pipeline.runtimes.registry import register_runtime

TYPED_FIELDS = ("grounding_source", "surface_tag", "epistemic_status")


class ExecOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int = Field(1, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    end_sessions: bool = False


def reply_to_response(reply: Any) -> TurnResponse:
    """A protocol reply as a TurnResponse; a malformed or ``error`` reply raises TurnFault."""
    if not isinstance(reply, dict):
        raise TurnFault(f"malformed reply: expected a JSON object, got {type(reply).__name__}")
    if reply.get("error") is not None:
        raise TurnFault(str(reply["error"]))
    surface = reply.get("surface")
    if not isinstance(surface, str):
        raise TurnFault("malformed reply: 'surface' must be a string")
    typed: dict[str, str | None] = {}
    for name in TYPED_FIELDS:
        value = reply.get(name)
        if value is not None and not isinstance(value, str):
            raise TurnFault(f"malformed reply: {name!r} must be a string or null")
        typed[name] = value
    raw = {k: v for k, v in reply.items() if k not in ("surface", "error", *TYPED_FIELDS)}
    return TurnResponse(surface=surface, raw=raw, **typed)


_EXITED = object()


class ChildProcess:
    """One long-lived child. Requests are strictly serial (a lock); a reader thread feeds replies."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None, timeout_s: float
    ) -> None:
        self._argv = list(argv)
        self._env = dict(env)
        self._cwd = cwd
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self.generation = 0  # bumped on every (re)start; sessions opened before a restart are lost
        self.sessions = 0
        self._process: subprocess.Popen[str] | None = None
        self._replies: queue.Queue[object] = queue.Queue()

    def _start(self) -> subprocess.Popen[str]:
        try:
            process = subprocess.Popen(
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=self._env,
                cwd=self._cwd,
                text=True,
                encoding="utf-8",
                bufsize=1,
            )
        except OSError as exc:
            raise RuntimeSpecError(f"exec runtime: cannot start {shlex.join(self._argv)}: {exc}") from None
        replies: queue.Queue[object] = queue.Queue()
        threading.Thread(target=_read_lines, args=(process, replies), daemon=True).start()
        self._process, self._replies = process, replies
        self.generation += 1
        return process

    def ensure_started(self) -> int:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
            return self.generation

    def request(self, message: dict[str, Any], generation: int) -> Any:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
            if self.generation != generation:
                raise TurnFault("session lost: its runtime process exited and was restarted")
            process = self._process
            assert process is not None and process.stdin is not None
            try:
                process.stdin.write(json.dumps(message, ensure_ascii=False) + "\n")
                process.stdin.flush()
                line = self._replies.get(timeout=self._timeout_s)
            except (BrokenPipeError, OSError):
                line = _EXITED
            except queue.Empty:
                self._kill()
                raise TurnFault(f"no reply within {self._timeout_s:g}s; runtime process restarted") from None
            if line is _EXITED:
                code = process.wait()
                self._process = None
                raise TurnFault(f"runtime process exited (code {code})")
        try:
            return json.loads(str(line))
        except json.JSONDecodeError:
            shown = str(line)[:80]
            raise TurnFault(f"malformed reply: not JSON: {shown!r}") from None

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def close(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        try:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()


def _read_lines(process: subprocess.Popen[str], replies: queue.Queue[object]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        if line.strip():
            replies.put(line)
    replies.put(_EXITED)


class ExecSession:
    def __init__(self, runtime: ExecRuntime, session_id: str, child: ChildProcess) -> None:
        self._runtime = runtime
        self._session_id = session_id
        self._child = child
        self._generation = child.ensure_started()

    def send(self, prompt: str) -> TurnResponse:
        reply = self._child.request({"session": self._session_id, "prompt": prompt}, self._generation)
        return reply_to_response(reply)

    def close(self) -> None:
        self._runtime.release(self._child)
        if self._runtime.end_sessions:
            with contextlib.suppress(TurnFault):  # the conversation is over either way
                self._child.request({"session": self._session_id, "end": True}, self._generation)


class ExecRuntime:
    """Child processes speaking JSON lines; each session lives on the least busy child."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        spec: str,
        workers: int = 1,
        timeout_s: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        end_sessions: bool = False,
    ) -> None:
        self._spec = spec
        self.end_sessions = end_sessions
        self.preferred_concurrency = workers
        child_env = {**os.environ, **(env or {})}
        self._children = [ChildProcess(argv, child_env, cwd, timeout_s) for _ in range(workers)]
        self._lock = threading.Lock()

    @property
    def spec(self) -> str:
        return self._spec

    def open_session(self, session_id: str) -> ChatSession:
        with self._lock:
            child = min(self._children, key=lambda c: c.sessions)
            child.sessions += 1
        return ExecSession(self, session_id, child)

    def release(self, child: ChildProcess) -> None:
        with self._lock:
            child.sessions -= 1

    def close(self) -> None:
        for child in self._children:
            child.close()


@register_runtime("exec")
def exec_runtime(argument: str, options: Mapping[str, Any]) -> ExecRuntime:
    try:
        argv = shlex.split(argument)
    except ValueError as exc:
        raise RuntimeSpecError(f"exec runtime: cannot parse command {argument!r}: {exc}") from None
    if not argv:
        raise RuntimeSpecError("exec runtime needs a command: exec:<command> [args...]")
    config = validate_options("exec", ExecOptions, options)
    return ExecRuntime(
        argv,
        spec=f"exec:{argument}",
        workers=config.workers,
        timeout_s=config.timeout_s,
        env=config.env,
        cwd=config.cwd,
        end_sessions=config.end_sessions,
    )
