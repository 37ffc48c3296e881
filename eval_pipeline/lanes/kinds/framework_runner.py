"""framework_runner: a lane scored by an upstream framework's own runner, run whole.

The runner (``run_lane(cases, **kwargs)``, see :mod:`eval_pipeline.lanes.runner_spec`) is run
by the transcripts stage in a child process (:mod:`eval_pipeline.frameworks`); what it returned
is kept in the transcripts, as :func:`transcript_rows` lays them out: per case, a ``case`` row
(turn 0) whose ``prompt`` is the case and whose ``raw`` is its detail, then one ``turn`` row per
item of the detail's turn list, if it has one. A runner that failed leaves every case row with
the failure as its ``error`` (the run is void).

From those rows, pure: every bool field of a detail (nested objects flattened, dotted) is a case
row, ``None`` not applicable; a ``pass_when`` field passes when it holds one of its values; a
failing row's message is the detail's ``failure_reasons`` / ``reason``. A ``rate_of`` metric is
recomputed from the rows; a ``value`` metric is the runner's own number, read from the note the
transcripts stage left in the file (:data:`REPORT_NOTE`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, create_model, model_validator

from eval_pipeline.cases.batch import case_ids, field_values
from eval_pipeline.core import Recent
from eval_pipeline.lanes.kind import LANE_KINDS, Scored, Thread, TurnRequest
from eval_pipeline.lanes.metric_rows import MetricRows
from eval_pipeline.lanes.runner_spec import FRAMEWORK_KIND, RunnerMetric, RunnerSpec
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.metrics import MetricValue, rate
from eval_pipeline.predicates.rows import evidence_json
from eval_pipeline.tables import CASE_PREDICATES, TURN_PREDICATES, StageFile, kind_columns

CASE_ROLE, TURN_ROLE = "case", "turn"
REPORT_NOTE = "framework_report"  # the transcripts file's note: the runner's report metrics
NOT_APPLICABLE = "not_applicable"
MISSING_DETAIL = "no_detail"
RUNNER_FAILED = "runner_failed"
_CASE_MODELS: Recent[type[BaseModel]] = Recent(64)


class _FrameworkCase(BaseModel):
    """A case as the upstream framework has it: any fields, its id in one of them."""

    model_config = ConfigDict(extra="allow", frozen=True)
    id_field: ClassVar[str] = "id"

    @model_validator(mode="after")
    def _has_id(self) -> _FrameworkCase:
        found = (self.__pydantic_extra__ or {}).get(self.id_field)
        if not isinstance(found, str) or not found:
            raise ValueError(f"the case's id field {self.id_field!r} must be a non-empty text")
        return self

    @property
    def id(self) -> str:
        return str((self.__pydantic_extra__ or {})[self.id_field])


def case_model(id_field: str) -> type[BaseModel]:
    """The case model of a framework lane whose cases hold their id in ``id_field``."""

    def build() -> type[BaseModel]:
        model = create_model("FrameworkCase", __base__=_FrameworkCase)
        model.id_field = id_field
        return model

    return _CASE_MODELS.get((id_field,), build)


def flattened(detail: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A detail's fields, nested objects' fields named ``outer.inner``; lists kept whole."""
    flat: dict[str, Any] = {}
    for key, value in detail.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flattened(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _message_of(runner: RunnerSpec, flat: Mapping[str, Any]) -> str | None:
    """The detail's own words on why the case failed: its first message field present."""
    for name in runner.messages:
        value = flat.get(name)
        if isinstance(value, list) and value:
            return "; ".join(str(v) for v in value)
        if isinstance(value, str) and value:
            return value
    return None


def detail_rows(runner: RunnerSpec, detail: Mapping[str, Any]) -> list[tuple[str, bool | None, str]]:
    """(row, passed, code) of one case detail, in a fixed order: the listed rows, then every
    other bool field, then the ``pass_when`` fields. A listed row the detail lacks, or holds
    ``None``, is not applicable."""
    flat = flattened(detail)
    skipped = {*runner.ignore, *runner.messages, *([runner.turns.field] if runner.turns else [])}
    listed = [*runner.case_rows.hard, *runner.case_rows.report]
    found = [k for k, v in flat.items() if isinstance(v, bool) and k not in skipped and k not in listed]
    rows: list[tuple[str, bool | None, str]] = []
    for name in [*listed, *found]:
        value = flat.get(name)
        if value is None:
            rows.append((name, None, NOT_APPLICABLE))
        elif isinstance(value, bool):
            rows.append((name, value, "ok" if value else "failed"))
        else:
            rows.append((name, False, "not_bool"))
    for name, accepted in runner.pass_when.items():
        value = flat.get(name)
        if value is None:
            rows.append((name, None, NOT_APPLICABLE))
        else:
            rows.append((name, value in accepted, "ok" if value in accepted else f"{name}_{value}"))
    return rows


def transcript_rows(
    runner: RunnerSpec,
    cases: Sequence[Mapping[str, Any]],
    details: Sequence[Mapping[str, Any]] | None,
    failure: str | None,
) -> list[dict[str, Any]]:
    """The transcripts of one runner run (lane columns): a ``case`` row per case, its detail in
    ``raw``, then its turn list's rows; every case row holds ``failure`` when the runner failed."""
    rows: list[dict[str, Any]] = []
    for position, case in enumerate(cases):
        case_id = str(case[runner.id_field])
        prompt = json.dumps(case, ensure_ascii=False, sort_keys=True)
        if details is None:
            rows.append(
                _row(case_id, 0, CASE_ROLE, prompt, "", None, failure or "the runner gave no details")
            )
            continue
        detail = dict(details[position])
        turns = detail.pop(runner.turns.field, None) if runner.turns is not None else None
        rows.append(_row(case_id, 0, CASE_ROLE, prompt, _summary(runner, detail), detail, None))
        for index, turn in enumerate(turns if isinstance(turns, list) else [], start=1):
            item = dict(turn) if isinstance(turn, Mapping) else {"surface": turn}
            assert runner.turns is not None
            said = item.pop(runner.turns.prompt, "")
            answered = item.pop(runner.turns.surface, "")
            rows.append(_row(case_id, index, TURN_ROLE, _text(said), _text(answered), item, None))
    return rows


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _summary(runner: RunnerSpec, detail: Mapping[str, Any]) -> str:
    """What the viewer shows as the runner's answer for a case: its rows' verdicts, and its message."""
    verdicts = ", ".join(
        f"{name}={'n/a' if passed is None else str(passed).lower()}"
        for name, passed, _ in detail_rows(runner, detail)
    )
    message = _message_of(runner, flattened(detail))
    return f"{verdicts}{f' — {message}' if message else ''}"


def _row(
    case_id: str, index: int, role: str, prompt: str, surface: str, raw: Any, error: str | None
) -> dict[str, Any]:
    return {
        "case_id": case_id,
        "turn_index": index,
        "role": role,
        "prompt": prompt,
        "surface": surface,
        "raw": None if raw is None else json.dumps(raw, ensure_ascii=False, sort_keys=True, default=str),
        "error": error,
        "sample_index": 0,
    }


@LANE_KINDS.register(FRAMEWORK_KIND)
class FrameworkRunnerLane:
    """The lane kind of a lane scored by an upstream framework runner (its ``runner:`` block)."""

    def __init__(self, spec: LaneSpec | None = None) -> None:
        if spec is None or spec.runner is None:
            raise ValueError(f"a {FRAMEWORK_KIND!r} lane is built from its lane.yaml (its runner block)")
        self.spec = spec
        self.runner: RunnerSpec = spec.runner
        self.case_model: type[BaseModel] = case_model(self.runner.id_field)
        self.metric_names: tuple[str, ...] = tuple(self.runner.metrics)
        self.metric_rows: dict[str, MetricRows] = {
            name: MetricRows(frozenset({_counted_row(name, metric)}))
            for name, metric in self.runner.metrics.items()
            if metric.rate_of is not None
        }

    def threads(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[Thread]:
        """One turn per case: the case itself, given to the runner with the others."""
        texts = [json.dumps(_record(case), ensure_ascii=False, sort_keys=True) for case in cases]
        return [
            Thread(case_id=case_id, turns=(TurnRequest(turn_index=0, role=CASE_ROLE, prompt=text),))
            for case_id, text in zip(case_ids(cases), texts, strict=True)
        ]

    def turn_table(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> pa.Table | None:
        return None

    def turns_per_case(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[int]:
        return [1] * len(cases)

    def turn_predicates(self, cases: Sequence[Any], transcripts: pd.DataFrame) -> pd.DataFrame:
        """Nothing per turn: the runner judged each case whole."""
        return pd.DataFrame(columns=kind_columns(TURN_PREDICATES))

    def case_predicates(
        self, cases: Sequence[Any], transcripts: pd.DataFrame, turn_predicates: pd.DataFrame
    ) -> pd.DataFrame:
        """Each case's rows from its detail; the rows a ``where`` metric counts, under its name."""
        own = transcripts[transcripts["role"] == CASE_ROLE].drop_duplicates("case_id")
        by_case = {str(r["case_id"]): r for r in own.to_dict("records")}
        wheres = self._where_matches(cases)
        rows: list[dict[str, Any]] = []
        for position, case_id in enumerate(case_ids(cases)):
            record = by_case.get(case_id)
            if record is None or not pd.isna(record.get("error")) or pd.isna(record.get("raw")):
                reason = "no detail was recorded" if record is None else str(record.get("error"))
                rows.append(_case_row(case_id, RUNNER_FAILED, False, "hard", RUNNER_FAILED, reason, {}))
                continue
            detail = json.loads(str(record["raw"]))
            rows.extend(self._rows_of(case_id, detail, [n for n, hit in wheres.items() if hit[position]]))
        return pd.DataFrame(rows, columns=kind_columns(CASE_PREDICATES))

    def _where_matches(self, cases: Sequence[Any]) -> dict[str, list[bool]]:
        """For each ``where`` metric, whether each case is one it counts."""
        matches: dict[str, list[bool]] = {}
        for name, metric in self.runner.metrics.items():
            if metric.rate_of is None or not metric.where:
                continue
            columns = [(field_values(cases, field), accepted) for field, accepted in metric.where.items()]
            matches[name] = [
                all(column[p] in accepted for column, accepted in columns) for p in range(len(cases))
            ]
        return matches

    def _rows_of(
        self, case_id: str, detail: Mapping[str, Any], counted_by: Iterable[str]
    ) -> list[dict[str, Any]]:
        flat = flattened(detail)
        message = _message_of(self.runner, flat)
        verdicts = {name: (passed, code) for name, passed, code in detail_rows(self.runner, detail)}
        rows = [
            _case_row(
                case_id,
                name,
                passed,
                self.runner.severity(name),
                code,
                _words(name, passed, code, message),
                flat.get(name),
            )
            for name, (passed, code) in verdicts.items()
        ]
        for metric in counted_by:
            source = self.runner.metrics[metric].rate_of
            assert source is not None
            passed, code = verdicts.get(source, (None, NOT_APPLICABLE))
            words = _words(source, passed, code, message)
            rows.append(
                _case_row(
                    case_id, metric, passed, self.runner.severity(source), code, words, flat.get(source)
                )
            )
        return rows

    def metrics(self, scored: Scored) -> list[MetricValue]:
        """Each ``rate_of`` metric over its rows (a ``value`` metric is read by :meth:`reported`)."""
        rows = scored.case_predicates
        values = []
        for name, metric in self.runner.metrics.items():
            if metric.rate_of is None:
                continue
            counted = rows[rows["predicate"].astype(str) == _counted_row(name, metric)]
            values.append(rate(name, zip(counted["case_id"].astype(str), counted["passed"], strict=True)))
        return values

    def derive_metrics(self, values: Sequence[MetricValue]) -> list[MetricValue]:
        """Nothing to derive: the rates add up over batches, the reported values come whole."""
        return list(values)

    def reported(self, transcripts: StageFile) -> list[MetricValue]:
        """Each ``value`` metric: the number the runner reported (missing when it reported none,
        or something that is not a number: a bool counts 1.0 / 0.0)."""
        note = transcripts.note(REPORT_NOTE)
        report = json.loads(note) if note else {}
        flat = flattened(report) if isinstance(report, Mapping) else {}
        return [
            MetricValue(name, _number(flat.get(metric.value)))
            for name, metric in self.runner.metrics.items()
            if metric.value is not None
        ]


def _counted_row(name: str, metric: RunnerMetric) -> str:
    """The case rows a rate counts: its source row's, or (with ``where``) its own."""
    assert metric.rate_of is not None
    return name if metric.where else metric.rate_of


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _words(name: str, passed: bool | None, code: str, message: str | None) -> str:
    if passed is None:
        return f"{name} does not apply to this case"
    if passed:
        return f"{name} holds"
    if code == "not_bool":
        return f"{name} is not true or false"
    return f"{name} failed" + (f": {message}" if message else "")


def _case_row(
    case_id: str, name: str, passed: bool | None, severity: str, code: str, message: str, found: Any
) -> dict[str, Any]:
    return {
        "case_id": case_id,
        "predicate": name,
        "passed": passed,
        "severity": severity,
        "code": code,
        "message": message,
        "evidence": evidence_json({} if found is None else {"value": found}),
    }


def _record(case: Any) -> dict[str, Any]:
    return case.model_dump() if isinstance(case, BaseModel) else dict(case)
