"""``python:package.module:factory``: evaluate a Python chat system in-process or in worker processes.

The factory is called once per session (with the ``kwargs`` option as keyword arguments)
and returns the session's bot: an object whose ``chat(prompt)`` answers a turn (the method
name is the ``method`` option), or a plain callable ``bot(prompt)``. With
``target="chat"`` the named attribute is itself the chat function, shared by every
session (a stateless bot). An answer may be a string (the surface), a dict, a dataclass
(frozen or not), a pydantic model or any object with attributes; ``surface`` and
``grounding_source`` (and ``surface_tag``, ``epistemic_status``) are read from the names in
the ``fields`` option, everything else it carries goes to ``raw``.

Options: ``method`` ("chat"), ``target`` ("factory" | "chat"), ``kwargs`` ({}), ``fields``
(TurnResponse field → attribute/key name), ``paths`` (extra import paths, searched first),
``env`` (environment for the runtime), ``workers`` (0 = in this process; N or "auto" = N
worker processes, "auto" being one per core), ``timeout_s`` (per turn, 300: a turn not answered
by then is a ``timeout`` fault, in-process too, where the hung call is abandoned and the rest of
its session is ``session_lost``), ``max_reply_bytes`` (1 MB: an answer whose reply, as the
``exec:`` protocol's JSON line, is longer is that turn's ``reply_too_large`` fault, in-process
and in workers alike).

CPU-bound runtimes belong in workers: each worker is a child process running
:mod:`eval_pipeline.runtimes.python_worker`, which speaks the ``exec:`` JSON-lines protocol;
sessions are spread across workers, so a lane uses every core. In-process, ``env`` is set
in this process's environment and sessions share its interpreter (and its GIL).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import json
import os
import symtable
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.runtimes.adapters.exec_process import ExecOptions, ExecRuntime, fault, reply_to_response
from eval_pipeline.runtimes.base import Capabilities, ChatRuntime, ChatSession, RuntimeSpecError, TurnResponse
from eval_pipeline.runtimes.faults import TurnFault
from eval_pipeline.runtimes.in_process import call_with_deadline
from eval_pipeline.runtimes.options import validate_options
from eval_pipeline.runtimes.registry import register_runtime
from eval_pipeline.runtimes.warm import shared

WORKER_CONFIG_ENV = "EVAL_PIPELINE_PYTHON_WORKER"
FieldName = Literal["surface", "grounding_source", "surface_tag", "epistemic_status"]


class PythonOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str = Field("chat", min_length=1)
    target: Literal["factory", "chat"] = "factory"
    kwargs: dict[str, Any] = Field(default_factory=dict)
    fields: dict[FieldName, str] = Field(default_factory=dict)
    paths: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    workers: int | Literal["auto"] = 0
    timeout_s: float = Field(300.0, gt=0)
    max_reply_bytes: int = Field(1_000_000, ge=1)  # an answer's reply, as the exec protocol's line


@contextmanager
def _import_paths(paths: list[str]) -> Iterator[None]:
    added = [p for p in paths if p not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for path in added:
            if path in sys.path:
                sys.path.remove(path)


def split_target(target: str) -> tuple[str, str]:
    """(module, attribute) of ``package.module:attr``; anything else is a bad spec."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise RuntimeSpecError(f"python runtime needs python:package.module:factory, got python:{target}")
    return module_name, attr


