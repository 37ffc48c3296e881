"""Which answer fields a runtime never supplied, and how to map them: pure functions.

A runtime may answer with a surface only (an OpenAI-compatible server that sends no
``grounding_source``, a bot returning a plain string). Its turns then record those fields as
null, and predicates that read them count each as missing (``grounding_source`` as ``none``),
so a lane can fail for what the adapter was never told to read. The run says so: the fields
predicates read (:data:`PREDICATE_READ_FIELDS`) that no answered turn carried, and, per
adapter, how to supply them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from eval_pipeline.predicates.base import TURN_VIEW_COLUMNS

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


def unsupplied_fields(transcripts: pd.DataFrame) -> list[str]:
    """The fields of :data:`PREDICATE_READ_FIELDS` null on every answered (unfaulted) turn."""
    answered = transcripts[transcripts["error"].isna()]
    if answered.empty:
        return []
    return [name for name in PREDICATE_READ_FIELDS if answered[name].isna().all()]


def unsupplied_note(fields: Sequence[str], answered_turns: int, scheme: str) -> str:
    """One sentence: which fields were never supplied, what that does, how to supply them."""
    how = _HOW_TO_SUPPLY.get(scheme, "have the runtime supply them")
    return (
        f"the runtime never supplied {', '.join(fields)} (null on all {answered_turns} answered turns): "
        f"predicates that read them count each as missing; {how.format(field=fields[0])}"
    )
