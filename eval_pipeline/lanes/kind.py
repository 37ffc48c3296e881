"""What a lane kind provides: case model, threads to send, and scoring over tables.

A lane kind is the code behind one evaluation contract. It is pure: it reads cases and
DataFrames and returns DataFrames / metric values. It never touches Dagster, a runtime or
storage; the wiring calls it. Most lanes are declared in their ``lane.yaml`` and scored by
:class:`eval_pipeline.lanes.declared.DeclaredLane`; a lane the declaration cannot say names a
kind class registered in :data:`LANE_KINDS` (every module of ``eval_pipeline.lanes.kinds`` is
discovered, so a new kind is one new module there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core import Registry
from eval_pipeline.metrics import USAGE_METRICS, MetricValue

if TYPE_CHECKING:
    from eval_pipeline.lanes.metric_rows import MetricRows
    from eval_pipeline.lanes.spec import LaneSpec


class TurnRequest(BaseModel):
    """One prompt to send, in order, within a case's session."""

    model_config = ConfigDict(frozen=True)

    turn_index: int = Field(ge=0)
    role: str = Field(description="What the turn is for: turn, setup, probe, prime, translate, ...")
    prompt: str


class Thread(BaseModel):
    """Every prompt of one case, sent in order in one session.

    Threads sharing a ``session`` key are played one after another in one session (a warm
    session); a thread without one gets a fresh session of its own.
    """

    model_config = ConfigDict(frozen=True)

    case_id: str
    turns: tuple[TurnRequest, ...]
    session: str | None = Field(default=None, min_length=1)


# The turns of threads as a table, a row per turn in thread order (see :func:`turn_requests`).
TURN_REQUESTS = pa.schema(
    [
        ("case_id", pa.string()),
        ("turn_index", pa.int64()),
        ("role", pa.string()),
        ("prompt", pa.string()),
        ("session", pa.string()),
    ]
)


def requests_of_threads(threads: Sequence[Thread]) -> pa.Table:
    """The turns of ``threads`` as a :data:`TURN_REQUESTS` table, in order."""
    rows = [
        (t.case_id, turn.turn_index, turn.role, turn.prompt, t.session) for t in threads for turn in t.turns
    ]
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in TURN_REQUESTS]
    return pa.table(dict(zip(TURN_REQUESTS.names, columns, strict=True)), schema=TURN_REQUESTS)


def turn_requests(kind: LaneKind, cases: Sequence[Any], spec: LaneSpec, split: str) -> pa.Table:
    """The turns ``kind`` sends for ``cases`` as a :data:`TURN_REQUESTS` table: what a recording
    answers: the kind's own :meth:`LaneKind.turn_table`, else read off its threads."""
    table = kind.turn_table(cases, spec, split)
    return table if table is not None else requests_of_threads(kind.threads(cases, spec, split))


# The columns of each table a lane's metrics read (and, with ``sample_index``, all the metrics
# stage reads): a big run's prompts, surfaces, evidence and messages stay on disk.
SCORED_COLUMNS: dict[str, tuple[str, ...]] = {
    "transcripts": ("case_id", "turn_index", "role", "error"),
    "turn_predicates": ("case_id", "turn_index", "predicate", "passed", "code"),
    "case_predicates": ("case_id", "predicate", "passed", "severity", "code"),
}


@dataclass(frozen=True)
class Scored:
    """What a lane's metrics are computed from: its cases and the tables scored so far (at
    least their :data:`SCORED_COLUMNS`)."""

    cases: Sequence[Any]
    transcripts: pd.DataFrame
    turn_predicates: pd.DataFrame
    case_predicates: pd.DataFrame


class LaneKind(Protocol):
    """The contract every lane kind implements.

    DataFrames passed in carry at least the lane columns of the matching table in
    :mod:`eval_pipeline.tables.columns` (to :meth:`metrics`, at least :data:`SCORED_COLUMNS`);
    returned DataFrames carry exactly those lane columns (the wiring adds run_id, lane,
    split, runtime).
    """

    @property
    def case_model(self) -> type[BaseModel]: ...

    @property
    def metric_names(self) -> tuple[str, ...]: ...

    @property
    def metric_rows(self) -> Mapping[str, MetricRows]:
        """Each rate's predicate rows (:mod:`eval_pipeline.lanes.metric_rows`), by metric name."""
        ...

    def threads(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[Thread]: ...

    def turn_table(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> pa.Table | None:
        """:meth:`threads` as a :data:`TURN_REQUESTS` table (what a recording is asked), the
        same rows built without a model per turn; None where the kind does not build it itself
        or it would not equal them (:func:`turn_requests` then reads it off the threads)."""
        ...

    def turns_per_case(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[int]:
        """How many turns each case's threads send, in ``cases`` order; raises where
        :meth:`threads` would (a prompt that cannot be composed). What the cases stage records;
        :func:`turns_of_threads` counts built threads."""
        ...

    def turn_predicates(self, cases: Sequence[Any], transcripts: pd.DataFrame) -> pd.DataFrame: ...

    def case_predicates(
        self, cases: Sequence[Any], transcripts: pd.DataFrame, turn_predicates: pd.DataFrame
    ) -> pd.DataFrame: ...

    def metrics(self, scored: Scored) -> list[MetricValue]: ...

    def derive_metrics(self, values: Sequence[MetricValue]) -> list[MetricValue]:
        """``values`` (of :meth:`metrics`, plus the common ones) with every metric the kind
        derives from others computed again from them; the rest unchanged. The pipeline calls it
        once a run's case batches are added up: a count or a rate adds up, a derived value does not."""
        ...


def turns_of_threads(cases: Sequence[Any], threads: Sequence[Thread]) -> list[int]:
    """How many turns ``threads`` send for each case, in ``cases`` order (a thread of a case
    not in ``cases`` is an error: a kind built it from nothing)."""
    sent = {str(case.id): 0 for case in cases}
    unknown = [t.case_id for t in threads if t.case_id not in sent]
    if unknown:
        raise ValueError(f"lane built threads for unknown cases: {unknown}")
    for thread in threads:
        sent[thread.case_id] += len(thread.turns)
    return list(sent.values())


# Metrics every lane emits whatever its kind (computed by the pipeline from transcripts).
COMMON_METRICS: tuple[str, ...] = ("error_rate",)

# Lane kinds in code, by the name a lane.yaml gives as ``kind``: a class built with no arguments.
LANE_KINDS: Registry[Callable[[], LaneKind]] = Registry("lane kind", "eval_pipeline.lanes.kinds")


def emitted_metrics(kind: LaneKind) -> frozenset[str]:
    """Every metric a lane of ``kind`` emits: the kind's own, the common ones and the usage ones."""
    return frozenset((*kind.metric_names, *COMMON_METRICS, *USAGE_METRICS))
