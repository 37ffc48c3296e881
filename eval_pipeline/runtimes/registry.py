"""Runtime specs: ``scheme[:argument]`` strings that name a ChatRuntime adapter.

``reference`` / ``reference:no-gloss``, ``replay:PATH`` and the adapters for real systems
each register a factory for their scheme. A factory receives the argument after the first
colon and the adapter's options (a mapping it validates itself), and returns a runtime, which
is checked once, there (:func:`declared_runtime`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from eval_pipeline.registry import Registry
from eval_pipeline.runtimes.base import Capabilities, ChatRuntime, ChatSession, RuntimeSpecError
from eval_pipeline.runtimes.faults import RetryPolicy
from eval_pipeline.runtimes.options import option_problems
from eval_pipeline.runtimes.redaction import redacted_spec

RuntimeFactory = Callable[[str, Mapping[str, Any]], ChatRuntime]

# One factory per scheme; every module of ``eval_pipeline.runtimes.adapters`` is discovered.
RUNTIME_ADAPTERS: Registry[RuntimeFactory] = Registry("runtime scheme", "eval_pipeline.runtimes.adapters")
# Each scheme's options model, so a declared target's options are checked when the file is read.
RUNTIME_OPTIONS: Registry[type[BaseModel]] = Registry("runtime options", "eval_pipeline.runtimes.adapters")


def register_runtime(scheme: str, options: type[BaseModel]) -> Callable[[RuntimeFactory], RuntimeFactory]:
    """Decorator: ``@register_runtime("openai", OpenAIOptions)`` on ``factory(argument, options)``."""
    RUNTIME_OPTIONS.add(scheme, options)
    return RUNTIME_ADAPTERS.register(scheme)


def split_spec(spec: str) -> tuple[str, str]:
    scheme, _, argument = spec.strip().partition(":")
    return scheme, argument


def spec_schemes() -> str:
    """The schemes a runtime spec may start with, as a user writes them (``openai:...``)."""
    return ", ".join(name if name == "reference" else f"{name}:..." for name in RUNTIME_ADAPTERS.names())


def unknown_runtime(spec: str) -> str | None:
    """Why ``spec`` names no adapter, or None: its scheme is known."""
    if split_spec(spec)[0] in RUNTIME_ADAPTERS:
        return None
    return f"unknown runtime {redacted_spec(spec)!r}: expected one of {spec_schemes()}"


def spec_problems(spec: str, options: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for a spec naming no adapter or options its adapter refuses, without building
    anything: how a declared target is checked when ``runtimes.yaml`` is read."""
    unknown = unknown_runtime(spec)
    if unknown is not None:
        return [("spec", unknown)]
    _, problems = option_problems(RUNTIME_OPTIONS.get(split_spec(spec)[0]), options)
    return [(f"options.{key}", message) for key, message in problems]


def build_runtime(spec: str, options: Mapping[str, Any] | None = None) -> ChatRuntime:
    """The runtime a spec names, checked (:func:`declared_runtime`). Unknown schemes, bad
    arguments and an adapter that builds no well-declared runtime raise RuntimeSpecError."""
    unknown = unknown_runtime(spec)
    if unknown is not None:
        raise RuntimeSpecError(unknown)
    scheme, argument = split_spec(spec)
    return declared_runtime(scheme, RUNTIME_ADAPTERS.get(scheme)(argument, dict(options or {})))


def declared_runtime(scheme: str, built: object) -> ChatRuntime:
    """What the ``scheme`` adapter built, checked once: it has a ChatRuntime's ``spec``,
    ``open_session`` and ``close``, and the :class:`Capabilities` it declares are well formed
    (else RuntimeSpecError naming the adapter and what is wrong). A runtime that declares no
    ``capabilities`` gets the defaults, ``Capabilities()`` (no retry, one session in flight,
    no seed), unless it carries a capability under a name the driver does not read."""
    if isinstance(built, ChatRuntime):
        problems = _capability_problems(built.capabilities, built.open_session)
    else:
        problems = [
            f"has no {name}" for name in ("spec", "open_session", "close") if not hasattr(built, name)
        ]
        problems += [
            f"has {name}, which is not read: declare capabilities = Capabilities(...)"
            for name in ("retry_policy", "preferred_concurrency", "accepts_seed")
            if hasattr(built, name)
        ]
    if problems:
        raise RuntimeSpecError(
            f"runtime adapter {scheme!r} built a {type(built).__name__} that " + "; ".join(problems)
        )
    return built if isinstance(built, ChatRuntime) else _WithDefaults(built)


def _capability_problems(declared: object, open_session: Callable[..., Any]) -> list[str]:
    """What is wrong with a runtime's declared capabilities, given its ``open_session``."""
    if not isinstance(declared, Capabilities):
        return [f"declares capabilities {declared!r}, not a Capabilities"]
    problems: list[str] = []
    if not isinstance(declared.retry, RetryPolicy):
        problems.append(f"declares a retry of {declared.retry!r}, not a RetryPolicy")
    concurrency = declared.concurrency
    if type(concurrency) is not int or concurrency < 1:
        problems.append(f"declares a concurrency of {concurrency!r}, not a whole number of at least 1")
    if type(declared.seeded) is not bool:
        problems.append(f"declares seeded as {declared.seeded!r}, not True or False")
    elif declared.seeded and not _takes_seed(open_session):
        problems.append("declares itself seeded but its open_session takes no seed")
    return problems


def _takes_seed(open_session: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(open_session).parameters.values()
    except (TypeError, ValueError):  # no signature to read: take it at its word
        return True
    return any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class _WithDefaults:
    """A runtime that declares no capabilities, with the defaults: it is never passed a seed."""

    capabilities = Capabilities()

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime

    @property
    def spec(self) -> str:
        return str(self._runtime.spec)

    def open_session(self, session_id: str, seed: int | None = None) -> ChatSession:
        return self._runtime.open_session(session_id)

    def close(self) -> None:
        self._runtime.close()
