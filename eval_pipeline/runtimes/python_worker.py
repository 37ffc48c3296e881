"""A worker process for the ``python:`` adapter: one Python runtime behind the exec protocol.

Started by the adapter with its configuration in ``EVAL_PIPELINE_PYTHON_WORKER`` (the
target and the validated options); reads ``{"id", "session", "prompt"}`` /
``{"id", "session", "end"}`` lines on stdin and answers each with one JSON line on stdout
that echoes the request's ``id`` (exec protocol v2). A bot that raises answers
``{"error": ...}`` for that turn; the worker carries on with the other sessions. A target that
cannot be loaded (the adapter checks the spec without running the module) answers every turn
with the reason, so each is a fault that says why instead of a worker dying at start-up. What
the bot prints goes to stderr: the protocol keeps stdout to itself.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from eval_pipeline.runtimes.adapters.python_object import (
    WORKER_CONFIG_ENV,
    PythonOptions,
    resolve_target,
    session_chat,
    takes_seed,
    to_reply,
)
from eval_pipeline.runtimes.base import RuntimeSpecError


def serve(stdin: TextIO, stdout: TextIO) -> None:
    config = json.loads(os.environ[WORKER_CONFIG_ENV])
    options = PythonOptions.model_validate(config["options"])
    try:
        target = resolve_target(config["target"], options.paths)
        unloadable = ""
    except Exception as exc:  # its module raised while loading, or the name is not a factory
        target = None
        unloadable = (
            str(exc)
            if isinstance(exc, RuntimeSpecError)
            else f"python runtime: cannot load {config['target']}: {type(exc).__name__}: {exc}"
        )
    seeded = target is not None and takes_seed(target, options)
    sessions: dict[str, Callable[[str], Any]] = {}
    for line in stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        session_id = str(request.get("session"))
        if request.get("end"):
            sessions.pop(session_id, None)
            reply: dict[str, Any] = {}
        elif unloadable:
            reply = {"error": unloadable}
        else:
            try:
                chat = sessions.get(session_id)
                if chat is None:
                    seed = request.get("seed") if seeded else None
                    chat = sessions[session_id] = session_chat(target, options, seed)
                reply = to_reply(chat(str(request["prompt"])), options)
            except Exception as exc:  # a failing turn is data; the worker serves on
                reply = {"error": f"{type(exc).__name__}: {exc}"}
        stdout.write(reply_line(reply, request.get("id")) + "\n")
        stdout.flush()


def reply_line(reply: dict[str, Any], request_id: Any) -> str:
    """The protocol line of ``reply``; an answer UTF-8 cannot carry (a lone surrogate) is that
    turn's error, not a line this worker cannot write (nor one that costs its other sessions)."""
    line = json.dumps({**reply, "id": request_id}, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        error = "malformed_reply: the answer is not Unicode text (it holds a lone surrogate)"
        return json.dumps({"error": error, "id": request_id}, ensure_ascii=False)
    return line


def protocol_stdout() -> TextIO:
    """This process's stdout kept for the protocol alone: file descriptor 1 (and ``sys.stdout``)
    then point at stderr, so whatever the bot prints, from Python or from C, never reaches the
    protocol stream as a line it would have to be told apart from."""
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol


if __name__ == "__main__":
    serve(sys.stdin, protocol_stdout())
