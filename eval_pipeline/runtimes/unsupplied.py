"""Which answer fields a runtime never supplied, and how to map them: pure functions.

A runtime may answer with a surface only (an OpenAI-compatible server that sends no
``grounding_source``, a bot returning a plain string). Its turns then record those fields as
null, and predicates that read them count each as missing (``grounding_source`` as ``none``),
so a lane can fail for what the adapter was never told to read. The run says so: the fields
the lane's predicates read (each predicate declares the telemetry it reads, ``reads=``) that no
answered turn carried, which of its predicates read them, and, per adapter, how to supply them.
A lane none of whose predicates reads a field says nothing of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from eval_pipeline.predicates.base import TURN_VIEW_COLUMNS

if TYPE_CHECKING:
    from eval_pipeline.lanes import LaneSpec

# The TurnResponse fields besides the surface that a predicate can read (what a TurnView holds).
PREDICATE_READ_FIELDS: tuple[str, ...] = tuple(
    name for name in ("grounding_source", "surface_tag", "epistemic_status") if name in TURN_VIEW_COLUMNS
)

# How each adapter is given a field, by spec scheme ("{field}" is the field's name).
_HOW_TO_SUPPLY = {
    "openai": 'map them to the response with -o \'response_fields={{"{field}": "<dotted path>"}}\' '
    "(default path: choices.0.message.{field})",
    "python": 'name the bot\'s attribute or key with -o \'fields={{"{field}": "<name>"}}\'',
    "exec": "send them as keys of each reply line",
    "replay": "record them as columns of the recording",
}


def telemetry_readers(predicates: Sequence[str]) -> dict[str, list[str]]:
    """Each telemetry field of :data:`PREDICATE_READ_FIELDS` that some of ``predicates`` read →
    those predicates, in order (a lane's: what it needs beyond the surface)."""
    from eval_pipeline.predicates import PREDICATES

    readers: dict[str, list[str]] = {}
    for name in dict.fromkeys(predicates):
        for field in PREDICATES.get(name).reads:
            if field in PREDICATE_READ_FIELDS:
                readers.setdefault(field, []).append(name)
    return {field: readers[field] for field in PREDICATE_READ_FIELDS if field in readers}


def lane_telemetry(lane: str | LaneSpec) -> dict[str, list[str]]:
    """:func:`telemetry_readers` of the predicates lane ``lane`` (a name, looked up among the
    project's lanes, or the lane's spec) declares (none for a lane kind that declares none, such
    as i18n_prompt's assertions; every field, read by unnamed predicates, for a lane not found)."""
    from eval_pipeline.lanes.registry import find_lane, lane_kind

    try:
        kind = lane_kind(find_lane(lane) if isinstance(lane, str) else lane)
    except (KeyError, ValueError, LookupError):
        return {field: [] for field in PREDICATE_READ_FIELDS}
    declaration = getattr(kind, "declaration", None)
    if declaration is None:
        return {}
    names = [name for rule in declaration.turn_predicates for name in rule.predicates]
    names += [name for rule in declaration.case_predicates for name in rule.predicates]
    return telemetry_readers(names)


def unsupplied_fields(transcripts: pd.DataFrame, fields: Sequence[str] = PREDICATE_READ_FIELDS) -> list[str]:
    """The ``fields`` (default: every one a predicate can read) null on every answered
    (unfaulted) turn."""
    answered = transcripts[transcripts["error"].isna()]
    if answered.empty:
        return []
    return [name for name in fields if answered[name].isna().all()]


def unsupplied_note(
    fields: Sequence[str],
    answered_turns: int,
    scheme: str,
    readers: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """One sentence: which fields were never supplied, which predicates (``readers``) read them
    and what that does, how to supply them."""
    how = _HOW_TO_SUPPLY.get(scheme, "have the runtime supply them")
    named = list(dict.fromkeys(p for field in fields for p in (readers or {}).get(field, ())))
    who = (
        f"{', '.join(named)} read {'it' if len(fields) == 1 else 'them'}"
        if named
        else "predicates that read them"
    )
    return (
        f"the runtime never supplied {', '.join(fields)} (null on all {answered_turns} answered turns): "
        f"{who} and count each as missing; {how.format(field=fields[0])}"
    )
