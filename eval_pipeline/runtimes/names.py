"""What a runtime name shown to a person stands for.

A declared target's name says what it is (``reference-no-refusal``). An undeclared spec is
named ``<scheme>-<8 hex of spec and options>`` (:func:`eval_pipeline.runtimes.targets.derived_name`),
which says nothing: wherever such a name is shown it is decoded here, once, to its spec (and
its options, where they are known), redacted like every stored spec.

History keeps both for every committed run: ``run_manifests.runtime_spec`` (redacted) and
``run_manifests.runtime_options`` (:func:`stored_options`: the options redacted, as JSON; null
when the target has none, and in history written before the column). :func:`decoded_runtimes`
decodes the names of such rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
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


def stored_options(options: Mapping[str, Any]) -> str | None:
    """A target's options as history stores them beside its spec: redacted (never a secret),
    as sorted JSON; None when it has none."""
    return json.dumps(redacted_options(options), sort_keys=True, default=str) if options else None


def decoded_runtimes(stored: Iterable[tuple[object, object, object]]) -> dict[str, str]:
    """What each derived name of ``stored`` stands for, by name: ``stored`` holds (runtime,
    runtime_spec, runtime_options) as history keeps them (the options as :func:`stored_options`
    text, or null). A declared name, or one not derived from its spec, is left out."""
    decoded: dict[str, str] = {}
    for name, spec, options in stored:
        stands = decoded_runtime(str(name), spec, _options(options))
        if stands is not None:
            decoded[str(name)] = stands
    return decoded


def _options(text: object) -> Mapping[str, Any] | None:
    if not isinstance(text, str) or not text:  # null: no options, or history kept none
        return None
    try:
        options = json.loads(text)
    except ValueError:
        return None
    return options if isinstance(options, Mapping) else None
