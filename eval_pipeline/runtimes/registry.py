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

from eval_pipeline.core import Registry
from eval_pipeline.runtimes.base import Capabilities, ChatRuntime, RuntimeSpecError
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


def declared_runtime(scheme: str, built: Any) -> ChatRuntime:
    """What the ``scheme`` adapter built, checked once: it has a ChatRuntime's ``spec``,
    ``capabilities`` (a :class:`Capabilities`), ``open_session`` (taking a ``seed`` when it
    declares itself seeded) and ``close``; else RuntimeSpecError naming the adapter and what is
    wrong."""
    problems = [
        f"has no {name}"
        for name in ("spec", "capabilities", "open_session", "close")
        if not hasattr(built, name)
    ]
    declared = getattr(built, "capabilities", None)
    if declared is not None and not isinstance(declared, Capabilities):
        problems.append(f"declares capabilities {declared!r}, not a Capabilities")
    elif isinstance(declared, Capabilities) and declared.seeded and not _takes_seed(built.open_session):
        problems.append("declares itself seeded but its open_session takes no seed")
    if problems:
        raise RuntimeSpecError(
            f"runtime adapter {scheme!r} built a {type(built).__name__} that {'; '.join(problems)} "
            "(see eval_pipeline.runtimes.base: ChatRuntime, Capabilities)"
        )
    assert isinstance(built, ChatRuntime)
    return built


def _takes_seed(open_session: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(open_session).parameters.values()
    except (TypeError, ValueError):  # no signature to read: take it at its word
        return True
    return any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
