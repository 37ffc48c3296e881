"""``reference`` and its switches (``:no-gloss``, ``:no-refusal``, ``:warm-drift``): the embedded runtime."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.options import NoOptions, validate_options
from eval_pipeline.runtimes.reference import ReferenceRuntime
from eval_pipeline.runtimes.registry import register_runtime

# mode → the runtime's switches: glosses on/off, honest refusals on/off.
_MODES: dict[str, dict[str, bool]] = {
    "": {},
    "gloss": {},
    "no-gloss": {"glosses": False},
    "no-refusal": {"refusals": False},
    "warm-drift": {"warm_drift": True},
}


@register_runtime("reference")
def reference_runtime(argument: str, options: Mapping[str, Any]) -> ReferenceRuntime:
    validate_options("reference", NoOptions, options)
    if argument not in _MODES:
        raise RuntimeSpecError(
            f"unknown reference mode {argument!r}: expected 'reference', 'reference:no-gloss' "
            "'reference:no-refusal' or 'reference:warm-drift'"
        )
    mode = _MODES[argument]
    return ReferenceRuntime(
        glosses=mode.get("glosses", True),
        refusals=mode.get("refusals", True),
        warm_drift=mode.get("warm_drift", False),
    )
