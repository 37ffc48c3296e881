"""The words of many surfaces read together by Arrow: how many each holds and the finite verbs
it shows; with them, the vectorised forms of finite_predicate_shape and not_walk_fragment.

A surface is cut into runs of the characters a word is made of (ASCII letters and the two
apostrophes) with one Arrow regex split. A run without an apostrophe is one word, as
:func:`eval_pipeline.predicates.surface.words` finds it; so is a run like ``don't``. A run
with an apostrophe at its edge, or with two, could hold another cut: the surface holding it is
left unread, for the caller to read the scalar way. Each distinct word of the batch is then
classified once, and a surface's shown verbs are numbered (the same verbs, the same number).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.predicates.columns import (
    Flags,
    Numbers,
    TurnColumns,
    VerdictColumns,
    flags,
    numbers,
    once_per_key,
    vectorised,
)
from eval_pipeline.predicates.surface import (
    MAX_VERBS_SHOWN,
    WordKinds,
    blank_dotted_paths,
    counts_as_verb,
    finite_verbs_shown,
    holds_dotted_path,
    prose_words,
    words,
)
from eval_pipeline.predicates.thread import MIN_ALPHA_TOKENS

# Runs of characters no word holds: what a surface is split on.
_BETWEEN_WORDS = "[^A-Za-z'’]+"
# A run that is exactly one word (letters, then at most one apostrophe and letters).
_ONE_WORD = "^[A-Za-z]+(?:['’][A-Za-z]+)?$"
_JOIN = "\x00"  # joins a surface's shown verbs into one text (no word holds it)


@dataclass(frozen=True)
class WordColumns:
    """Per surface: whether it was read (else: read it the scalar way), how many words it
    holds, and the number of its shown verbs in ``verbs`` (the first five finite ones)."""

    read: Flags
    count: Numbers
    shown: Numbers
    verbs: list[tuple[str, ...]]


def word_columns(texts: pa.Array, kinds: WordKinds) -> WordColumns:
    """The words of each of ``texts`` (see the module's docstring)."""
    size = len(texts)
    runs = pc.split_pattern_regex(texts, _BETWEEN_WORDS)
    flat = pc.list_flatten(runs)
    owner = numbers(pc.list_parent_indices(runs))
    filled = flags(pc.greater(pc.binary_length(flat), 0))
    marked = np.flatnonzero(flags(pc.or_(pc.match_substring(flat, "'"), pc.match_substring(flat, "’"))))
    whole = flags(pc.match_substring_regex(flat.take(pa.array(marked, pa.int64())), _ONE_WORD))
    read = np.ones(size, dtype=bool)
    read[owner[marked[~whole]]] = False
    kept = np.flatnonzero(filled & read[owner])
    tokens, of_token = flat.take(pa.array(kept, pa.int64())), owner[kept]
    count: Numbers = np.bincount(of_token, minlength=size).astype(np.int64)
    found = tokens.dictionary_encode()
    counting = np.array([counts_as_verb(word, kinds) for word in found.dictionary.to_pylist()], dtype=bool)
    counting = counting.reshape(-1, 2)  # (as a surface's first word, after it)
    first = np.ones(len(of_token), dtype=bool)
    first[1:] = of_token[1:] != of_token[:-1]
    word = numbers(found.indices)
    verb = np.flatnonzero(np.where(first, counting[word, 0], counting[word, 1])) if len(word) else word
    of_verb = of_token[verb]
    starts = np.flatnonzero(np.r_[True, of_verb[1:] != of_verb[:-1]]) if len(verb) else verb
    rank = np.arange(len(verb)) - np.repeat(starts, np.diff(np.r_[starts, len(verb)]))
    verb, of_verb = verb[rank < MAX_VERBS_SHOWN], of_verb[rank < MAX_VERBS_SHOWN]
    offsets = np.r_[0, np.cumsum(np.bincount(of_verb, minlength=size))].astype(np.int32)
    values = tokens.take(pa.array(verb, pa.int64())).cast(pa.string())  # what binary_join takes
    shown = pa.ListArray.from_arrays(pa.array(offsets), values)
    joined = pc.binary_join(shown, _JOIN).dictionary_encode()
    verbs = [tuple(text.split(_JOIN)) if text else () for text in joined.dictionary.to_pylist()]
    return WordColumns(read, count, numbers(joined.indices), verbs)


@vectorised("finite_predicate_shape")
def finite_predicate_shape_columns(turns: TurnColumns) -> VerdictColumns:
    """The verbs shown decide a passing verdict: it is made once per distinct verbs; a surface
    without a verb has its own (its evidence quotes it). A surface's words are read with its
    dotted paths blanked out, by Arrow, or the scalar way where Arrow leaves it unread."""
    kinds = WordKinds()
    found = word_columns(blank_dotted_paths(turns.surfaces), kinds)
    shown = _with_verbs(found)
    keys = _keys(shown, found.read & (shown >= 0))
    for index in np.flatnonzero(~found.read).tolist():
        keys[index] = finite_verbs_shown(prose_words(turns.surface[index], True), kinds) or -index - 1
    return once_per_key("finite_predicate_shape", turns, keys)


@vectorised("not_walk_fragment")
def not_walk_fragment_columns(turns: TurnColumns) -> VerdictColumns:
    """The word count and the verbs shown decide a passing verdict (a fragment's evidence
    quotes it). Arrow reads a surface's words where they are its prose (no dotted path to
    blank out); the others are read the scalar way."""
    kinds = WordKinds()
    found = word_columns(turns.surfaces, kinds)
    read = found.read & ~holds_dotted_path(turns)
    shown = _with_verbs(found)
    passing = read & (found.count >= MIN_ALPHA_TOKENS) & (shown >= 0)
    keys = _keys(found.count * len(found.verbs) + shown, passing)  # (word count, verbs) as one number
    for index in np.flatnonzero(~read).tolist():
        counted = words(turns.surface[index])
        prose = prose_words(turns.surface[index], True)
        verbs = finite_verbs_shown(prose, kinds) if len(counted) >= MIN_ALPHA_TOKENS else ()
        keys[index] = (len(counted), verbs) if verbs else -index - 1
    return once_per_key("not_walk_fragment", turns, keys)


def _with_verbs(found: WordColumns) -> Numbers:
    """Per surface, the number of its shown verbs, or -1 when it shows none."""
    shows = np.array([bool(verbs) for verbs in found.verbs], dtype=bool)
    return np.where(shows[found.shown], found.shown, -1) if len(found.shown) else found.shown


def _keys(key: Numbers, passing: Flags) -> list[Hashable]:
    """once_per_key's keys: ``key`` where a surface passes, a key of its own elsewhere (a
    negative number; the caller replaces those of the surfaces Arrow left unread)."""
    keys: list[Hashable] = np.where(passing, key, -np.arange(len(key), dtype=np.int64) - 1).tolist()
    return keys
