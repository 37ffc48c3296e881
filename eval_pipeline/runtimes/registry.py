"""Runtime specs: ``scheme[:argument]`` strings that name a ChatRuntime adapter.

``reference`` / ``reference:no-gloss``, ``replay:PATH`` and the adapters for real systems
each register a factory for their scheme. A factory receives the argument after the first
colon and the adapter's options (a mapping it validates itself), and returns a runtime.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any

from eval_pipeline.runtimes.base import ChatRuntime, RuntimeSpecError

RuntimeFactory = Callable[[str, Mapping[str, Any]], ChatRuntime]

_FACTORIES: dict[str, RuntimeFactory] = {}


def register_runtime(scheme: str) -> Callable[[RuntimeFactory], RuntimeFactory]:
    """Decorator: ``@register_runtime("openai")`` on ``factory(argument, options)``."""

    def decorate(factory: RuntimeFactory) -> RuntimeFactory:
        if scheme in _FACTORIES and _FACTORIES[scheme] is not factory:
            raise ValueError(f"runtime scheme {scheme!r} registered twice")
        _FACTORIES[scheme] = factory
        return factory

    return decorate


def split_spec(spec: str) -> tuple[str, str]:
    scheme, _, argument = spec.strip().partition(":")
    return scheme, argument


def build_runtime(spec: str, options: Mapping[str, Any] | None = None) -> ChatRuntime:
    """The runtime a spec names. Unknown schemes and bad arguments raise RuntimeSpecError."""
    _import_adapter_modules()
    scheme, argument = split_spec(spec)
    factory = _FACTORIES.get(scheme)
    if factory is None:
        raise RuntimeSpecError(
            f"unknown runtime {spec!r}: expected one of "
            + ", ".join(f"{name}:..." if name != "reference" else name for name in sorted(_FACTORIES))
        )
    return factory(argument, dict(options or {}))


def known_schemes() -> list[str]:
    _import_adapter_modules()
    return sorted(_FACTORIES)


def _import_adapter_modules() -> None:
    from eval_pipeline.runtimes import adapters

    for module in pkgutil.iter_modules(adapters.__path__):
        importlib.import_module(f"{adapters.__name__}.{module.name}")
