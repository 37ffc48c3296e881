"""Runtime specs: ``scheme[:argument]`` strings that name a ChatRuntime adapter.

``reference`` / ``reference:no-gloss``, ``replay:PATH`` and the adapters for real systems
each register a factory for their scheme. A factory receives the argument after the first
colon and the adapter's options (a mapping it validates itself), and returns a runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from eval_pipeline.registry import Registry
from eval_pipeline.runtimes.base import ChatRuntime, RuntimeSpecError

RuntimeFactory = Callable[[str, Mapping[str, Any]], ChatRuntime]

# One factory per scheme; every module of ``eval_pipeline.runtimes.adapters`` is discovered.
RUNTIME_ADAPTERS: Registry[RuntimeFactory] = Registry("runtime scheme", "eval_pipeline.runtimes.adapters")


def register_runtime(scheme: str) -> Callable[[RuntimeFactory], RuntimeFactory]:
    """Decorator: ``@register_runtime("openai")`` on ``factory(argument, options)``."""
    return RUNTIME_ADAPTERS.register(scheme)


def split_spec(spec: str) -> tuple[str, str]:
    scheme, _, argument = spec.strip().partition(":")
    return scheme, argument


def spec_schemes() -> str:
    """The schemes a runtime spec may start with, as a user writes them (``openai:...``)."""
    return ", ".join(name if name == "reference" else f"{name}:..." for name in RUNTIME_ADAPTERS.names())


def build_runtime(spec: str, options: Mapping[str, Any] | None = None) -> ChatRuntime:
    """The runtime a spec names. Unknown schemes and bad arguments raise RuntimeSpecError."""
    scheme, argument = split_spec(spec)
    if scheme not in RUNTIME_ADAPTERS:
        raise RuntimeSpecError(f"unknown runtime {spec!r}: expected one of {spec_schemes()}")
    return RUNTIME_ADAPTERS.get(scheme)(argument, dict(options or {}))
