"""``reference`` and ``reference:no-gloss``: the embedded deterministic runtime."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.options import NoOptions, validate_options
from eval_pipeline.runtimes.reference import ReferenceRuntime
from eval_pipeline.runtimes.registry import register_runtime

_MODES = {"": True, "gloss": True, "no-gloss": False}


@register_runtime("reference")
def reference_runtime(argument: str, options: Mapping[str, Any]) -> ReferenceRuntime:
    validate_options("reference", NoOptions, options)
    if argument not in _MODES:
        raise RuntimeSpecError(
            f"unknown reference mode {argument!r}: expected 'reference' or 'reference:no-gloss'"
        )
    return ReferenceRuntime(glosses=_MODES[argument])
