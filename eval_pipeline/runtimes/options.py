"""Runtime options: the ``KEY=VALUE`` pairs a person gives on the command line.

Every adapter factory receives its options as a mapping and validates them itself (a
pydantic model per adapter). This module only turns text into that mapping, the same way
for the CLI (``--runtime-option KEY=VALUE``, repeatable); targets and the Dagster resource
carry options as a mapping already.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from eval_pipeline.core import MAX_CONCURRENCY
from eval_pipeline.runtimes.base import RuntimeSpecError

ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_runtime_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``["model=gpt", "max_retries=3", 'headers={"X-A": "1"}']`` → a dict of options.

    VALUE is parsed as JSON when it parses (numbers, booleans, lists, objects, quoted
    strings) and kept as text otherwise. A later KEY overrides an earlier one.
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise RuntimeSpecError(f"runtime option {pair!r}: expected KEY=VALUE (VALUE may be JSON)")
        try:
            options[key] = json.loads(text)
        except json.JSONDecodeError:
            options[key] = text
    return options


class NoOptions(BaseModel):
    """The options of an adapter that takes none: any option given is reported as unknown."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# Bounds every adapter shares for options of these names, so a typo such as
# ``max_retries=1e9`` or ``timeout_s=1e12`` is bad input instead of a run that never ends.
NUMERIC_BOUNDS: dict[str, tuple[float, float]] = {
    "max_retries": (0, 20),
    "timeout_s": (0.001, 3600.0),
    "backoff_s": (0.0, 600.0),
    "max_backoff_s": (0.0, 3600.0),
    "max_concurrency": (1, MAX_CONCURRENCY),
    "workers": (0, MAX_CONCURRENCY),
}


def bound_problems(options: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, message) for every shared numeric option outside its bounds (types are the model's job)."""
    problems = []
    for key, (low, high) in NUMERIC_BOUNDS.items():
        value = options.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not (math.isfinite(value) and low <= value <= high):
            problems.append((key, f"must be between {low:g} and {high:g}"))
    return problems


def option_problems(
    model: type[ModelT], options: Mapping[str, Any]
) -> tuple[ModelT | None, list[tuple[str, str]]]:
    """``options`` validated strictly against an adapter's model (a number is not text, text is not a
    number) and the shared bounds: the validated options, or None and (key, message) per problem."""
    problems = bound_problems(options)
    try:
        validated = model.model_validate(dict(options), strict=True)
    except ValidationError as exc:
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "(options)"
            if error["type"] == "extra_forbidden":
                known = ", ".join(sorted(model.model_fields)) or "none: this runtime takes no options"
                problems.append((key, f"unknown option (known: {known})"))
            else:
                # The value is not echoed: options may carry header values a log must not show.
                problems.append((key, str(error["msg"])))
        return None, problems
    return (None if problems else validated), problems


def validate_options(scheme: str, model: type[ModelT], options: Mapping[str, Any]) -> ModelT:
    """:func:`option_problems`, raising RuntimeSpecError naming each key."""
    validated, problems = option_problems(model, options)
    if validated is None:
        raise RuntimeSpecError(f"{scheme} runtime options: " + "; ".join(f"{k}: {m}" for k, m in problems))
    return validated
