"""Read what a prompt asks: a definition, a cause, a correction, or something else.

Pure functions over the prompt text; the session decides what to answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

IntentKind = Literal["define", "cause", "teach", "unknown"]


@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    subject: str | None = None
    claim: str | None = None


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


def read_intent(prompt: str) -> Intent:
    """The first intent whose shape the prompt matches; ``unknown`` when none does."""
    match = _TEACH.match(prompt)
    if match:
        return Intent("teach", match["subject"].lower(), match["claim"].strip())
    for pattern in _CAUSE:
        match = pattern.match(prompt)
        if match:
            return Intent("cause", match["subject"].lower())
    for pattern in _DEFINE:
        match = pattern.match(prompt)
        if match:
            return Intent("define", match["subject"].lower())
    return Intent("unknown")
