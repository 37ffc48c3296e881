"""Which answer fields a runtime never supplied, and how to map them: pure functions.

A runtime may answer with a surface only (an OpenAI-compatible server that sends no
``grounding_source``, a bot returning a plain string). Its turns then record those fields as
null. A predicate that reads only fields no answered turn of the run carried (each predicate
declares the telemetry it reads, ``reads=``) says nothing of such a runtime: the run decides
so once (:func:`unsupplied_predicates`), its rows read not applicable and metrics over it are
missing, and the run names those predicates in one line, with how to supply the fields per
adapter. A lane none of whose predicates reads a field says nothing of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from eval_pipeline.predicates.base import TURN_VIEW_COLUMNS
from eval_pipeline.predicates.telemetry import not_supplied

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


def kind_telemetry(kind: object) -> dict[str, list[str]]:
    """:func:`telemetry_readers` of the predicates a lane kind declares (none for a kind that
    declares none, such as i18n_prompt's assertions)."""
    declaration = getattr(kind, "declaration", None)
    if declaration is None:
        return {}
    names = [name for rule in declaration.turn_predicates for name in rule.predicates]
    names += [name for rule in declaration.case_predicates for name in rule.predicates]
    return telemetry_readers(names)


def unsupplied_predicates(kind: object, transcripts: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """The decision, made once per run: which of the kind's predicates read only telemetry the
    runtime supplied on no answered turn of ``transcripts`` (every sample of the run; columns
    ``error`` and the fields), each with the fields it reads. Their rows read not applicable
    (:func:`eval_pipeline.predicates.telemetry.without_telemetry`). None when no turn was answered."""
    readers = kind_telemetry(kind)
    if not readers:
        return {}
    absent = unsupplied_fields(transcripts, list(readers))
    return not_supplied([name for field in absent for name in readers[field]], absent)


def unsupplied_fields(transcripts: pd.DataFrame, fields: Sequence[str] = PREDICATE_READ_FIELDS) -> list[str]:
    """The ``fields`` (default: every one a predicate can read) null on every answered
    (unfaulted) turn."""
    answered = transcripts[transcripts["error"].isna()]
    if answered.empty:
        return []
    return [name for name in fields if answered[name].isna().all()]


def fields_not_supplied(not_supplied: Mapping[str, Sequence[str]]) -> list[str]:
    """The fields named in ``not_supplied`` (predicate → fields the runtime never supplied),
    each once, in the order the predicates name them."""
    return list(dict.fromkeys(name for read in not_supplied.values() for name in read))


def unsupplied_note(not_supplied: Mapping[str, Sequence[str]], scheme: str) -> str:
    """One sentence: which predicates read n/a because the runtime never supplied the telemetry
    they read (``not_supplied``: predicate → fields, the run's decision), and how to supply it."""
    how = _HOW_TO_SUPPLY.get(scheme, "have the runtime supply them")
    fields = fields_not_supplied(not_supplied)
    who = "it reads" if len(not_supplied) == 1 else "they read"
    return (
        f"n/a without runtime telemetry: {', '.join(not_supplied)} ({who} {', '.join(fields)}, "
        f"which the runtime never supplied); {how.format(field=fields[0])}"
    )
