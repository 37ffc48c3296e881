"""What a lane kind provides: case model, threads to send, and scoring over tables.

A lane kind is the code behind one evaluation contract. It is pure: it reads cases and
DataFrames and returns DataFrames / metric values. It never touches Dagster, a runtime or
storage; the wiring calls it. Kinds register themselves by name with
:func:`register_lane_kind`, and every module in ``eval_pipeline.lanes.kinds`` is imported
on discovery, so a new kind is one new module there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Protocol

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.scoring import MetricValue

TurnRole = Literal["turn", "setup", "probe", "translate"]


class TurnRequest(BaseModel):
    """One prompt to send, in order, within a case's session."""

    model_config = ConfigDict(frozen=True)

    turn_index: int = Field(ge=0)
    role: TurnRole
    prompt: str


class Thread(BaseModel):
    """Every prompt of one case; the driver sends them in one fresh session."""

    model_config = ConfigDict(frozen=True)

    case_id: str
    turns: tuple[TurnRequest, ...]


def scripted_thread(case_id: str, setup: Sequence[str], prompt: str, *, scored_role: TurnRole) -> Thread:
    """A thread of ``setup`` prompts (role ``setup``, not scored) then the scored ``prompt``."""
    turns = [TurnRequest(turn_index=i, role="setup", prompt=p) for i, p in enumerate(setup)]
    turns.append(TurnRequest(turn_index=len(setup), role=scored_role, prompt=prompt))
    return Thread(case_id=case_id, turns=tuple(turns))


class LaneKind(Protocol):
    """The contract every lane kind implements.

    DataFrames passed in carry at least the lane columns of the matching table in
    :mod:`eval_pipeline.tables`; returned DataFrames carry exactly those lane columns
    (the wiring adds run_id, lane, split, runtime).
    """

    name: ClassVar[str]
    case_model: ClassVar[type[BaseModel]]
    metric_names: ClassVar[tuple[str, ...]]

    def threads(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[Thread]: ...

    def turn_predicates(self, cases: Sequence[Any], transcripts: pd.DataFrame) -> pd.DataFrame: ...

    def case_predicates(
        self, cases: Sequence[Any], transcripts: pd.DataFrame, turn_predicates: pd.DataFrame
    ) -> pd.DataFrame: ...

    def metrics(
        self,
        cases: Sequence[Any],
        transcripts: pd.DataFrame,
        turn_predicates: pd.DataFrame,
        case_predicates: pd.DataFrame,
    ) -> list[MetricValue]: ...


# Metrics every lane emits whatever its kind (computed by the pipeline from transcripts).
COMMON_METRICS: tuple[str, ...] = ("error_rate",)

_KINDS: dict[str, type[LaneKind]] = {}


def register_lane_kind(cls: type[LaneKind]) -> type[LaneKind]:
    """Class decorator: make a lane kind findable by its ``name``."""
    if cls.name in _KINDS and _KINDS[cls.name] is not cls:
        raise ValueError(f"lane kind {cls.name!r} registered twice")
    _KINDS[cls.name] = cls
    return cls


def lane_kind(name: str) -> LaneKind:
    """A fresh instance of the registered kind ``name``."""
    _import_kind_modules()
    try:
        return _KINDS[name]()
    except KeyError:
        raise KeyError(f"unknown lane kind {name!r}; known kinds: {sorted(_KINDS)}") from None


def emitted_metrics(kind: LaneKind) -> frozenset[str]:
    """Every metric a lane of ``kind`` emits: the kind's own plus the common ones."""
    return frozenset((*kind.metric_names, *COMMON_METRICS))


def known_kinds() -> list[str]:
    _import_kind_modules()
    return sorted(_KINDS)


def _import_kind_modules() -> None:
    import importlib
    import pkgutil

    from eval_pipeline.lanes import kinds

    for module in pkgutil.iter_modules(kinds.__path__):
        importlib.import_module(f"{kinds.__name__}.{module.name}")
