"""The ChatRuntime adapter boundary: what the pipeline needs from any chat system.

A runtime opens independent sessions; a session answers one prompt at a time. Everything
a runtime says besides the four typed fields travels in ``raw``.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class TurnResponse(BaseModel):
    """One turn's answer, as the pipeline records it."""

    model_config = ConfigDict(frozen=True)

    surface: str
    grounding_source: str | None = None
    surface_tag: str | None = None
    epistemic_status: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict)


def not_unicode_text(response: TurnResponse) -> str | None:
    """The first field of ``response`` holding text that UTF-8 cannot carry (a lone surrogate,
    which a Python bot or a JSON ``\\ud800`` escape can produce), else None. Such a turn is
    that turn's fault: the text could be neither stored nor shown."""
    for name in ("surface", "grounding_source", "surface_tag", "epistemic_status"):
        value = getattr(response, name)
        if value is not None and not _encodes(value):
            return name
    if response.raw and not _encodes(json.dumps(response.raw, ensure_ascii=False, default=str)):
        return "raw"
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class RuntimeSpecError(ValueError):
    """A runtime spec string, or the input a runtime was pointed at, is unusable.

    This is bad input (exit code 2), raised before or instead of evaluating anything.
    It is never recorded as a turn fault.
    """


@runtime_checkable
class ChatSession(Protocol):
    """One conversation. Turns of a session are sent strictly in order."""

    def send(self, prompt: str) -> TurnResponse: ...

    def close(self) -> None: ...


@runtime_checkable
class ChatRuntime(Protocol):
    """A chat system under evaluation.

    ``open_session`` must return a conversation that shares no state with any other
    session. ``session_id`` is the case id: adapters may use it (replay looks recorded
    turns up by it, ``exec:`` passes it to the child process) but must not let it change
    the answers of a live runtime.
    """

    @property
    def spec(self) -> str:
        """The runtime spec this runtime was built from, with secrets removed."""
        ...

    def open_session(self, session_id: str) -> ChatSession: ...

    def close(self) -> None: ...
