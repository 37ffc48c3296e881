"""Read what a prompt asks: a definition, a cause, a correction (or a plain statement), a
claim's status, a follow-up about an earlier subject, who someone is, one aspect of a term
("What is the chemical structure of X?"), or something else.

Pure functions over the prompt text; the session decides what to answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

IntentKind = Literal["define", "cause", "teach", "status", "anaphora", "who", "aspect", "unknown"]
# What an anaphoric follow-up asks about its (unnamed) subject: more of the same, or why it matters.
AnaphoraAspect = Literal["follow_up", "why_matters"]


@dataclass(frozen=True)
class Intent:
    """What a prompt asks. ``subject`` is None for a status question about "your answer" /
    "this" (the most recent claim) and for every anaphoric follow-up; ``reference`` is the
    pronoun an anaphoric follow-up used."""

    kind: IntentKind
    subject: str | None = None
    claim: str | None = None
    reference: str | None = None
    aspect: AnaphoraAspect | None = None
    detail: str | None = None  # for an ``aspect`` question: which aspect ("chemical structure")


_ARTICLE = r"(?:(?:a|an|the)\s+)?"
_SUBJECT = r"[\"'“]?(?P<subject>[A-Za-z][A-Za-z\-]*(?:\s+[A-Za-z][A-Za-z\-]*){0,2})[\"'”]?"

_TEACH = re.compile(
    rf"^\s*(?:actually,?|correction:)\s*{_ARTICLE}{_SUBJECT}\s+(?:is|means|are)\s+(?P<claim>.+?)\s*[.!]?\s*$",
    re.IGNORECASE,
)
_DEFINE = [
    re.compile(rf"^\s*what\s+(?:is|are)\s+{_ARTICLE}{_SUBJECT}\s*\??\s*$", re.IGNORECASE),
    re.compile(rf"^\s*what\s+does\s+{_ARTICLE}{_SUBJECT}\s+mean\s*\??\s*$", re.IGNORECASE),
    re.compile(rf"^\s*define\s+{_ARTICLE}{_SUBJECT}\s*[.?!]?\s*$", re.IGNORECASE),
    re.compile(rf"^\s*tell\s+me\s+about\s+{_ARTICLE}{_SUBJECT}\s*[.?!]?\s*$", re.IGNORECASE),
]
_CAUSE = [
    re.compile(rf"^\s*why\s+(?:do|does|did)\s+{_ARTICLE}{_SUBJECT}\s+[a-z]+\s*\??\s*$", re.IGNORECASE),
    re.compile(rf"^\s*what\s+causes\s+{_ARTICLE}{_SUBJECT}\s*\??\s*$", re.IGNORECASE),
]
# A status question: "Is your answer confirmed?", "Has this been reviewed?", "Is wisdom
# confirmed?", "Has your answer about wisdom been reviewed?", "Are you sure about that?".
_STATUS = [
    re.compile(
        r"^\s*(?:is|has|was)\s+(?P<target>.+?)\s+(?:been\s+)?(?:confirmed|reviewed|verified|checked)\s*\??\s*$",
        re.IGNORECASE,
    ),
    re.compile(r"^\s*are\s+you\s+sure(?:\s+about\s+(?P<target>.+?))?\s*\??\s*$", re.IGNORECASE),
]
_PRONOUNS = r"(?P<reference>that|it|this)"
# Words that point back at the conversation itself rather than naming a subject.
_REFLEXIVE_TARGET = re.compile(
    r"^(?:(?:your|my|the|that|this)\s+)?(?:last\s+|previous\s+)?(?:answer|claim|reply|definition|correction)$"
    r"|^(?:that|this|it)$",
    re.IGNORECASE,
)
_TARGET_WRAPPER = re.compile(
    r"^(?:(?:your|my|the|that|this)\s+)?(?:last\s+|previous\s+)?(?:answer|claim|reply|definition|correction)"
    r"\s+(?:about|of|for|on)\s+",
    re.IGNORECASE,
)
_ANAPHORA: list[tuple[re.Pattern[str], AnaphoraAspect]] = [
    (re.compile(rf"^\s*(?:and\s+)?what\s+about\s+{_PRONOUNS}\s*\??\s*$", re.IGNORECASE), "follow_up"),
    (
        re.compile(rf"^\s*tell\s+me\s+more(?:\s+about\s+{_PRONOUNS})?\s*[.?!]?\s*$", re.IGNORECASE),
        "follow_up",
    ),
    (
        re.compile(rf"^\s*why\s+(?:does|did|would|should)\s+{_PRONOUNS}\s+matter\s*\??\s*$", re.IGNORECASE),
        "why_matters",
    ),
    (re.compile(rf"^\s*why\s+is\s+{_PRONOUNS}\s+important\s*\??\s*$", re.IGNORECASE), "why_matters"),
]
_WHO = re.compile(r"^\s*[Ww]ho\s+(?:is|was)\s+(?P<subject>[A-Z][\w.\-]*(?:\s+[A-Z][\w.\-]*){0,3})\s*\??\s*$")
_ASPECT = re.compile(
    rf"^\s*what\s+(?:is|are)\s+the\s+(?P<detail>[a-z]+(?:\s+[a-z]+){{0,2}})\s+of\s+{_ARTICLE}{_SUBJECT}\s*\??\s*$",
    re.IGNORECASE,
)
# A plain statement that primes the session ("Meaning is residue of use."): held like a correction.
_STATEMENT = re.compile(
    rf"^\s*{_ARTICLE}{_SUBJECT}\s+(?:is|means)\s+(?P<claim>[^?]+?)\s*[.!]\s*$", re.IGNORECASE
)
_TOPIC_SHIFT = re.compile(rf"^\s*(?:and\s+)?what\s+about\s+{_ARTICLE}{_SUBJECT}\s*\??\s*$", re.IGNORECASE)


def _status_subject(target: str | None) -> str | None:
    """The subject a status question names, or None when it means the most recent claim."""
    if target is None or _REFLEXIVE_TARGET.match(target.strip()):
        return None
    named = _TARGET_WRAPPER.sub("", target.strip())
    named = re.sub(r"^(?:a|an|the)\s+", "", named, flags=re.IGNORECASE)
    return named.strip("\"'“”").lower() or None


def _teach(match: re.Match[str]) -> Intent:
    """A correction or a plain statement: the subject and the claim it makes of it."""
    return Intent("teach", match["subject"].lower(), match["claim"].strip())


def _status(match: re.Match[str]) -> Intent:
    return Intent("status", _status_subject(match["target"]))


def _about_subject(kind: IntentKind) -> Callable[[re.Match[str]], Intent]:
    """An intent of ``kind`` about the (lower-cased) subject the pattern named."""
    return lambda match: Intent(kind, match["subject"].lower())


def _anaphora(aspect: AnaphoraAspect) -> Callable[[re.Match[str]], Intent]:
    """A follow-up asking ``aspect`` of the subject the pronoun points back at."""
    return lambda match: Intent("anaphora", reference=(match["reference"] or "that").lower(), aspect=aspect)


# Every intent's patterns, in the order they are tried: the first one a prompt matches decides.
_READINGS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], Intent]]] = [
    (_TEACH, _teach),
    *((pattern, _status) for pattern in _STATUS),
    *((pattern, _anaphora(aspect)) for pattern, aspect in _ANAPHORA),
    *((pattern, _about_subject("cause")) for pattern in _CAUSE),
    (_WHO, lambda match: Intent("who", match["subject"])),
    (_ASPECT, lambda match: Intent("aspect", match["subject"].lower(), detail=match["detail"].lower())),
    *((pattern, _about_subject("define")) for pattern in [*_DEFINE, _TOPIC_SHIFT]),
    (_STATEMENT, _teach),
]


def read_intent(prompt: str) -> Intent:
    """The first intent whose shape the prompt matches; ``unknown`` when none does."""
    for pattern, reading in _READINGS:
        match = pattern.match(prompt)
        if match:
            return reading(match)
    return Intent("unknown")
