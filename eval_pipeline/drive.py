"""Drive a ChatRuntime over threads and record every turn as a transcript row.

One fresh session per case; turns of a case are sent in order within its session;
sessions run concurrently up to ``concurrency``. A turn that raises is recorded with its
``error`` and the case's remaining turns still run: faults are data, never dropped. Rows
come back sorted by (case_id, turn_index) whatever the completion order, so a concurrent
run's table equals a serial run's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd

from eval_pipeline.lanes.kind import Thread
from eval_pipeline.runtimes.base import ChatRuntime, RuntimeSpecError
from eval_pipeline.tables import TRANSCRIPTS, frame, lane_columns

TurnCallback = Callable[[dict[str, Any]], None]

TRANSCRIPT_COLUMNS = lane_columns(TRANSCRIPTS)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_thread(
    runtime: ChatRuntime, thread: Thread, on_turn: TurnCallback | None = None
) -> list[dict[str, Any]]:
    """Send one case's turns in one session; one transcript row per turn, faults included."""
    rows: list[dict[str, Any]] = []
    try:
        session = runtime.open_session(thread.case_id)
    except RuntimeSpecError:
        raise
    except Exception as exc:  # a session that cannot open fails every one of its turns
        for turn in thread.turns:
            row = _row(thread.case_id, turn.turn_index, turn.role, turn.prompt, error=_error_text(exc))
            rows.append(row)
            if on_turn:
                on_turn(row)
        return rows
    try:
        for turn in thread.turns:
            started = time.perf_counter()
            try:
                response = session.send(turn.prompt)
            except RuntimeSpecError:
                raise
            except Exception as exc:
                row = _row(
                    thread.case_id,
                    turn.turn_index,
                    turn.role,
                    turn.prompt,
                    latency_ms=(time.perf_counter() - started) * 1000.0,
                    error=_error_text(exc),
                )
            else:
                raw = dict(response.raw)
                attempts = int(raw.pop("attempts", 1))
                row = _row(
                    thread.case_id,
                    turn.turn_index,
                    turn.role,
                    turn.prompt,
                    surface=response.surface,
                    grounding_source=response.grounding_source,
                    surface_tag=response.surface_tag,
                    epistemic_status=response.epistemic_status,
                    latency_ms=(time.perf_counter() - started) * 1000.0,
                    attempts=attempts,
                    raw=json.dumps(raw, sort_keys=True, ensure_ascii=False, default=str) if raw else None,
                )
            rows.append(row)
            if on_turn:
                on_turn(row)
    finally:
        session.close()
    return rows


def drive(
    runtime: ChatRuntime,
    threads: Sequence[Thread],
    *,
    concurrency: int = 1,
    on_turn: TurnCallback | None = None,
) -> pd.DataFrame:
    """Transcripts (lane columns) for every turn of every thread."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if concurrency == 1 or len(threads) <= 1:
        results = [run_thread(runtime, t, on_turn) for t in threads]
    else:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="eval-session") as pool:
            results = list(pool.map(lambda t: run_thread(runtime, t, on_turn), threads))
    rows = [row for result in results for row in result]
    rows.sort(key=lambda r: (r["case_id"], r["turn_index"]))
    return frame(TRANSCRIPTS, rows)[TRANSCRIPT_COLUMNS]


def _row(
    case_id: str,
    turn_index: int,
    role: str,
    prompt: str,
    *,
    surface: str | None = None,
    grounding_source: str | None = None,
    surface_tag: str | None = None,
    epistemic_status: str | None = None,
    latency_ms: float | None = None,
    attempts: int = 1,
    error: str | None = None,
    raw: str | None = None,
) -> dict[str, Any]:
    return {
        "case_id": case_id,
        "turn_index": turn_index,
        "role": role,
        "prompt": prompt,
        "surface": surface,
        "grounding_source": grounding_source,
        "surface_tag": surface_tag,
        "epistemic_status": epistemic_status,
        "latency_ms": latency_ms,
        "attempts": attempts,
        "error": error,
        "raw": raw,
    }
