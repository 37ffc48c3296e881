"""A worker process for the ``python:`` adapter: one Python runtime behind the exec protocol.

Started by the adapter with its configuration in ``EVAL_PIPELINE_PYTHON_WORKER`` (the
target and the validated options); reads ``{"id", "session", "prompt"}`` /
``{"id", "session", "end"}`` lines on stdin and answers each with one JSON line on stdout
that echoes the request's ``id`` (exec protocol v2). A bot that raises answers
``{"error": ...}`` for that turn; the worker carries on with the other sessions. A target that
cannot be loaded (the adapter checks the spec without running the module) answers every turn
with the reason, so each is a fault that says why instead of a worker dying at start-up.
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
        stdout.write(json.dumps({**reply, "id": request.get("id")}, ensure_ascii=False) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
