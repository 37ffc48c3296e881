"""Why a runtime stopped generating an answer (its ``finish_reason``), read once for every surface.

OpenAI-compatible servers say ``stop``, ``length`` (cut at the token limit), ``content_filter``
or ``tool_calls``; an adapter passes what the reply said in ``raw``, and a runtime that says
nothing leaves it null. An answer cut at the token limit can fail a predicate only because it
was never finished, so a failing verdict on such a turn says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The finish reason of an answer the runtime cut at its token limit (``max_tokens``).
TOKEN_LIMIT = "length"
FINISH_REASON_CHARS = 64  # a finish reason is a short word; anything longer is not one


def finish_reason(raw: Mapping[str, Any]) -> str | None:
    """Why the runtime stopped generating, as its reply's ``raw["finish_reason"]`` said; None
    when it said nothing that reads as one."""
    value = raw.get("finish_reason")
    if not isinstance(value, str) or not value or len(value) > FINISH_REASON_CHARS:
        return None
    return value


def with_truncation(sentence: str, reason: Any) -> str:
    """A failing verdict's ``sentence``, said first to be about an answer cut at the token limit
    when ``reason`` (its turn's finish reason) is :data:`TOKEN_LIMIT`: a cut-off list of reasons
    still shows it."""
    if reason != TOKEN_LIMIT:
        return sentence
    return f"Cut at the token limit (finish_reason={TOKEN_LIMIT}): {sentence}"
