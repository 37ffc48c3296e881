"""Drive a ChatRuntime over threads and record every turn as a transcript row.

One fresh session per case; turns of a case are sent in order within its session;
sessions run concurrently up to ``concurrency``. Threads that name one ``session`` (a lane
declared with a warm session) share it: their cases are played one after another, in order,
in that one session. A turn that raises is retried when the
fault is transient and the retry policy allows, then recorded with its ``error`` and
``attempts``; the case's remaining turns still run and other sessions never notice: faults
are data, never dropped. Rows come back sorted by (case_id, sample_index, turn_index)
whatever the completion order, so a concurrent run's table equals a serial run's.

With ``repeat`` N every session is played N times, each sample in a fresh session; with a
run ``seed``, sample i of a session is sent with the seed derived from (run seed, case or
session, i) to a runtime that takes one (its capabilities say ``seeded``), and the seed is
recorded per turn.

A ``ledger`` (:class:`SessionLedger`, see :mod:`eval_pipeline.run.ledger`) is asked about each
session before it is sent: a session it already holds answers (the journal of an interrupted
run) is not sent, one its budget no longer allows is not started (its rows are left out), and
every session sent is handed to it once it ends.

A recording (``replay:``, ``history:``, a :class:`RecordedRuntime`) is not sent anything: it
answers every turn at once (its ``answers``), the turns joined to what was recorded for them,
and since no call is made no latency is measured (``latency_ms`` is null).

With a response ``cache`` (:mod:`eval_pipeline.runtimes.cache`) a sample of a session whose
request was answered before is recorded from it (``cached``, no latency, no attempt) and a
sample answered in full is stored. A turn's tokens come from its reply's ``usage`` and its
``cost`` from the target's ``price`` (:mod:`eval_pipeline.metrics.usage`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.core import finish_reason
from eval_pipeline.lanes.kind import Thread, TurnRequest, requests_of_threads
from eval_pipeline.metrics import Price, TurnUsage, UsageFault, derive_seed, turn_usage
from eval_pipeline.runtimes.base import (
    ChatRuntime,
    ChatSession,
    RecordedRuntime,
    RuntimeSpecError,
    TurnResponse,
    not_unicode_text,
)
from eval_pipeline.runtimes.cache import ResponseCache
from eval_pipeline.runtimes.faults import (
    RetryPolicy,
    TurnFault,
    is_transient,
    split_call_ids,
    with_call_ids,
)
from eval_pipeline.tables import TRANSCRIPTS, frame, lane_columns, nullable_types

TurnCallback = Callable[[dict[str, Any]], None]
StartCallback = Callable[[int], None]

TRANSCRIPT_COLUMNS = lane_columns(TRANSCRIPTS)


class SessionLedger(Protocol):
    """What a run already holds and may still spend, asked session by session (from worker threads)."""

    def answered(self, key: str, sample_index: int, threads: Sequence[Thread]) -> list[dict[str, Any]] | None:
        """The rows already recorded for this session, or None: send it."""

    def may_start(self) -> bool:
        """Whether a session not yet answered may be sent."""

    def completed(self, key: str, sample_index: int, rows: list[dict[str, Any]]) -> None:
        """A session sent here has ended: these are its rows."""

    def raise_if_stopped(self) -> None:
        """Raises when the run must not go on (its budget left sessions unsent)."""


@dataclass(frozen=True)
class Sending:
    """How turns are sent: ``concurrency`` sessions in flight (None: the runtime's declared
    ``capabilities.concurrency``), ``repeat`` samples of each session (each in a fresh one), sample
    i sent with the seed derived from the run ``seed``, transient faults retried by ``retry``
    (None: the runtime's declared ``capabilities.retry``)."""

    concurrency: int | None = 1
    repeat: int = 1
    seed: int | None = None
    retry: RetryPolicy | None = None


@dataclass(frozen=True)
class Books:
    """The books a run keeps as it sends: its ``ledger`` (the journal it resumes from and the
    budget it spends), its response ``cache``, and the ``price`` each turn's tokens cost."""

    ledger: SessionLedger | None = None
    cache: ResponseCache | None = None
    price: Price | None = None


@dataclass(frozen=True)
class TurnFacts:
    """What is known of one turn once it was sent (or not): its answer's fields, how long it
    took, how many attempts, its fault, its raw answer (JSON text) and its usage."""

    surface: str | None = None
    grounding_source: str | None = None
    surface_tag: str | None = None
    epistemic_status: str | None = None
    latency_ms: float | None = None
    attempts: int = 1
    error: str | None = None
    raw: str | None = None
    usage: TurnUsage = field(default_factory=lambda: TurnUsage(None, None, None))
    finish_reason: str | None = None


def session_key(threads: Sequence[Thread]) -> str:
    """What names a session: its ``session`` (a warm one), else its one case's id."""
    return threads[0].session or threads[0].case_id


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def send_with_retries(
    session: ChatSession, prompt: str, retry: RetryPolicy
) -> tuple[TurnResponse | None, str | None, int, list[str]]:
    """Send one turn, retrying transient faults: (response or None, the fault's text or None,
    attempts, the fault of every attempt that was retried). The text is the last attempt's
    fault, carrying every attempt's call ids."""
    attempts = 0
    call_ids: list[str] = []
    retried: list[str] = []
    while True:
        attempts += 1
        try:
            return session.send(prompt), None, attempts, retried
        except RuntimeSpecError:
            raise
        except Exception as exc:
            if attempts > retry.max_retries or not is_transient(exc):
                return None, with_call_ids(_error_text(exc), call_ids), attempts, retried
            call_ids += split_call_ids(str(exc))[1]
            retried.append(_error_text(exc))
            time.sleep(retry.delay_s(attempts, getattr(exc, "retry_after", None)))


def open_sample_session(runtime: ChatRuntime, key: str, sample_index: int, seed: int | None) -> ChatSession:
    """A fresh session for one sample; the seed goes to runtimes that take one."""
    session_id = key if sample_index == 0 else f"{key}~{sample_index}"  # unique per live session
    if seed is not None and runtime.capabilities.seeded:
        return runtime.open_session(session_id, seed=seed)
    return runtime.open_session(session_id)


def run_session(
    runtime: ChatRuntime,
    threads: Sequence[Thread],
    on_turn: TurnCallback | None = None,
    *,
    retry: RetryPolicy | None = None,
    sample_index: int = 0,
    run_seed: int | None = None,
    cache: ResponseCache | None = None,
    price: Price | None = None,
) -> list[dict[str, Any]]:
    """Send every turn of ``threads``, in order, in one session; one row per turn, faults included."""
    retry = retry or runtime.capabilities.retry
    rows: list[dict[str, Any]] = []
    key = session_key(threads)
    seed = None if run_seed is None else derive_seed(run_seed, key, sample_index)

    def record(row: dict[str, Any]) -> None:
        row["sample_index"] = sample_index
        row.setdefault("seed", seed)
        try:
            row["cost"] = (
                None if price is None else price.cost(row["prompt_tokens"], row["completion_tokens"])
            )
        except UsageFault as fault:
            row["cost"], row["error"] = None, row["error"] or _error_text(fault)
        rows.append(row)
        if on_turn:
            on_turn(row)

    asked = [(thread.case_id, turn) for thread in threads for turn in thread.turns]
    request = None
    if cache is not None:
        request = cache.request(
            key, sample_index, seed, [_request_of(case_id, turn) for case_id, turn in asked]
        )
        answers = cache.answers(request)
        if answers is not None:
            for (case_id, turn), answer in zip(asked, answers, strict=True):
                record(
                    {
                        **_row(
                            case_id,
                            turn,
                            TurnFacts(attempts=0, finish_reason=_finish_reason_of(answer["raw"])),
                        ),
                        **answer,
                        "cached": True,
                    }
                )
            return rows

    try:
        session = open_sample_session(runtime, key, sample_index, seed)
    except RuntimeSpecError:
        raise
    except Exception as exc:  # a session that cannot open fails every one of its turns
        for thread in threads:
            for turn in thread.turns:
                record(_row(thread.case_id, turn, TurnFacts(error=_error_text(exc))))
        return rows
    try:
        for case_id, turn in asked:
            record(_send(session, case_id, turn, retry))
    finally:
        with contextlib.suppress(Exception):  # a session that fails to close has already answered
            session.close()
    if cache is not None and request is not None and all(row["error"] is None for row in rows):
        cache.store(request, rows)
    return rows


def _request_of(case_id: str, turn: TurnRequest) -> tuple[str, int, str, str]:
    """What identifies a turn's request (the cache's ``REQUEST_FIELDS``, in order)."""
    return (case_id, turn.turn_index, turn.role, turn.prompt)


def _send(session: ChatSession, case_id: str, turn: TurnRequest, retry: RetryPolicy) -> dict[str, Any]:
    started = time.perf_counter()
    response, error, attempts, retried = send_with_retries(session, turn.prompt, retry)
    latency_ms = (time.perf_counter() - started) * 1000.0
    unencodable = None if response is None else not_unicode_text(response)
    if unencodable is not None:
        response, error = (
            None,
            _error_text(
                TurnFault(
                    f"malformed_reply: {unencodable!r} is not Unicode text (it holds a lone surrogate)",
                    kind="malformed_reply",
                )
            ),
        )
    if response is None:
        return _row(
            case_id,
            turn,
            TurnFacts(
                latency_ms=latency_ms,
                attempts=attempts,
                error=error or "no response",
                raw=_raw_text({"retries": retried}) if retried else None,
            ),
        )
    raw = dict(response.raw)
    if retried:  # every retry is recorded on its turn
        raw["retries"] = retried
    # An adapter that retries internally reports its own attempts for the last send.
    attempts += int(raw.pop("attempts", 1)) - 1
    recorded_seed = raw.pop("seed", None)  # a replayed answer says which seed it was produced with
    try:
        usage = turn_usage(raw)
    except UsageFault as fault:  # the answer is kept; the turn is its usage's fault
        usage, error = TurnUsage(None, None, None), _error_text(fault)
    row = _row(
        case_id,
        turn,
        TurnFacts(
            surface=response.surface,
            grounding_source=response.grounding_source,
            surface_tag=response.surface_tag,
            epistemic_status=response.epistemic_status,
            latency_ms=latency_ms,
            attempts=attempts,
            error=error,
            raw=_raw_text(raw) if raw else None,
            usage=usage,
            finish_reason=finish_reason(raw),
        ),
    )
    if recorded_seed is not None:
        row["seed"] = int(recorded_seed)
    return row


def _raw_text(raw: dict[str, Any]) -> str:
    return json.dumps(raw, sort_keys=True, ensure_ascii=False, default=str)


def _finish_reason_of(raw_text: str | None) -> str | None:
    """The finish reason a stored ``raw`` (JSON text: a cached or recorded answer's) holds."""
    if not raw_text:
        return None
    try:
        raw = json.loads(raw_text)
    except ValueError:
        return None
    return finish_reason(raw) if isinstance(raw, dict) else None


def recording_of(runtime: ChatRuntime) -> RecordedRuntime | None:
    """``runtime`` when it is a recording (``replay:``, ``history:``, a :class:`RecordedRuntime`),
    else None: the one place a recording is told from a live runtime. A recording is sent
    nothing: every turn is answered at once (:func:`answered_at_once`), it plays the samples it
    holds (:func:`samples_to_drive`), and it keeps no journal and spends no budget
    (:func:`eval_pipeline.run.ledger.transcripts_ledger`)."""
    return runtime if isinstance(runtime, RecordedRuntime) else None


def answered_at_once(
    runtime: ChatRuntime,
    requests: Callable[[], Iterable[pa.Table]],
    sending: Sending,
    on_turn: TurnCallback | None = None,
) -> Iterator[pa.Table] | None:
    """For a recording, the transcripts of each table ``requests()`` gives (:data:`TURN_REQUESTS`;
    asked for only here), every turn answered at once by :func:`replayed`, ``sending.repeat``
    samples each seeded from ``sending.seed``; None for a live runtime, which is sent its turns
    (:func:`drive`)."""
    recording = recording_of(runtime)
    if recording is None:
        return None
    return (
        replayed(recording.answers, asked, on_turn, repeat=sending.repeat, seed=sending.seed)
        for asked in requests()
    )


def samples_to_drive(runtime: ChatRuntime, repeat: int) -> int:
    """Samples per case: a recording (replay, history) plays the samples it holds, else ``repeat``."""
    recording = recording_of(runtime)
    return repeat if recording is None else recording.samples_per_case


def sessions_of(threads: Sequence[Thread]) -> list[list[Thread]]:
    """Threads grouped by session, in order: a thread without a ``session`` key is a session of its own."""
    groups: dict[str, list[Thread]] = {}
    for index, thread in enumerate(threads):
        groups.setdefault(thread.session if thread.session is not None else f"#{index}", []).append(thread)
    return list(groups.values())


def in_flight(runtime: ChatRuntime, concurrency: int | None) -> int:
    """How many sessions a drive keeps in flight at once: ``concurrency``, else (None) the
    runtime's declared ``capabilities.concurrency``."""
    return runtime.capabilities.concurrency if concurrency is None else concurrency


def drive(
    runtime: ChatRuntime,
    threads: Sequence[Thread],
    sending: Sending = Sending(),
    books: Books = Books(),
    *,
    on_turn: TurnCallback | None = None,
    on_start: StartCallback | None = None,
) -> pd.DataFrame:
    """Transcripts (lane columns) for every turn of every thread, ``sending.repeat`` samples of each,
    sent as ``sending`` says (:class:`Sending`) and kept in ``books`` (:class:`Books`).

    ``on_start`` receives the number of turns it will drive (every sample's) before the first is
    sent; ``on_turn`` every row as it is recorded (from worker threads). With a ``books.ledger``,
    the sessions it answers are not sent and those it does not allow are left out.
    ``books.cache`` answers the samples it holds and keeps the others; ``books.price`` prices each
    turn's tokens.
    """
    repeat, ledger = sending.repeat, books.ledger
    sessions_in_flight = in_flight(runtime, sending.concurrency)
    if sessions_in_flight < 1:
        raise ValueError("concurrency must be at least 1")
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    if on_start:
        on_start(repeat * sum(len(t.turns) for t in threads))
    answered = answered_at_once(runtime, lambda: [requests_of_threads(threads)], sending, on_turn)
    if answered is not None:
        return next(answered).to_pandas(types_mapper=nullable_types)

    def run(sample: tuple[list[Thread], int]) -> list[dict[str, Any]]:
        session, sample_index = sample
        key = session_key(session)
        if ledger is not None:
            recorded = ledger.answered(key, sample_index, session)
            if recorded is not None:
                if on_turn is not None:
                    for row in recorded:
                        on_turn(row)
                return recorded
            if not ledger.may_start():
                return []
        rows = run_session(
            runtime,
            session,
            on_turn,
            retry=sending.retry,
            sample_index=sample_index,
            run_seed=sending.seed,
            cache=books.cache,
            price=books.price,
        )
        if ledger is not None:
            ledger.completed(key, sample_index, rows)
        return rows

    # Samples of one case are interleaved with other cases, not queued behind each other.
    sessions = [(session, index) for index in range(repeat) for session in sessions_of(threads)]
    if sessions_in_flight == 1 or len(sessions) <= 1:
        results = [run(s) for s in sessions]
    else:
        workers = min(sessions_in_flight, len(sessions))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eval-session") as pool:
            results = list(pool.map(run, sessions))
    rows = [row for result in results for row in result]
    rows.sort(key=lambda r: (r["case_id"], r["sample_index"], r["turn_index"]))
    return frame(TRANSCRIPTS, rows)[TRANSCRIPT_COLUMNS]


def replayed(
    answers_of: Callable[[pa.Table], pa.Table],
    requests: pa.Table,
    on_turn: TurnCallback | None = None,
    *,
    repeat: int = 1,
    seed: int | None = None,
) -> pa.Table:
    """The transcripts (lane columns) of a recording (replay, history), every turn answered by
    one call of ``answers_of`` (its :meth:`RecordedRuntime.answers`): the turns of ``requests``
    (:data:`TURN_REQUESTS`), ``repeat`` samples of each, asked as :func:`drive` would send them
    and joined to the answers recorded for them. Nothing is sent, so nothing is timed:
    ``latency_ms`` is null."""
    order = _sending_order(requests)
    sessions = pc.coalesce(requests["session"], requests["case_id"])  # what a session's seed derives from
    asked = pa.concat_tables(
        requests.select(["case_id", "turn_index", "role", "prompt"])
        .add_column(1, "sample_index", pa.repeat(pa.scalar(sample_index, pa.int64()), requests.num_rows))
        .append_column("seed", _seeds(sessions, sample_index, seed))
        .take(order)
        for sample_index in range(repeat)
    )
    answers = answers_of(asked.select(list(_ASKED)))
    table = pa.table(
        {
            **{name: asked[name] for name in ("case_id", "turn_index", "role", "prompt")},
            **{
                name: answers[name]
                for name in ("surface", "grounding_source", "surface_tag", "epistemic_status")
            },
            "latency_ms": pa.nulls(asked.num_rows, pa.float64()),
            "attempts": answers["attempts"],
            "error": answers["error"],
            "raw": answers["raw"],
            "sample_index": asked["sample_index"],
            "seed": pc.coalesce(answers["seed"], asked["seed"]),
            **{name: pa.nulls(asked.num_rows, TRANSCRIPTS.field(name).type) for name in _UNRECORDED},
            "cached": pa.repeat(pa.scalar(False), asked.num_rows),
            "finish_reason": pa.array(
                [_finish_reason_of(text) for text in answers["raw"].to_pylist()], pa.string()
            ),
        }
    )
    table = (
        table.sort_by([("case_id", "ascending"), ("sample_index", "ascending"), ("turn_index", "ascending")])
        .select(_TRANSCRIPT_LANE.names)
        .cast(_TRANSCRIPT_LANE)
    )
    if on_turn:
        add_turns = getattr(on_turn, "add_turns", None)  # a progress observer takes them at once
        if callable(add_turns):
            add_turns(table.num_rows, table.num_rows - table["error"].null_count)
        else:
            for row in table.to_pylist():
                on_turn(row)
    return table


def _sending_order(requests: pa.Table) -> pa.Array:
    """The rows of ``requests`` in the order :func:`drive` sends them: session by session in
    order of first appearance (as :func:`sessions_of` groups threads), a turn without a session
    where it stands."""
    sessions = requests["session"]
    if sessions.null_count == len(sessions):
        return pa.array(np.arange(len(sessions), dtype=np.int64))
    first: dict[Any, int] = {}
    rank = [
        first.setdefault(("", position) if session is None else session, len(first))
        for position, session in enumerate(sessions.to_pylist())
    ]
    return pa.array(np.argsort(np.asarray(rank, dtype=np.int64), kind="stable"))


def _seeds(sessions: pa.ChunkedArray, sample_index: int, seed: int | None) -> pa.Array:
    """Each turn's seed in sample ``sample_index``: derived from (run seed, its session, sample)."""
    if seed is None:
        return pa.nulls(len(sessions), pa.int64())
    derived = {key: derive_seed(seed, key, sample_index) for key in sessions.unique().to_pylist()}
    return pa.array([derived[key] for key in sessions.to_pylist()], pa.int64())


# What a recording does not say of a turn: nothing was sent, so nothing was counted or timed.
_UNRECORDED = ("prompt_tokens", "completion_tokens", "cost", "ttft_ms")
# What a recording is asked of each turn (see RecordedRuntime.answers).
_ASKED = ("case_id", "sample_index", "turn_index", "role", "prompt")
_TRANSCRIPT_LANE = pa.schema([TRANSCRIPTS.field(name) for name in TRANSCRIPT_COLUMNS])


def _row(case_id: str, turn: TurnRequest, facts: TurnFacts) -> dict[str, Any]:
    return {
        "case_id": case_id,
        "turn_index": turn.turn_index,
        "role": turn.role,
        "prompt": turn.prompt,
        "surface": facts.surface,
        "grounding_source": facts.grounding_source,
        "surface_tag": facts.surface_tag,
        "epistemic_status": facts.epistemic_status,
        "latency_ms": facts.latency_ms,
        "attempts": facts.attempts,
        "error": facts.error,
        "raw": facts.raw,
        "prompt_tokens": facts.usage.prompt_tokens,
        "completion_tokens": facts.usage.completion_tokens,
        "cached": False,
        "ttft_ms": facts.usage.ttft_ms,
        "finish_reason": facts.finish_reason,
    }
