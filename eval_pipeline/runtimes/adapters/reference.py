"""``reference`` and its switches (``:no-gloss``, ``:no-refusal``, ``:warm-drift``): the embedded runtime.

Its one option, ``pack``, points it at another concept pack file (a copy under review, say);
by default it answers from the pack that ships with the package.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.options import validate_options
from eval_pipeline.runtimes.reference import ReferenceRuntime
from eval_pipeline.runtimes.reference.pack import load_pack
from eval_pipeline.runtimes.registry import register_runtime

# mode → the switches it turns from the runtime's defaults (glosses and honest refusals on, no warm drift).
_MODES: dict[str, dict[str, bool]] = {
    "": {},
    "gloss": {},
    "no-gloss": {"glosses": False},
    "no-refusal": {"refusals": False},
    "warm-drift": {"warm_drift": True},
}


class ReferenceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pack: str | None = None
    """Path of a concept pack JSON file; default: the embedded pack."""


@register_runtime("reference", ReferenceOptions)
def reference_runtime(argument: str, options: Mapping[str, Any]) -> ReferenceRuntime:
    validated = validate_options("reference", ReferenceOptions, options)
    if argument not in _MODES:
        specs = [repr(f"reference:{mode}" if mode else "reference") for mode in _MODES]
        raise RuntimeSpecError(
            f"unknown reference mode {argument!r}: expected {', '.join(specs[:-1])} or {specs[-1]}"
        )
    try:
        pack = load_pack(validated.pack)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        raise RuntimeSpecError(f"reference pack {validated.pack}: {type(exc).__name__}: {exc}") from None
    return ReferenceRuntime(pack=pack, **_MODES[argument])
