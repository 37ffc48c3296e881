"""Turn faults and the retry policy the driver applies to them.

An adapter raises :class:`TurnFault` when a turn fails in a way it understands (an HTTP
429, a malformed reply, a child process that died). ``transient`` says whether sending the
same turn again may succeed; ``retry_after`` carries a wait the runtime asked for. The
driver owns the one retry loop (:mod:`eval_pipeline.run.drive`); a runtime says how it wants to
be retried in its declared capabilities (``Capabilities.retry``, see
:mod:`eval_pipeline.runtimes.base`). ``kind``, when an adapter sets it, is a stable code for
the fault (e.g. ``timeout``, ``protocol_mismatch``); adapters start the message with it, so
the transcript's ``error`` carries it too.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass

# The call ids an adapter appends to a fault message (`` [x-litellm-call-id: 4f2a…]``): they
# name the call in the gateway's logs and differ on every turn, so faults group without them.
_CALL_ID_SUFFIX = re.compile(r"(?:\s\[[A-Za-z0-9_-]+: [^\[\]]*\])+$")
_CALL_ID = re.compile(r"\[([A-Za-z0-9_-]+): ([^\[\]]*)\]")


def split_call_ids(message: str) -> tuple[str, list[str]]:
    """A fault message without the call ids appended to it, and those ids (``name: value``)."""
    suffix = _CALL_ID_SUFFIX.search(message)
    if suffix is None:
        return message, []
    return message[: suffix.start()], [
        f"{name}: {value}" for name, value in _CALL_ID.findall(suffix.group(0))
    ]


def with_call_ids(message: str, earlier: Iterable[str]) -> str:
    """``message`` carrying the ``earlier`` attempts' call ids before its own, each once."""
    fault, own = split_call_ids(message)
    ids = dict.fromkeys([*earlier, *own])
    return fault + "".join(f" [{call_id}]" for call_id in ids)


class TurnFault(RuntimeError):
    """One turn failed. Recorded in transcripts as ``error``; retried only when ``transient``."""

    def __init__(
        self,
        message: str,
        *,
        transient: bool = False,
        retry_after: float | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after
        self.kind = kind


def is_transient(exc: BaseException) -> bool:
    """Whether sending the same turn again may succeed."""
    if isinstance(exc, TurnFault):
        return exc.transient
    return isinstance(exc, TimeoutError | ConnectionError)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transient turn fault is retried.

    The n-th retry waits ``backoff_s * 2**(n-1)`` (capped at ``max_backoff_s``, with jitter
    in [50%, 100%] so concurrent sessions do not retry in lockstep). When the runtime said how
    long to wait (``Retry-After``) it waits that long instead (capped at ``max_backoff_s``),
    spread over up to a quarter more: a rate limit that names the next free moment is
    honoured, neither cut short nor waited out by a guess.
    """

    max_retries: int = 0
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("retry policy values must be >= 0")

    def delay_s(self, retry_number: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_backoff_s) * random.uniform(1.0, 1.25)
        exponential = min(self.max_backoff_s, self.backoff_s * 2 ** (retry_number - 1))
        return exponential * random.uniform(0.5, 1.0)


NO_RETRY = RetryPolicy()


# What a runtime answers when it is overloaded or rate-limited: send less, later.
THROTTLE_STATUS = frozenset({429, 503})


@dataclass
class AdaptiveLimit:
    """How many requests a target may have in flight, adapted to its throttling (AIMD).

    Starts at ``maximum``. A throttled request (429 / 503) multiplies the limit by ``decrease``
    (never below 1), once per congestion event: the requests already in flight when the limit
    fell were sent under the old limit, so their throttles (``epoch`` older than the current
    one) do not cut it again. Each answered request adds ``1 / limit``, so a whole limit's
    worth of answers raises it by one, up to ``maximum``. ``resume_at`` is the clock time
    before which nothing is sent: the latest ``Retry-After`` a throttle asked for, each
    honoured up to ``max_wait_s`` (as :class:`RetryPolicy` caps it at ``max_backoff_s``), so a
    server asking for hours, or forever, pauses the target no longer than a retry would wait.
    """

    maximum: int
    decrease: float = 0.5
    max_wait_s: float = 30.0
    limit: float = 0.0
    epoch: int = 0
    resume_at: float = 0.0
    backoffs: int = 0

    def __post_init__(self) -> None:
        if self.maximum < 1 or not 0.0 < self.decrease < 1.0 or not self.max_wait_s >= 0.0:
            raise ValueError("an adaptive limit needs maximum >= 1, 0 < decrease < 1 and max_wait_s >= 0")
        self.limit = float(self.maximum)

    @property
    def slots(self) -> int:
        """Requests that may be in flight now."""
        return max(1, int(self.limit))

    def answered(self) -> None:
        self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)

    def throttled(self, sent_in_epoch: int, now: float, retry_after: float | None) -> None:
        if sent_in_epoch == self.epoch:
            self.limit = max(1.0, self.limit * self.decrease)
            self.epoch += 1
            self.backoffs += 1
        if retry_after is not None and retry_after > 0:
            self.resume_at = max(self.resume_at, now + min(retry_after, self.max_wait_s))
