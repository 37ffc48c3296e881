"""What a runtime name shown to a person stands for.

A declared target's name says what it is (``reference-no-refusal``). An undeclared spec is
named ``<scheme>-<8 hex of spec and options>`` (:func:`eval_pipeline.runtimes.targets.derived_name`),
which says nothing: wherever such a name is shown it is decoded here, once, to its spec (and
its options, where they are known), redacted like every stored spec.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from eval_pipeline.runtimes.redaction import redacted_options, redacted_spec
from eval_pipeline.runtimes.registry import split_spec

_DERIVED = re.compile(r"^(?P<prefix>[a-z0-9_-]+)-[0-9a-f]{8}$")


def derived_prefix(spec: str) -> str:
    """The first part of a derived name: the spec's scheme as a target name may spell it."""
    return re.sub(r"[^a-z0-9_-]", "-", split_spec(spec)[0].lower())[:40] or "runtime"


def decoded_runtime(name: str, spec: object, options: Mapping[str, Any] | None = None) -> str | None:
    """The spec (and options, when given) a derived runtime name stands for; None when ``name``
    is not derived from ``spec`` (a declared target, a re-score, or no spec is known)."""
    if not isinstance(spec, str) or not spec:
        return None
    match = _DERIVED.match(name)
    if match is None or match["prefix"] != derived_prefix(spec):
        return None
    return stands_for(spec, options)


def stands_for(spec: str, options: Mapping[str, Any] | None = None) -> str:
    """A spec and its options as they are shown: redacted, options as sorted JSON."""
    shown = redacted_spec(spec)
    if options:
        shown += " " + json.dumps(redacted_options(options), sort_keys=True)
    return shown
