"""Structural predicates over a turn's surface (the deterministic_fluency lane's six, and
the shared ones the thread lane reuses). Each is decidable by a substring scan, a regex or
a metadata cross-check; the contract.md of each lane records the choices made here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.predicates.base import TurnView, Verdict, turn_predicate
from eval_pipeline.predicates.columns import (
    Flags,
    TurnColumns,
    VerdictColumns,
    flags,
    once_per_key,
    screened,
    vectorised,
)
from eval_pipeline.predicates.explain import excerpt

PLACEHOLDERS: tuple[str, ...] = ("...", "…", "<pending>", "<prior>", "<empty>")
TERMINALS: tuple[str, ...] = (".", "?", "!", ";")
FINITE_VERBS: frozenset[str] = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "does",
        "do",
        "did",
        "am",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
    ]
)

# The seed's regex used `[^.]+` for the inventory, which cannot match its own dotted example
# (`meta.mental_state.uncertainty; ...`). The authors meant "a bare disclosure sentence and
# nothing else", so the inventory may hold dots; see evals/deterministic_fluency/contract.md.
PROVENANCE_ONLY = re.compile(
    r"^[a-z_]+ [—–-] pack-grounded \([^)]*\):\s*.+?\.\s*"
    r"(?:No session evidence yet|No prior turn in this session to correct yet)\.\s*$",
    re.DOTALL,
)
_DOTTED_PATH = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
_DOTTED = re.compile(_DOTTED_PATH)
DOTTED_INVENTORY = re.compile(rf"{_DOTTED_PATH}(?:\s*;\s*{_DOTTED_PATH}){{2,}}")
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
_CLAIMED_PROVENANCE = re.compile(r"\b(pack|teaching|vault|session)-grounded\b", re.IGNORECASE)
# Suffixes of inflected (finite-looking) verb forms; `-s` only after the first word, and not
# the noun-like endings -ss / -us / -is, so "flows" counts but "glass" does not.
_INFLECTED_ED = re.compile(r"^[a-z]{2,}ed$")
_INFLECTED_S = re.compile(r"^[a-z]{2,}[^su]s$")


def words(surface: str) -> list[str]:
    """Alphabetic tokens (apostrophe contractions kept whole)."""
    return _WORD.findall(surface)


def finite_verb_tokens(surface: str) -> list[str]:
    """Tokens that make a finite predicate: a closed list of auxiliaries, or an inflected form."""
    prose = _DOTTED.sub(" ", surface)  # a domain path like meta.x.y is not prose
    return [token for position, token in enumerate(words(prose)) if _counts(_word_kind(token), position)]


# How a word counts toward a finite predicate: always (an auxiliary, a negated or ``-ed`` form),
# only after a surface's first word (a third-person ``-s`` form), or never.
_NOT_FINITE, _FINITE, _FINITE_AFTER_FIRST = 0, 1, 2


def _word_kind(token: str) -> int:
    lower = token.lower()
    if lower in FINITE_VERBS or lower.endswith("n't") or _INFLECTED_ED.match(lower):
        return _FINITE
    if _INFLECTED_S.match(lower) and token == lower:
        return _FINITE_AFTER_FIRST
    return _NOT_FINITE


def _counts(kind: int, position: int) -> bool:
    """Whether a word of ``kind`` at ``position`` in its surface is a finite verb."""
    return kind == _FINITE or (kind == _FINITE_AFTER_FIRST and position > 0)


@turn_predicate("no_placeholder")
def no_placeholder(turn: TurnView) -> Verdict:
    """The surface contains none of ``...``, ``…``, ``<pending>``, ``<prior>``, ``<empty>``."""
    found = [marker for marker in PLACEHOLDERS if marker in turn.surface]
    if not found:
        return Verdict.ok()
    return Verdict.fail("placeholder_present", found=found, excerpt=excerpt(turn.surface, found[0]))


@turn_predicate("complete_punctuation")
def complete_punctuation(turn: TurnView) -> Verdict:
    """After stripping whitespace the surface ends with ``.``, ``?``, ``!`` or ``;``."""
    stripped = turn.surface.rstrip()
    if stripped.endswith(TERMINALS):
        return Verdict.ok()
    return Verdict.fail("missing_terminal_punctuation", ending=stripped[-12:])


@turn_predicate("finite_predicate_shape")
def finite_predicate_shape(turn: TurnView) -> Verdict:
    """At least one finite verb (closed list) or inflected verb form (``-ed``, third-person ``-s``)."""
    found = finite_verb_tokens(turn.surface)
    if found:
        return Verdict.ok(verbs=found[:5])
    return Verdict.fail("no_finite_verb", excerpt=excerpt(turn.surface))


@turn_predicate("no_provenance_only")
def no_provenance_only(turn: TurnView) -> Verdict:
    """The surface is not a bare ``X — pack-grounded (pack): ... No session evidence yet.`` disclosure."""
    if PROVENANCE_ONLY.match(turn.surface.strip()):
        return Verdict.fail("provenance_only", excerpt=excerpt(turn.surface))
    return Verdict.ok()


@turn_predicate("no_dotted_inventory")
def no_dotted_inventory(turn: TurnView) -> Verdict:
    """No run of three or more dotted-path tokens joined by ``;``."""
    match = DOTTED_INVENTORY.search(turn.surface)
    return Verdict.fail("dotted_inventory", inventory=match.group(0)) if match else Verdict.ok()


def _tag_claim(surface_tag: str | None) -> str | None:
    return surface_tag.lower().removesuffix("-grounded") if surface_tag else None


def _text_claim(surface: str) -> str | None:
    match = _CLAIMED_PROVENANCE.search(surface)
    return match.group(1).lower() if match else None


@turn_predicate("surface_provenance_match", reads=("grounding_source", "surface_tag"))
def surface_provenance_match(turn: TurnView) -> Verdict:
    """The surface tag and any ``X-grounded`` phrase in the text agree with ``grounding_source``.

    A tag counts as agreeing when, minus a ``-grounded`` suffix, it names the grounding
    source, or the source is not a grounded one (none/oov/partial) and the tag claims no
    grounded source either. A surface with neither tag nor phrase claims no provenance, so
    it cannot contradict its grounding source: it passes (code ``no_provenance_claim``).
    The predicate is binary, like every fluency predicate (seed 000).
    """
    return provenance_verdict(turn.grounding_source, turn.surface_tag, _text_claim(turn.surface))


def provenance_verdict(
    grounding_source: str | None, surface_tag: str | None, text_claim: str | None
) -> Verdict:
    """surface_provenance_match's verdict from what it reads: the source, the tag, the text's claim."""
    source = (grounding_source or "none").lower()
    tag = _tag_claim(surface_tag)
    if tag is None and text_claim is None:
        return Verdict(True, "no_provenance_claim", {"grounding_source": source})
    grounded = {"pack", "teaching", "vault", "session"}
    evidence = {"grounding_source": source, "surface_tag": surface_tag, "text_claim": text_claim}
    if text_claim is not None and text_claim != source:
        return Verdict.fail("provenance_mismatch", **evidence)
    if tag is not None and tag != source and (tag in grounded or source in grounded):
        return Verdict.fail("provenance_mismatch", **evidence)
    return Verdict.ok(**evidence)


# --- vectorised forms (the scalar functions above are the reference) ---------------------------


def _none_of(surfaces: pa.Array, needles: Sequence[str]) -> Flags:
    """Per surface: contains none of ``needles`` (plain substrings, as ``in`` finds them), in one
    regex pass over the surfaces (faster than a substring search per needle)."""
    found = pc.match_substring_regex(surfaces, "|".join(re.escape(needle) for needle in needles))
    return flags(pc.invert(found))


def _any_end(surfaces: pa.Array, endings: Sequence[str]) -> Flags:
    ends = pc.ends_with(surfaces, endings[0])
    for ending in endings[1:]:
        ends = pc.or_(ends, pc.ends_with(surfaces, ending))
    return flags(ends)


@vectorised("no_placeholder")
def no_placeholder_columns(turns: TurnColumns) -> VerdictColumns:
    """No marker substring: passes; the rest are judged one by one (their evidence quotes them)."""
    certain = _none_of(turns.surfaces, PLACEHOLDERS)
    return screened("no_placeholder", turns, certain, Verdict.ok())


@vectorised("complete_punctuation")
def complete_punctuation_columns(turns: TurnColumns) -> VerdictColumns:
    """A surface ending on a terminal (no trailing whitespace to strip) passes."""
    ends = _any_end(turns.surfaces, TERMINALS)
    return screened("complete_punctuation", turns, ends, Verdict.ok())


@vectorised("no_provenance_only")
def no_provenance_only_columns(turns: TurnColumns) -> VerdictColumns:
    """A bare disclosure always says `` pack-grounded (``: a surface without it passes."""
    certain = _none_of(turns.surfaces, [" pack-grounded ("])
    return screened("no_provenance_only", turns, certain, Verdict.ok())


@vectorised("no_dotted_inventory")
def no_dotted_inventory_columns(turns: TurnColumns) -> VerdictColumns:
    """An inventory joins three paths with two ``;``: a surface with fewer passes."""
    certain = flags(pc.less(pc.count_substring(turns.surfaces, ";"), 2))
    return screened("no_dotted_inventory", turns, certain, Verdict.ok())


@vectorised("surface_provenance_match")
def surface_provenance_match_columns(turns: TurnColumns) -> VerdictColumns:
    """The text's claim found where a surface says ``-grounded`` in any case (one regex search
    each); the verdict and its evidence once per distinct (source, tag, claim): a run has few
    of those."""
    phrased = flags(pc.match_substring(turns.surfaces, "-grounded", ignore_case=True))
    claims: list[str | None] = [None] * len(turns)  # no such phrase, no claim
    for index in np.flatnonzero(phrased).tolist():
        claims[index] = _text_claim(turns.surface[index])
    keys = zip(turns.grounding_source, turns.surface_tag, claims, strict=True)
    return once_per_key("surface_provenance_match", turns, keys)


MAX_VERBS_SHOWN = 5  # finite_predicate_shape's evidence lists the first five


def holds_dotted_path(turns: TurnColumns) -> Flags:
    """Whether each surface holds a dotted path (one Arrow regex pass): only those need one
    blanked out before their words are read as prose."""
    return flags(pc.match_substring_regex(turns.surfaces, _DOTTED_PATH))


def blank_dotted_paths(surfaces: pa.Array) -> pa.Array:
    """Each surface with its dotted paths blanked out, as :func:`prose_words` reads it (one Arrow pass)."""
    return pc.replace_substring_regex(surfaces, _DOTTED_PATH, " ")


def prose_words(surface: str, dotted: bool) -> list[str]:
    """The words finite verbs are read from (as finite_verb_tokens reads them): ``dotted``, whether
    the surface holds a dotted path, which is blanked out first."""
    return words(_DOTTED.sub(" ", surface) if dotted else surface)


class WordKinds(dict[str, int]):
    """How each word counts toward a finite predicate, classified when first looked up (a
    batch's answers share their words)."""

    def __missing__(self, token: str) -> int:
        kind = self[token] = _word_kind(token)
        return kind


def finite_verbs_shown(prose: Sequence[str], kinds: WordKinds) -> tuple[str, ...]:
    """The first five finite verbs among a surface's ``prose`` words (:func:`prose_words`): any
    word but the first that counts at all, and the first only when it counts wherever it stands."""
    if not prose:
        return ()
    first = [prose[0]] if kinds[prose[0]] == _FINITE else []
    later = [token for token in prose[1:] if kinds[token] != _NOT_FINITE]
    return tuple(first + later[: MAX_VERBS_SHOWN - len(first)])


def counts_as_verb(token: str, kinds: WordKinds) -> tuple[bool, bool]:
    """Whether a word counts toward a finite predicate as a surface's first word, and after it."""
    kind = kinds[token]
    return kind == _FINITE, kind != _NOT_FINITE
