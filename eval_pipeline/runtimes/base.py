"""The ChatRuntime adapter boundary: what the pipeline needs from any chat system.

A runtime opens independent sessions; a session answers one prompt at a time. Everything
a runtime says besides the four typed fields travels in ``raw``. What a runtime can do beyond
that it declares (:class:`Capabilities`); a recording is a :class:`RecordedRuntime`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.runtimes.faults import NO_RETRY, RetryPolicy


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


@dataclass(frozen=True)
class Capabilities:
    """What a runtime declares it can do: all the driver reads of it besides its sessions.

    ``retry``: how a transient turn fault is retried (default: never). ``concurrency``: the
    sessions in flight it is built for, what :func:`eval_pipeline.run.drive.drive` keeps in flight
    when not told (default 1). ``seeded``: whether ``open_session`` takes a per-session
    ``seed``; a runtime that does not is never passed one (default). A malformed declaration
    cannot be made (TypeError); that a runtime has one is checked when it is built
    (:func:`eval_pipeline.runtimes.registry.build_runtime`).
    """

    retry: RetryPolicy = NO_RETRY
    concurrency: int = 1
    seeded: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.retry, RetryPolicy):
            raise TypeError(f"Capabilities: retry must be a RetryPolicy, not {self.retry!r}")
        if type(self.concurrency) is not int or self.concurrency < 1:
            raise TypeError(
                f"Capabilities: concurrency must be a whole number of at least 1, not {self.concurrency!r}"
            )
        if type(self.seeded) is not bool:
            raise TypeError(f"Capabilities: seeded must be True or False, not {self.seeded!r}")


@runtime_checkable
class ChatRuntime(Protocol):
    """A chat system under evaluation.

    ``open_session`` must return a conversation that shares no state with any other
    session. ``session_id`` is the case id: adapters may use it (replay looks recorded
    turns up by it, ``exec:`` passes it to the child process) but must not let it change
    the answers of a live runtime. ``seed`` is given only to a runtime whose capabilities
    say it is ``seeded``.
    """

    @property
    def spec(self) -> str:
        """The runtime spec this runtime was built from, with secrets removed."""
        ...

    @property
    def capabilities(self) -> Capabilities: ...

    def open_session(self, session_id: str, seed: int | None = None) -> ChatSession: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class CommittedRun:
    """The committed lane run a recording replays whole: its id, lane and split."""

    run_id: str
    lane: str
    split: str


class RecordedRuntime(ABC):
    """A recording (``replay:``, ``history:``): the driver sends it nothing and opens no session,
    it asks for the answers to every turn of a run at once (:meth:`answers`) and plays every
    sample per case it holds (:attr:`samples_per_case`).

    What a run may ask of it, it declares: a recording of a committed run
    (:attr:`committed_run`, ``history:``) answers that run's lane and split only; any other
    answers the lane runs whose cases it recorded (:attr:`recorded_cases`). Messages name it
    by :attr:`source`."""

    capabilities = Capabilities()
    committed_run: CommittedRun | None = None

    @property
    @abstractmethod
    def source(self) -> str:
        """Where the turns were recorded (a file's path, a committed run), as messages name it."""

    @property
    @abstractmethod
    def recorded_cases(self) -> frozenset[str]:
        """The ids of the cases it recorded a turn of."""

    @property
    @abstractmethod
    def samples_per_case(self) -> int:
        """How many samples per case the recording holds."""

    @abstractmethod
    def answers(self, requests: pa.Table) -> pa.Table:
        """The recorded answer to each turn of ``requests`` (columns ``case_id``,
        ``sample_index``, ``turn_index``, ``prompt``), row for row, in the columns of a
        transcript's answer (:data:`eval_pipeline.runtimes.adapters.replay.ANSWERS`)."""
