"""Real multi-turn bots for the ``python:`` and ``exec:`` adapter tests.

Each wraps a reference session, so its answers must score exactly like the in-process
reference runtime's; what differs is the shape in which it answers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from eval_pipeline.runtimes.reference import ReferenceRuntime


@dataclass(frozen=True)
class CoreReply:
    """A CORE-style reply: a frozen dataclass with its own field names."""

    text: str
    source: str | None
    tag: str | None
    status: str | None
    turn: int
    turn_log_surface: str | None = None  # the session's telemetry, passed through in raw


class CoreStyleRuntime:
    """A CORE-style ChatRuntime class: one instance per session, ``chat()`` returns a frozen dataclass."""

    # Options that map this bot's reply fields onto TurnResponse's.
    FIELDS: ClassVar[dict[str, str]] = {
        "surface": "text",
        "grounding_source": "source",
        "surface_tag": "tag",
        "epistemic_status": "status",
    }

    def __init__(self) -> None:
        self._session = ReferenceRuntime().open_session("core")
        self._turns = 0

    def chat(self, prompt: str) -> CoreReply:
        response = self._session.send(prompt)
        self._turns += 1
        return CoreReply(
            response.surface,
            response.grounding_source,
            response.surface_tag,
            response.epistemic_status,
            self._turns,
            response.raw.get("turn_log_surface"),
        )


def make_function_bot() -> Callable[[str], dict[str, Any]]:
    """A plain function-based bot: the factory returns a closure that answers with dicts."""
    session = ReferenceRuntime().open_session("function")

    def reply(prompt: str) -> dict[str, Any]:
        response = session.send(prompt)
        return {
            "surface": response.surface,
            "grounding_source": response.grounding_source,
            "surface_tag": response.surface_tag,
            "epistemic_status": response.epistemic_status,
            "turn_log_surface": response.raw.get("turn_log_surface"),
        }

    return reply


class CpuBoundBot:
    """Burns a fixed amount of CPU per turn (hash rounds), then answers like the reference runtime."""

    def __init__(self, rounds: int = 20_000) -> None:
        self._session = ReferenceRuntime().open_session("cpu")
        self._rounds = rounds

    def chat(self, prompt: str) -> dict[str, Any]:
        digest = prompt.encode()
        for _ in range(self._rounds):
            digest = hashlib.sha256(digest).digest()
        response = self._session.send(prompt)
        return {**response.model_dump(exclude={"raw"}), "work": digest.hex()[:8]}


class FlakyBot:
    """Raises on every prompt containing 'zorp' (a bot bug): that turn fails, the rest answer."""

    def __init__(self) -> None:
        self._session = ReferenceRuntime().open_session("flaky")

    def chat(self, prompt: str) -> dict[str, Any]:
        if "zorp" in prompt.lower():
            raise ValueError("flaky bot cannot handle zorps")
        return self._session.send(prompt).model_dump(exclude={"raw"})


def make_untagged_bot() -> Callable[[str], dict[str, Any]]:
    """A bot that reports no surface tag: only the text itself may claim a provenance."""
    session = ReferenceRuntime().open_session("untagged")

    def reply(prompt: str) -> dict[str, Any]:
        response = session.send(prompt)
        return {"surface": response.surface, "grounding_source": response.grounding_source}

    return reply


def make_seeded_bot(seed: int | None = None) -> Callable[[str], str]:
    """A factory that takes a sample's seed and says which seed it was given."""
    return lambda prompt: f"My seed is {seed}."


def make_unruly_bot() -> Callable[[str], str]:
    """A bot that prints as it thinks, and answers a prompt saying SURROGATE with a lone surrogate."""

    def chat(prompt: str) -> str:
        print("thinking about", prompt)
        return "Half a character: \ud800." if "SURROGATE" in prompt else f"You asked: {prompt}"

    return chat
