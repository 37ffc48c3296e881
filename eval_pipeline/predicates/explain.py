"""Reasons a person can act on: one sentence per verdict code, quoting what was found.

Predicates put the offending fragment of the surface in their evidence (``excerpt``, the
markers, the dotted paths, the assertion); :func:`reason` turns a verdict into the
sentence stored as a case predicate's ``message`` and printed by the CLI, the report and
JUnit. One table of templates serves every lane kind, so one code reads the same
everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from eval_pipeline.core import with_truncation
from eval_pipeline.predicates.base import PASS, PREDICATES, TELEMETRY_NOT_SUPPLIED, TURN_ERROR, Verdict

EXCERPT_CHARS = 70


def excerpt(text: str, fragment: str = "", *, width: int = EXCERPT_CHARS) -> str:
    """``text`` on one line, at most about ``width`` characters, centred on ``fragment`` (when
    given and found; else from the start). Cut ends are marked with ``…``, so a reader knows the
    quote is partial."""
    flat = " ".join(text.split())
    part = " ".join(fragment.split())
    at = flat.find(part) if part else -1
    start, end = (at, at + len(part)) if at >= 0 else (0, 0)
    pad = max(0, (width - (end - start)) // 2)
    lo = max(0, start - pad) if at >= 0 else 0
    hi = min(len(flat), max(end + pad, lo + width))
    if hi - lo > width:
        hi = lo + max(width, end - lo)
    return ("…" if lo > 0 else "") + flat[lo:hi] + ("…" if hi < len(flat) else "")


def _quoted(items: Any) -> str:
    values = items if isinstance(items, list | tuple) else [items]
    return ", ".join(f"“{v}”" for v in values)


def _turns(items: Any) -> str:
    return ", ".join(str(item.get("turn_index")) for item in items or [] if isinstance(item, Mapping))


_Template = Callable[[Mapping[str, Any]], str]

# code → sentence from the verdict's evidence. A code missing here gets a generic sentence
# naming the code and the evidence keys, so a new predicate still says something.
_REASONS: dict[str, _Template] = {
    TURN_ERROR: lambda e: f"The runtime call failed, so nothing could be checked: {e.get('error', '?')}",
    "placeholder_present": lambda e: (
        f"The answer contains the placeholder {_quoted(e.get('found', []))}: "
        f"“{e.get('excerpt', '')}”; send real content instead."
    ),
    "missing_terminal_punctuation": lambda e: (
        f"The answer ends without . ? ! or ;: “{e.get('ending', '')}”; finish the sentence."
    ),
    "no_finite_verb": lambda e: (
        f"The answer has no finite verb (a fragment, not a sentence): “{e.get('excerpt', '')}”."
    ),
    "provenance_only": lambda e: (
        f"The answer is only a provenance disclosure with no content: “{e.get('excerpt', '')}”; "
        "answer the question, then cite the source."
    ),
    "dotted_inventory": lambda e: (
        f"The answer lists internal dotted paths instead of prose: “{e.get('inventory', '')}”."
    ),
    "provenance_mismatch": lambda e: (
        f"The answer claims {e.get('text_claim') or e.get('surface_tag') or 'a different'}-grounded but its "
        f"grounding source is {e.get('grounding_source') or 'none'}; make the claim match the source."
    ),
    "ungrounded": lambda e: (
        f"The turn's grounding source is {e.get('grounding_source') or 'none'}, not a grounded one "
        "(pack, teaching, vault, oov, partial)."
    ),
    "too_few_words": lambda e: (
        f"The answer has {e.get('words', 'too few')} word(s), fewer than four: “{e.get('excerpt', '')}”."
    ),
    "too_short": lambda e: (
        f"The answer is {e.get('chars', 'too few')} character(s), under twenty: “{e.get('excerpt', '')}”."
    ),
    "no_status_marker": lambda e: (
        "The probe's answer never says the claim is speculative or not yet reviewed: "
        f"“{e.get('excerpt', '')}”."
    ),
    "bare_assertion": lambda e: (
        f"The answer states “{e.get('assertion', '')}” as fact, with no status marker anywhere."
    ),
    "phantom_status_marker": lambda e: (
        f"Nothing was taught, yet the answer marks a claim as unreviewed: {_quoted(e.get('markers', []))}."
    ),
    "anchor_missing": lambda e: (
        "A follow-up turn neither names what it refers to nor says it cannot resolve the reference "
        f"(turn {_turns(e.get('failing'))}; anchor "
        f"{_quoted([f.get('anchor') for f in e.get('failing', []) if isinstance(f, Mapping)])})."
    ),
    "drift_to_none": lambda e: (
        f"A replayed prompt lost its grounding (turn {_turns(e.get('drifted'))} fell to none "
        "after an earlier grounded answer)."
    ),
    "no_refusal": lambda e: f"Did not refuse a term it cannot ground: “{e.get('excerpt', '')}”.",
    "fabricated_definition": lambda e: (
        f"Defines (“{e.get('shape', '')}”) a term it cannot ground: “{e.get('excerpt', '')}”; "
        "say it is unknown instead."
    ),
    "refused_groundable": lambda e: (
        f"Refused ({_quoted(e.get('markers', []))}) a question it can ground: “{e.get('excerpt', '')}”."
    ),
    "empty_answer": lambda e: "The answer is empty.",
    "telemetry_mismatch": lambda e: (
        f"The answer sent (“{excerpt(str(e.get('surface', '')))}”) differs from the one the runtime "
        f"logged (“{excerpt(str(e.get('logged', '')))}”)."
    ),
    "grounding_lost": lambda e: (
        f"Asked again in the warm session, a prompt first grounded in {e.get('first_source', '?')} "
        f"fell to {e.get('source', '?')}."
    ),
    "fragment_on_warm": lambda e: (
        f"Asked again in the warm session, a prompt first grounded in {e.get('first_source', '?')} "
        f"got a walk fragment: “{e.get('excerpt', '')}”."
    ),
    "grounding_changed": lambda e: (
        "The same prompt got different grounding sources across the session: "
        f"{', '.join(str(s) for s in e.get('sources', []))}."
    ),
    "contract_failed": lambda e: f"Predicates the case lists fail: {', '.join(e.get('failing', []))}.",
    "no_scored_turn": lambda e: "The transcript has no scored turn for this case (the turn is missing).",
    "no_probe_turn": lambda e: "The transcript has no probe turn for this case (the turn is missing).",
}


# not-applicable code → why no row qualified when every row of a metric had that code (a void
# check's reason); a code missing here says so in general words.
_NOT_APPLICABLE_WHY: dict[str, str] = {
    "no_telemetry": "no {row} carried telemetry",
    TELEMETRY_NOT_SUPPLIED: "the runtime supplied none of the telemetry it reads",
    "first_ask": "every {row} was a prompt's first ask",
    "first_ask_not_grounded": "no prompt asked again was grounded at its first ask",
    "repeat": "every {row} repeated an earlier prompt",
    "asked_once": "no prompt was asked twice",
    "no_anaphora": "no {row} had a follow-up that refers back",
    "no_grounded_replay": "no {row} replayed a prompt grounded before",
}


def not_applicable_why(code: str, rows: str) -> str:
    """Why no row (``rows``: ``cases`` or ``turns``) qualified, all of them being ``code``."""
    row = rows.removesuffix("s")
    template = _NOT_APPLICABLE_WHY.get(code, "no {row} it reads applied")
    return template.format(row=row)


def reason(predicate: str, verdict: Verdict) -> str:
    """The sentence stored as ``message``: why ``predicate`` passed, failed or did not apply.
    A failure on a turn the runtime cut at its token limit says so (evidence ``finish_reason``):
    the answer may fail only because it was never finished."""
    if verdict.passed is None and verdict.code == TELEMETRY_NOT_SUPPLIED:
        fields = ", ".join(PREDICATES.get(predicate).reads)
        return f"{predicate} does not apply: the runtime supplied none of the telemetry it reads ({fields})."
    if verdict.passed is None:
        return f"{predicate} does not apply here ({verdict.code.replace('_', ' ')})."
    if verdict.passed or verdict.code == PASS:
        return f"{predicate} holds."
    cut = verdict.evidence.get("finish_reason")
    template = _REASONS.get(verdict.code)
    if template is not None:
        return with_truncation(template(verdict.evidence), cut)
    keys = ", ".join(f"{k}={v}" for k, v in sorted(verdict.evidence.items()) if k != "finish_reason")
    return with_truncation(
        f"{predicate} fails ({verdict.code.replace('_', ' ')})" + (f": {keys}." if keys else "."), cut
    )