def resolve_target(target: str, paths: list[str]) -> Any:
    """The object ``package.module:attr`` names (``attr`` may be dotted)."""
    module_name, attr = split_target(target)
    with _import_paths(paths):
        try:
            value: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise _not_found(module_name, str(exc), paths) from None
        except ImportError as exc:
            raise RuntimeSpecError(f"python runtime: cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(value, part):
            raise RuntimeSpecError(f"python runtime: {module_name!r} has no attribute {attr!r}")
        value = getattr(value, part)
    if not callable(value):
        raise RuntimeSpecError(f"python runtime: {target} is not callable")
    return value


def _not_found(module_name: str, cause: str, paths: list[str]) -> RuntimeSpecError:
    """A module that is not on the import path. The working directory is not on it (a console
    script's path is its own folder), so a bot beside the user's files needs ``paths``: say so."""
    hint = (
        ""
        if "." in paths or os.getcwd() in paths
        else "; a module in the working directory is imported with -o 'paths=[\".\"]' "
        '(or paths: ["."] in the target\'s options)'
    )
    return RuntimeSpecError(f"python runtime: cannot import {module_name!r}: {cause}{hint}")


def check_target(target: str, paths: list[str]) -> None:
    """That ``package.module:attr`` names a module that exists and binds ``attr`` at its top level,
    read from its source without running it: a runtime's start-up (imports, model loading) is
    paid by the processes that serve it, not again by the one that checks the spec."""
    module_name, attr = split_target(target)
    with _import_paths(paths):
        try:
            found = importlib.util.find_spec(module_name)  # imports the parent packages only
        except ModuleNotFoundError as exc:
            raise _not_found(module_name, str(exc), paths) from None
        except (ImportError, ValueError) as exc:
            raise RuntimeSpecError(f"python runtime: cannot import {module_name!r}: {exc}") from None
    if found is None:
        raise _not_found(module_name, f"no module named {module_name!r}", paths)
    names = _top_level_names(found)
    if names is not None and attr.split(".")[0] not in names:
        raise RuntimeSpecError(f"python runtime: {module_name!r} has no attribute {attr!r}")


def _top_level_names(found: importlib.machinery.ModuleSpec) -> set[str] | None:
    """The names a module's source binds at its top level (defined, assigned or imported); None
    when its source cannot tell (no source file, a star import, a module ``__getattr__``)."""
    loaded = sys.modules.get(found.name)
    if loaded is not None:
        return set(vars(loaded))
    if found.origin is None or not found.origin.endswith(".py") or not os.path.isfile(found.origin):
        return None
    with open(found.origin, "rb") as handle:
        source = handle.read()
    try:
        table = symtable.symtable(source.decode("utf-8", "replace"), found.origin, "exec")
    except SyntaxError:
        return None  # its import fails in the workers, with Python's own message
    if b"import *" in source or "__getattr__" in table.get_identifiers():
        return None
    return {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}


def answer_fields(answer: Any) -> dict[str, Any]:
    """An answer as a plain dict: a string is the surface; objects give their fields."""
    if isinstance(answer, str):
        return {"surface": answer}
    if isinstance(answer, Mapping):
        return dict(answer)
    if isinstance(answer, BaseModel):
        return answer.model_dump()
    if dataclasses.is_dataclass(answer) and not isinstance(answer, type):
        return {f.name: getattr(answer, f.name) for f in dataclasses.fields(answer)}
    if hasattr(answer, "__dict__"):
        return {k: v for k, v in vars(answer).items() if not k.startswith("_")}
    raise TypeError(f"cannot read an answer of type {type(answer).__name__}")


def to_reply(answer: Any, options: PythonOptions) -> dict[str, Any]:
    """An answer in the exec protocol's reply shape (surface, typed fields, the rest as-is)."""
    values = answer_fields(answer)
    reply: dict[str, Any] = {}
    for name in get_args(FieldName):
        key = options.fields.get(name, name)
        if key in values:
            value = values.pop(key)
            reply[name] = value if value is None or name == "surface" else str(value)
    if "surface" not in reply:
        return {"error": f"malformed reply: the answer has no {options.fields.get('surface', 'surface')!r}"}
    # Everything else travels in raw; values JSON cannot hold become their text.
    reply.update(json.loads(json.dumps(values, default=str)))
    return reply


def takes_seed(target: Any, options: PythonOptions) -> bool:
    """Whether the factory declares a ``seed`` parameter: then each session gets its sample's seed."""
    if options.target == "chat":
        return False
    try:
        return "seed" in inspect.signature(target).parameters
    except (TypeError, ValueError):  # a builtin or C callable without a readable signature
        return False


def session_chat(target: Any, options: PythonOptions, seed: int | None = None) -> Callable[[str], Any]:
    """The chat function of one new session (its factory handed the sample's seed, if any)."""
    if options.target == "chat":
        return target
    bot = target(**options.kwargs, **({} if seed is None else {"seed": seed}))
    method = getattr(bot, options.method, None)
    if callable(method):
        return method
    if callable(bot):
        return bot
    raise RuntimeSpecError(
        f"python runtime: the factory returned a {type(bot).__name__} with no {options.method}() and it is not callable"
    )


class PythonSession:
    """One bot's conversation in this process; each call has ``timeout_s`` to answer."""

    def __init__(self, chat: Callable[[str], Any], options: PythonOptions) -> None:
        self._chat = chat
        self._options = options
        self._abandoned = False  # a call timed out and may still run: the bot is not ours to call

    def send(self, prompt: str) -> TurnResponse:
        if self._abandoned:
            raise fault("session_lost", "an earlier turn of this session timed out and its call still runs")
        try:
            answer = call_with_deadline(lambda: self._chat(prompt), self._options.timeout_s)
        except TurnFault as exc:
            self._abandoned = exc.kind == "timeout"
            raise
        reply = to_reply(answer, self._options)
        size = len(json.dumps(reply, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > self._options.max_reply_bytes:
            # As an exec worker's reply line would be: the turn's fault, the answer not kept.
            raise fault(
                "reply_too_large",
                f"a reply of {size} bytes, over max_reply_bytes ({self._options.max_reply_bytes})",
            )
        return reply_to_response(reply)

    def close(self) -> None:
        bot: Any = getattr(self._chat, "__self__", None)  # the object whose method answers, if any
        if not self._abandoned and callable(getattr(bot, "close", None)):
            bot.close()


class PythonRuntime:
    """In-process: one bot per session from the factory."""

    def __init__(self, target_name: str, options: PythonOptions) -> None:
        self.spec = f"python:{target_name}"
        self._options = options
        os.environ.update(options.env)
        # In-process, the extra paths stay importable: a bot may import lazily while it chats.
        sys.path[:0] = [p for p in options.paths if p not in sys.path]
        self._target = resolve_target(target_name, [])
        self.capabilities = Capabilities(seeded=takes_seed(self._target, options))

    def open_session(self, session_id: str, seed: int | None = None) -> ChatSession:
        chat = call_with_deadline(
            lambda: session_chat(self._target, self._options, seed), self._options.timeout_s
        )
        return PythonSession(chat, self._options)

    def close(self) -> None:
        pass


def worker_runtime(target_name: str, options: PythonOptions, workers: int) -> ExecRuntime:
    """Worker processes running the target behind the exec protocol, started at once (in the
    background: each imports the target while this process gets on with its own work).

    The spec is checked here from the module's source, not by importing it, so a slow start-up
    is paid once per worker and never by this process; a target that still fails to load in a
    worker makes each of its turns a fault that says why.
    """
    check_target(target_name, options.paths)
    python_path = os.pathsep.join([*options.paths, *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {
        **options.env,
        WORKER_CONFIG_ENV: json.dumps({"target": target_name, "options": options.model_dump()}),
    }
    if python_path:
        env["PYTHONPATH"] = python_path
    runtime = ExecRuntime(
        [sys.executable, "-m", "eval_pipeline.runtimes.python_worker"],
        spec=f"python:{target_name}",
        options=ExecOptions(
            workers=workers,
            timeout_s=options.timeout_s,
            env=env,
            end_sessions=True,
            max_reply_bytes=options.max_reply_bytes,
        ),
    )
    try:
        runtime.start()
    except BaseException:
        runtime.close()
        raise
    return runtime


@register_runtime("python", PythonOptions)
def python_runtime(argument: str, options: Mapping[str, Any]) -> ChatRuntime:
    config = validate_options("python", PythonOptions, options)
    workers = (os.cpu_count() or 1) if config.workers == "auto" else config.workers
    if workers == 0:
        return PythonRuntime(argument, config)
    # Within one invocation (runtimes.warm) every lane and split gets the same warm pool.
    return shared(
        ("python", argument, config.model_dump_json()), lambda: worker_runtime(argument, config, workers)
    )
