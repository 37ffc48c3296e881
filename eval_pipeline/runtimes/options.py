"""Runtime options: the ``KEY=VALUE`` pairs a person gives on the command line.

Every adapter factory receives its options as a mapping and validates them itself (a
pydantic model per adapter). This module only turns text into that mapping, the same way
for the CLI (``--runtime-option KEY=VALUE``, repeatable); targets and the Dagster resource
carry options as a mapping already.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

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


def validate_options(scheme: str, model: type[ModelT], options: Mapping[str, Any]) -> ModelT:
    """``options`` validated against an adapter's model; problems raise RuntimeSpecError naming each key."""
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "(options)"
            if error["type"] == "extra_forbidden":
                known = ", ".join(sorted(model.model_fields))
                problems.append(f"{key}: unknown option (known: {known})")
            else:
                # The value is not echoed: options may carry header values a log must not show.
                problems.append(f"{key}: {error['msg']}")
        raise RuntimeSpecError(f"{scheme} runtime options: " + "; ".join(problems)) from None
