"""A lane scored from its declaration: threads, predicate rows and metrics, all from lane.yaml.

Pure: cases and DataFrames in, DataFrames and metric values out. Rows come out in a fixed
order (per transcript row then per rule; per case then per rule), so the same cases and
transcripts always give the same tables.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from eval_pipeline.cases.batch import CaseBatch, case_ids, field_values
from eval_pipeline.core import TOKEN_LIMIT, Recent
from eval_pipeline.lanes.case_rows import (
    TEXT,
    CaseRowBlocks,
    Flags,
    Lifted,
    ListedFields,
    Positions,
    StoredVerdicts,
    arrow_column,
    chosen,
    groups,
    repeated,
)
from eval_pipeline.lanes.declaration import (
    CaseRows,
    CaseRule,
    Declaration,
    FieldSpec,
    ListedSeverity,
    MetricSpec,
    TurnRule,
)
from eval_pipeline.lanes.kind import TURN_REQUESTS, Scored, Thread, TurnRequest
from eval_pipeline.lanes.metric_rows import MetricRows, rows_of_declared
from eval_pipeline.lanes.schema import case_model, pascal_case
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.metrics import MetricValue, PredicateRates, compare, count
from eval_pipeline.predicates import PREDICATES, TurnView, Verdict, reason
from eval_pipeline.predicates.base import TURN_VIEW_COLUMNS
from eval_pipeline.predicates.columns import VECTORISED, TurnColumns, VerdictColumns, verdict_columns
from eval_pipeline.predicates.rows import RowColumns, case_row, decoded_evidence, evidence_json
from eval_pipeline.tables import CASE_PREDICATES, column_values, kind_columns

MISSING_TURN = "turn missing from transcripts"
# One model class per declared schema: every stage of a run builds the lane's kind, and its
# cases (hydrated once per run, see pipeline.cases_from_frame) must be of one class.
_CASE_MODELS: Recent[type[BaseModel]] = Recent(64)


class DeclaredLane:
    """The lane kind of a lane declared in its lane.yaml."""

    def __init__(self, spec: LaneSpec) -> None:
        declaration = spec.declaration
        if declaration is None:
            raise ValueError(f"lane {spec.name!r} names kind {spec.kind!r}; it declares no scoring")
        self.spec = spec
        self.declaration: Declaration = declaration
        name = pascal_case(spec.name) + "Case"
        self.case_model: type[BaseModel] = _CASE_MODELS.get(
            (name, declaration.case_schema.model_dump_json()),
            lambda: case_model(name, declaration.case_schema),
        )
        self.metric_names: tuple[str, ...] = tuple(declaration.metrics)
        self.metric_rows: dict[str, MetricRows] = rows_of_declared(declaration.metrics)

    # --- threads -----------------------------------------------------------------------------

    def turn_sources(self, case: Any) -> list[tuple[str, Any, Any]]:
        """(role, prompt, case item) of each turn of the case, in sending order."""
        return self._sources([getattr(case, source.from_) for source in self.declaration.threads.turns])

    def _sources(self, values: Sequence[Any]) -> list[tuple[str, Any, Any]]:
        """(role, prompt, item) of each turn, from the value of each turn source's case field."""
        sources: list[tuple[str, Any, Any]] = []
        for source, value in zip(self.declaration.threads.turns, values, strict=True):
            for item in value if isinstance(value, list) else [value]:
                sources.append(
                    (source.role, _item_field(item, source.prompt) if source.prompt else item, item)
                )
        return sources

    def _sources_of(self, cases: Sequence[Any]) -> Iterator[list[tuple[str, Any, Any]]]:
        """:meth:`_sources` of each case, read from the case fields the turn sources name (a
        batch's stored JSON: no case model is built to read them)."""
        columns = [field_values(cases, source.from_) for source in self.declaration.threads.turns]
        return (self._sources(values) for values in zip(*columns, strict=True))

    def _session(self, spec: LaneSpec, split: str) -> str | None:
        """The session every thread of the split shares (``warm``), or None: one per thread."""
        return f"{spec.name}/{split}" if self.declaration.threads.session == "warm" else None

    def threads(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[Thread]:
        """Each case's thread, its prompts read from the case fields the turn sources name (a
        batch's stored JSON: no case model is built to send it)."""
        session = self._session(spec, split)
        # Validating constructors: pydantic builds a small model faster than model_construct.
        return [
            Thread(
                case_id=case_id,
                turns=tuple(
                    TurnRequest(turn_index=index, role=role, prompt=prompt)
                    for index, (role, prompt, _) in enumerate(sources)
                ),
                session=session,
            )
            for case_id, sources in zip(case_ids(cases), self._sources_of(cases), strict=True)
        ]

    def turn_table(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> pa.Table | None:
        """:meth:`threads` as a table of their turns (:data:`TURN_REQUESTS`), read by Arrow from
        a batch's stored JSON without a model per turn.

        Arrow reads it when the schema types every turn source as text, or an object whose
        prompt field is text, or a list of either (a validated case holds just that there):
        each value, or each item in order, is a turn, source after source, as :meth:`_sources`
        lists them. None for cases that are not a batch, for other sources, where a value is
        null, or when Arrow does not read the JSON as those types: the threads are built then
        (:func:`~eval_pipeline.lanes.kind.turn_requests`), which say why a prompt is not text.
        """
        sources = self.declaration.threads.turns
        fields = self.declaration.case_schema.fields
        types = [_stored_type(fields.get(s.from_), s.prompt) for s in sources]
        if not isinstance(cases, CaseBatch) or not cases.ids or any(t is None for t in types):
            return None
        stored = cases.stored_columns(pa.schema([(s.from_, t) for s, t in zip(sources, types, strict=True)]))
        if stored is None:
            return None
        positions: list[np.ndarray[Any, Any]] = []  # the position of each turn's case in the batch
        prompts: list[pa.Array] = []
        for source in sources:
            column = stored[source.from_].combine_chunks()
            position = np.arange(len(column))
            if pa.types.is_list(column.type):
                if column.null_count:
                    return None
                position = pc.list_parent_indices(column).to_numpy()
                column = pc.list_flatten(column)
            if pa.types.is_struct(column.type):
                if column.null_count:
                    return None
                column = column.field(0)
            if column.null_count:
                return None
            positions.append(position)
            prompts.append(column)
        case_of = np.concatenate(positions)
        source_of = np.concatenate([np.full(len(p), i) for i, p in enumerate(positions)])
        order = np.lexsort((source_of, case_of))  # stable: a list's items keep their order
        case_of = case_of[order]
        counts = np.bincount(case_of, minlength=len(cases.ids))
        turn_index = np.arange(len(case_of)) - np.repeat(np.cumsum(counts) - counts, counts)
        return pa.table(
            [
                pa.array(cases.ids, pa.string()).take(pa.array(case_of)),
                pa.array(turn_index, pa.int64()),
                pa.array([s.role for s in sources], pa.string()).take(pa.array(source_of[order])),
                pa.concat_arrays(prompts).take(pa.array(order)),
                pa.repeat(pa.scalar(self._session(spec, split), pa.string()), len(case_of)),
            ],
            schema=TURN_REQUESTS,
        )

    def turns_per_case(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[int]:
        """Each case's turns, as :meth:`_sources` lists them; a prompt that is not text is built
        into its request, which raises as :meth:`threads` would (a text prompt cannot fail)."""
        counts: list[int] = []
        for sources in self._sources_of(cases):
            for index, (role, prompt, _) in enumerate(sources):
                if not isinstance(prompt, str):
                    TurnRequest(turn_index=index, role=role, prompt=prompt)
            counts.append(len(sources))
        return counts

    def _turn_counts(self, cases: Sequence[Any]) -> list[int]:
        """How many turns each case's thread sends, as :meth:`_sources` lists them (one per item
        of a list field, one for any other), counted without listing the turns (the turn count
        metric's)."""
        columns = [field_values(cases, source.from_) for source in self.declaration.threads.turns]
        return [
            sum(len(value) if isinstance(value, list) else 1 for value in values)
            for values in zip(*columns, strict=True)
        ]

    # --- turn predicates ---------------------------------------------------------------------

    def turn_predicates(self, cases: Sequence[Any], transcripts: pd.DataFrame) -> pd.DataFrame:
        """Each rule's predicates on the turns of its role, in cases matching its ``where``.

        Columnar: the (turn, rule, predicate) cells that apply are listed first, in table
        order; then each predicate judges all its turns at once (its vectorised form when it
        declares one), and the rows are assembled from those columns.
        """
        turns = RecordedTurns(self, cases, transcripts)
        cells = [(rule, name) for rule in self.declaration.turn_predicates for name in rule.predicates]
        # Rules that choose their turns by role alone never read a case (its model is not built).
        reads_case = any(rule.where or rule.only_if_listed_in for rule, _ in cells)
        plans: dict[tuple[str | None, str], tuple[int, ...]] = {}
        plan_of_row: list[tuple[int, ...]] = []
        for case_id, role in zip(turns.case_ids, turns.roles, strict=True):
            key = (case_id if reads_case else None, role)
            plan = plans.get(key)
            if plan is None:
                case = turns.case_by_id[case_id] if reads_case else None
                plan = plans[key] = self._cells_for(case, role, cells)
            plan_of_row.append(plan)
        counts = np.fromiter(map(len, plan_of_row), dtype=np.int64, count=len(plan_of_row))
        out_row = np.repeat(np.arange(len(plan_of_row), dtype=np.int64), counts)
        out_cell = np.fromiter(
            itertools.chain.from_iterable(plan_of_row), dtype=np.int64, count=int(counts.sum())
        )
        table = pa.table(  # the lane columns of TURN_PREDICATES, in order
            {
                "case_id": turns.column("case_id").take(pa.array(out_row, pa.int64())),
                "turn_index": pa.array(np.asarray(turns.turn_indexes, dtype=np.int64)[out_row], pa.int64()),
                "predicate": chosen([name for _, name in cells], out_cell),
                **self._judge_cells(turns, cells, out_row, out_cell),
            }
        )
        return table.to_pandas()

    def _cells_for(self, case: Any, role: str, cells: Sequence[tuple[TurnRule, str]]) -> tuple[int, ...]:
        """Which (rule, predicate) cells apply to a turn of ``role`` in ``case``, in rule order."""
        applying: list[int] = []
        for index, (rule, name) in enumerate(cells):
            if (rule.role is not None and role != rule.role) or not matches(case, rule.where):
                continue
            if rule.only_if_listed_in and name not in getattr(case, rule.only_if_listed_in):
                continue
            applying.append(index)
        return tuple(applying)

    def _judge_cells(
        self,
        turns: RecordedTurns,
        cells: Sequence[tuple[TurnRule, str]],
        out_row: Positions,
        out_cell: Positions,
    ) -> dict[str, pa.Array]:
        """The ``passed``, ``code`` and ``evidence`` columns of every listed cell: a rule's
        ``unless`` first, then the predicate's own verdict, each predicate judging every turn it
        applies to at once. The verdicts are gathered in one list, and each cell takes its own
        from it by position."""
        size = len(out_row)
        gathered = VerdictColumns([], [], [])
        source = np.full(size, -1, dtype=np.int64)  # each cell's place in ``gathered``
        for cell, (rule, name) in enumerate(cells):
            unless = rule.unless.get(name)
            if unless is None:
                continue
            positions = np.flatnonzero(out_cell == cell)
            off = positions[turns.item_is_false(unless.field, out_row[positions])]
            source[off] = _gather(gathered, _columns_of([Verdict.not_applicable(unless.code)]))
        names = list(dict.fromkeys(name for _, name in cells))
        name_of_cell = np.array([names.index(name) for _, name in cells], dtype=np.int64)
        name_at = name_of_cell[out_cell]
        for index, name in enumerate(names):
            positions = np.flatnonzero((name_at == index) & (source < 0))
            if not len(positions):
                continue
            rows_at = out_row[positions]
            rows = rows_at if bool(np.all(np.diff(rows_at) > 0)) else np.unique(rows_at)
            source[positions] = _gather(gathered, turns.judge(name, rows)) + np.searchsorted(rows, rows_at)
        at = pa.array(source, pa.int64())
        return {
            "passed": pa.array(gathered.passed, pa.bool_()).take(at),
            "code": pa.array(gathered.code, TEXT).take(at),
            "evidence": pa.array(gathered.evidence, TEXT).take(at),
        }

    # --- case predicates ---------------------------------------------------------------------

    def case_predicates(
        self, cases: Sequence[Any], transcripts: pd.DataFrame, turn_predicates: pd.DataFrame
    ) -> pd.DataFrame:
        """Per case: the scored turn's verdicts (rules with ``case_rows``), then the case rules.

        Columnar: each block of rows (one lifted predicate, one case rule) is built for every
        case it applies to at once, each row keyed by (case position, slot in the case); the
        blocks are merged in that order, so rows come out per case, in rule order. Only a
        failing row's message is composed on its own (it quotes the evidence)."""
        ids = case_ids(cases)
        lifting = [
            (rule, rule.case_rows) for rule in self.declaration.turn_predicates if rule.case_rows is not None
        ]
        stored = StoredVerdicts(
            ids, [name for rule, _ in lifting for name in rule.predicates], turn_predicates
        )
        listed_in = [
            rows.severity.hard_if_listed_in
            for _, rows in lifting
            if isinstance(rows.severity, ListedSeverity)
        ]
        listed_in += [rule.all_listed_in for rule in self.declaration.case_predicates if rule.all_listed_in]
        blocks, listed, lifted = CaseRowBlocks(ids), ListedFields(cases, listed_in), Lifted(len(ids))
        for rule, rows in lifting:
            positions = _matching(cases, rule.where)
            for name in rule.predicates:
                failed = self._lift(blocks, rows, name, cases, positions, stored, listed)
                lifted.record(name, positions, failed)
        recorded = RecordedTurns(self, cases, transcripts)  # read only if a case predicate asks
        for case_rule in self.declaration.case_predicates:
            positions = _matching(cases, case_rule.where)
            if case_rule.all_listed_in is not None:
                _all_listed_rows(blocks, case_rule, case_rule.all_listed_in, ids, positions, listed, lifted)
                continue
            for name in case_rule.predicates:
                slot = blocks.take_slot()
                predicate = PREDICATES.get(name)
                judged = RowColumns([c for c in kind_columns(CASE_PREDICATES) if c != "case_id"])
                for position in positions.tolist():
                    case = cases[position]
                    verdict = predicate.function(case, recorded.thread(case.id))
                    message = (predicate.explain or reason)(name, verdict)
                    judged.add(case_row(case.id, name, verdict, severity=case_rule.severity, message=message))
                blocks.extend(positions, slot, judged.columns)
        return blocks.frame(kind_columns(CASE_PREDICATES))

    def _lift(
        self,
        blocks: CaseRowBlocks,
        rows: CaseRows,
        name: str,
        cases: Sequence[Any],
        positions: Positions,
        stored: StoredVerdicts,
        listed: ListedFields,
    ) -> Flags:
        """Case rows of turn predicate ``name`` for the cases at ``positions``: each case's
        stored verdict (its last turn's), or a failure coded ``rows.missing``. Returns which
        of them failed."""
        slot = blocks.take_slot()
        found = stored.rows(name, positions)
        at = pa.array(found, mask=found < 0)  # null: no stored row, the case's turn is missing
        missing = pa.array(found < 0)
        passed = pc.if_else(missing, False, stored.passed.take(at))
        codes = pc.if_else(missing, rows.missing, stored.code.take(at))
        evidence = stored.evidence.take(at).fill_null("{}")
        failed: Flags = pc.invert(passed.fill_null(True)).to_numpy(zero_copy_only=False)  # null: not failed
        messages = np.empty(len(positions), dtype=object)
        if rows.message is None:  # a verdict that does not fail says one sentence per code
            held = np.flatnonzero(~failed)
            if len(held):  # keyed by (code, whether the verdict applies)
                code_of = codes.take(held).fill_null("").dictionary_encode()
                open_ = passed.take(held).is_null().to_numpy(zero_copy_only=False)
                key = code_of.indices.to_numpy(zero_copy_only=False).astype(np.int64) * 2 + open_
                distinct, inverse = np.unique(key, return_inverse=True)
                said = [
                    reason(name, Verdict(None if k % 2 else True, code_of.dictionary[k // 2].as_py()))
                    for k in distinct.tolist()
                ]
                messages[held] = np.array(said, dtype=object)[inverse.reshape(-1)]
            own = np.flatnonzero(failed)
        else:
            own = np.arange(len(positions))
        # Evidence is decoded only where a reason quotes it (a failure); without a template, a
        # message depends on the code and evidence alone, so repeated ones are composed once.
        composed: dict[tuple[Any, Any, Any], str] = {}
        taken = pa.array(own, pa.int64())
        for i, verdict_passed, code, text in zip(
            own.tolist(),
            passed.take(taken).to_pylist(),
            codes.take(taken).to_pylist(),
            evidence.take(taken).to_pylist(),
            strict=True,
        ):
            key = (verdict_passed, code, text)
            message = composed.get(key) if rows.message is None else None
            if message is None:
                quoted = decoded_evidence(text) if verdict_passed is False else {}
                message = _message(
                    rows, name, Verdict(verdict_passed, code, quoted), cases, int(positions[i])
                )
                composed[key] = message
            messages[i] = message
        blocks.extend(
            positions,
            slot,
            {
                "predicate": repeated(name, len(positions)),
                "passed": passed,
                "severity": _severities(rows, name, positions, listed),
                "code": codes,
                "message": pa.array(messages, TEXT),
                "evidence": evidence,
            },
        )
        return failed

    # --- metrics -----------------------------------------------------------------------------

    def metrics(self, scored: Scored) -> list[MetricValue]:
        """Every declared metric, in declaration order (an ``all_of`` one from the parts declared
        above it, by :meth:`derive_metrics`)."""
        cases = scored.cases
        values: list[MetricValue] = []
        rates: dict[tuple[str, str], PredicateRates] = {}  # by table and filter: read once
        for name, metric in self.declaration.metrics.items():
            if metric.count == "cases":
                values.append(count(name, len(cases)))
            elif metric.count == "turns":
                values.append(count(name, sum(self._turn_counts(cases))))
            elif metric.all_of is not None:
                values.append(MetricValue(name, None))  # derived below
            else:
                key = (metric.over, json.dumps(metric.where, sort_keys=True))
                if key not in rates:
                    table = scored.case_predicates if metric.over == "cases" else scored.turn_predicates
                    rates[key] = PredicateRates(_where(table, cases, metric.where), rows_are=metric.over)
                values.append(_rate(name, metric, rates[key]))
        return self.derive_metrics(values)

    def derive_metrics(self, values: Sequence[MetricValue]) -> list[MetricValue]:
        """``values`` with every ``all_of`` metric derived again from its parts (after case
        batches' counts were added up, see :func:`eval_pipeline.run.pipeline.merge_batches`)."""
        thresholds = {t.metric: t for t in self.spec.effective_thresholds}
        by_name = {v.metric: v for v in values}
        for name, metric in self.declaration.metrics.items():
            if metric.all_of is not None and name in by_name:
                parts = [by_name[part] for part in metric.all_of]
                by_name[name] = all_hold(name, parts, [thresholds[part] for part in metric.all_of])
        return [by_name[v.metric] for v in values]


class RecordedTurns:
    """A transcripts table as columns, with its cases: what turn predicates read, each part
    read when first asked for, once."""

    def __init__(self, lane: DeclaredLane, cases: Sequence[Any], transcripts: pd.DataFrame) -> None:
        self.lane = lane
        self._cases = cases
        self._transcripts = transcripts
        self._columns: dict[str, list[Any]] = {}
        self._views: dict[int, TurnView] = {}
        self._every_view: list[TurnView] | None = None
        self._threads: dict[str, list[TurnView]] = {}
        self._turn_columns: dict[bytes, TurnColumns] = {}

    @cached_property
    def case_ids(self) -> list[str]:
        return self.values("case_id")

    @cached_property
    def turn_indexes(self) -> list[int]:
        return [int(i) for i in self.values("turn_index")]

    @cached_property
    def roles(self) -> list[str]:
        return self.values("role")

    @cached_property
    def case_by_id(self) -> dict[str, Any]:
        return {case.id: case for case in self._cases}

    def values(self, name: str) -> list[Any]:
        """A transcript column as a plain list."""
        found = self._columns.get(name)
        if found is None:
            found = self._columns[name] = column_values(self._transcripts, name)
        return found

    def column(self, name: str) -> pa.Array:
        """A text column of the transcripts as one Arrow array."""
        return arrow_column(self._transcripts, name, TEXT)

    @cached_property
    def _items(self) -> dict[str, list[Any]]:
        """The case item each declared turn of each case is sent from, in turn order (read from
        a batch's stored JSON for every case at once: no case model is built for them)."""
        return {
            case_id: [item for _, _, item in sources]
            for case_id, sources in zip(
                case_ids(self._cases), self.lane._sources_of(self._cases), strict=True
            )
        }

    def item_is_false(self, field: str, rows: Positions) -> Flags:
        """Whether the case item of each turn at ``rows`` holds ``field`` false (each case's
        items are read once, then each turn looks its own up)."""
        false = {
            case_id: [_item_field(item, field) is False for item in of_case]
            for case_id, of_case in self._items.items()
        }
        ids, indexes = self.case_ids, self.turn_indexes
        return np.fromiter(
            (false[ids[row]][indexes[row]] for row in rows.tolist()), dtype=bool, count=len(rows)
        )

    def view(self, row: int) -> TurnView:
        if self._every_view is not None:
            return self._every_view[row]
        view = self._views.get(row)
        if view is None:
            fields = {name: self.values(name)[row] for name in TURN_VIEW_COLUMNS}
            view = self._views[row] = TurnView.from_values(**fields)
        return view

    def _view_every_row(self) -> None:
        """Build every row's view at once (a thread reads all its turns, and cases are read
        together), walking the columns side by side."""
        if self._every_view is None:
            columns = zip(*(self.values(name) for name in TURN_VIEW_COLUMNS), strict=True)
            self._every_view = [
                TurnView.from_values(**dict(zip(TURN_VIEW_COLUMNS, values, strict=True)))
                for values in columns
            ]

    @cached_property
    def _rows_of_case(self) -> dict[str, dict[int, int]]:
        """Each case's rows, by turn index."""
        rows: dict[str, dict[int, int]] = {}
        for row, (case_id, index) in enumerate(zip(self.case_ids, self.turn_indexes, strict=True)):
            rows.setdefault(case_id, {})[index] = row
        return rows

    def thread(self, case_id: str) -> list[TurnView]:
        """Every declared turn of the case as recorded (a missing one is a faulted stand-in);
        built once per case, however many of its turns a thread-level predicate judges."""
        found = self._threads.get(case_id)
        if found is None:
            self._view_every_row()
            rows = self._rows_of_case.get(case_id, {})
            found = self._threads[case_id] = [
                self.view(rows[index]) if index in rows else TurnView(surface="", error=MISSING_TURN)
                for index in range(len(self._items[case_id]))
            ]
        return found

    def turn_columns(self, rows: Positions) -> TurnColumns:
        """The columns vectorised forms read, of the turns at ``rows`` (built once per set of
        rows: the forms of a rule share them, and their surfaces as one Arrow array)."""
        key = rows.tobytes()
        found = self._turn_columns.get(key)
        if found is None:
            every = len(rows) == len(self.case_ids) and bool(np.all(rows == np.arange(len(rows))))
            at = pa.array(rows, pa.int64())

            def taken(name: str) -> list[Any]:
                return self.values(name) if every else _objects(self.values(name))[rows].tolist()

            surfaces = self.column("surface").take(at).fill_null("")
            found = self._turn_columns[key] = TurnColumns(
                [surface or "" for surface in taken("surface")],
                taken("grounding_source"),
                taken("surface_tag"),
                arrow_surface=surfaces,
            )
        return found

    @cached_property
    def _answered(self) -> Flags:
        """Whether each turn was answered (recorded no fault)."""
        return np.array([error is None for error in self.values("error")], dtype=bool)

    @cached_property
    def _cut(self) -> Flags | None:
        """Whether each turn was cut at the token limit; None when no turn was (or the
        transcripts predate the column)."""
        if "finish_reason" not in self._transcripts.columns:
            return None
        cut = np.array([reason == TOKEN_LIMIT for reason in self.values("finish_reason")], dtype=bool)
        return cut if bool(cut.any()) else None

    def judge(self, name: str, rows: Positions) -> VerdictColumns:
        """Predicate ``name`` on the turns at ``rows``; a failure on a turn cut at the token
        limit carries ``finish_reason`` in its evidence, so its reason says so."""
        judged = self._judged(name, rows)
        if self._cut is None:
            return judged
        noted = np.flatnonzero(self._cut[rows] & np.array([p is False for p in judged.passed], dtype=bool))
        if not len(noted):
            return judged
        evidence = list(judged.evidence)
        for i in noted.tolist():
            evidence[i] = evidence_json({**decoded_evidence(evidence[i]), "finish_reason": TOKEN_LIMIT})
        return VerdictColumns(judged.passed, judged.code, evidence)

    def _judged(self, name: str, rows: Positions) -> VerdictColumns:
        """Predicate ``name`` on the turns at ``rows``: faults fail it, the rest are judged together."""
        predicate = PREDICATES.get(name)
        if predicate.level != "turn":
            verdicts = [
                predicate.on_turn(self.thread(self.case_ids[row]), self.turn_indexes[row])
                for row in rows.tolist()
            ]
            return _columns_of(verdicts)
        answering = self._answered[rows]
        answered = rows[answering]
        if name in VECTORISED:
            judged = verdict_columns(name, self.turn_columns(answered))
        else:
            judged = _columns_of([predicate.function(self.view(row)) for row in answered.tolist()])
        if bool(answering.all()):
            return judged
        # the guard fails each faulted turn with turn_error and the fault
        faults = _columns_of([predicate.function(self.view(row)) for row in rows[~answering].tolist()])
        return VerdictColumns(
            _merged(answering, judged.passed, faults.passed),
            _merged(answering, judged.code, faults.code),
            _merged(answering, judged.evidence, faults.evidence),
        )


def _merged(chosen: Flags, where_chosen: Sequence[Any], elsewhere: Sequence[Any]) -> list[Any]:
    """One list of ``where_chosen``'s values, in order, where ``chosen`` holds, and of
    ``elsewhere``'s everywhere else."""
    merged = np.empty(len(chosen), dtype=object)
    merged[chosen] = _objects(where_chosen)
    merged[~chosen] = _objects(elsewhere)
    values: list[Any] = merged.tolist()
    return values


def _gather(gathered: VerdictColumns, part: VerdictColumns) -> int:
    """Append ``part``'s verdicts to ``gathered``; returns where they start."""
    start = len(gathered.passed)
    gathered.passed.extend(part.passed)
    gathered.code.extend(part.code)
    gathered.evidence.extend(part.evidence)
    return start


def _stored_type(spec: FieldSpec | None, prompt: str | None) -> pa.DataType | None:
    """The Arrow type a turn source's field is read as from a validated case's JSON: text, or
    (with ``prompt``) an object of that one text field, or a list of either; None for any other
    field (or none)."""
    if spec is None:
        return None
    if spec.type == "list":  # of texts or objects: a list of lists is a prompt that is not text
        item = _stored_type(spec.items, prompt)
        return pa.list_(item) if item is not None and not pa.types.is_list(item) else None
    if prompt is None:
        return pa.string() if spec.enum is not None or spec.type == "str" else None
    if spec.type == "object" and _stored_type((spec.fields or {}).get(prompt), None) is not None:
        return pa.struct([(prompt, pa.string())])
    return None


def _item_field(item: Any, name: str) -> Any:
    """A field of a case item: a model's attribute, or a key of the item as stored (JSON)."""
    return item[name] if isinstance(item, dict) else getattr(item, name)


def _objects(values: Sequence[Any]) -> np.ndarray[Any, np.dtype[np.object_]]:
    """``values`` as a one-dimensional object array (never split into a deeper one)."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def _columns_of(verdicts: Sequence[Verdict]) -> VerdictColumns:
    return VerdictColumns(
        [v.passed for v in verdicts],
        [v.code for v in verdicts],
        [evidence_json(v.evidence) for v in verdicts],
    )


def matches(case: Any, where: Mapping[str, Sequence[str]]) -> bool:
    """Whether every named case field holds one of its accepted values."""
    return all(getattr(case, field) in accepted for field, accepted in where.items())


def _severities(rows: CaseRows, name: str, positions: Positions, listed: ListedFields) -> pa.Array:
    if isinstance(rows.severity, ListedSeverity):
        hard = listed.listing(rows.severity.hard_if_listed_in, name)[positions]
        return chosen(["report", "hard"], hard.astype(np.int64))
    return repeated(rows.severity, len(positions))


def _message(rows: CaseRows, predicate: str, verdict: Verdict, cases: Sequence[Any], position: int) -> str:
    """A case row's message: the reason, or the rule's template, which alone reads the case
    (so a batch's case model is built only for a template that quotes it)."""
    if rows.message is None:
        return reason(predicate, verdict)
    template = {True: rows.message.passed, False: rows.message.failed, None: rows.message.not_applicable}
    return template[verdict.passed].format(
        predicate=predicate, code=verdict.code, case=cases[position], reason=reason(predicate, verdict)
    )


def _matching(cases: Sequence[Any], where: Mapping[str, Sequence[str]]) -> Positions:
    """Positions of the cases whose every named field holds one of its accepted values."""
    if not where:
        return np.arange(len(cases), dtype=np.int64)
    values = [(field_values(cases, field), accepted) for field, accepted in where.items()]
    return np.array(
        [p for p in range(len(cases)) if all(column[p] in accepted for column, accepted in values)],
        dtype=np.int64,
    )


def _all_listed_rows(
    blocks: CaseRowBlocks,
    rule: CaseRule,
    field: str,
    ids: Sequence[str],
    positions: Positions,
    listed: ListedFields,
    lifted: Lifted,
) -> None:
    """One row per case listing predicates in ``field``: whether every one of them holds.

    Cases share a few distinct lists: each list's cases are judged together, and each
    distinct set of failing names gives one verdict, message and evidence."""
    slot = blocks.take_slot()
    lists, list_of_case = listed.lists(field)
    listing = positions[np.array([bool(names) for names in lists], dtype=bool)[list_of_case[positions]]]
    by_list = groups(list_of_case[listing])
    _check_lifted(ids, listing, by_list, lists, lifted)
    verdicts: dict[tuple[str, ...], int] = {}  # the failing names -> their verdict's index
    distinct: list[tuple[Verdict, str, str]] = []
    verdict_of_row = np.zeros(len(listing), dtype=np.int64)
    for list_index, rows in by_list:
        names = lists[list_index]
        failing_of_row = [lifted.failed(name)[listing[rows]] for name in names]
        pattern = np.zeros(len(rows), dtype=np.int64)
        for fails in failing_of_row:  # which names fail, as one number per row (kept dense)
            pattern = pd.factorize(pattern * 2 + fails)[0]
        for _, same in groups(pattern):
            failing = tuple(name for name, fails in zip(names, failing_of_row, strict=True) if fails[same[0]])
            known = verdicts.get(failing)
            if known is None:
                verdict = (
                    Verdict.fail("contract_failed", failing=list(failing))
                    if failing
                    else Verdict.ok(failing=[])
                )
                message = reason(field, verdict) if failing else "Every listed predicate holds."
                distinct.append((verdict, message, evidence_json(verdict.evidence)))
                known = verdicts[failing] = len(distinct) - 1
            verdict_of_row[rows[same]] = known
    blocks.extend(
        listing,
        slot,
        {
            "predicate": repeated(field, len(listing)),
            "passed": chosen([verdict.passed for verdict, _, _ in distinct], verdict_of_row, pa.bool_()),
            "severity": repeated(rule.severity, len(listing)),
            "code": chosen([verdict.code for verdict, _, _ in distinct], verdict_of_row),
            "message": chosen([message for _, message, _ in distinct], verdict_of_row),
            "evidence": chosen([evidence for _, _, evidence in distinct], verdict_of_row),
        },
    )


def _check_lifted(
    ids: Sequence[str],
    listing: Positions,
    by_list: Sequence[tuple[int, Positions]],
    lists: Sequence[tuple[Any, ...]],
    lifted: Lifted,
) -> None:
    """Raise for the first case (and its first listed name) that no rule lifted to a case row."""
    unlifted: list[tuple[int, int, str]] = []  # (case position, the name's place in its list, name)
    for list_index, rows in by_list:
        for name_index, name in enumerate(lists[list_index]):
            missed = listing[rows][~lifted.covered(name)[listing[rows]]]
            if len(missed):
                unlifted.append((int(missed.min()), name_index, name))
    if unlifted:
        position, _, name = min(unlifted)
        raise KeyError(f"case {ids[position]!r} lists {name!r}, which no rule lifted to a case row")


def _where(table: pd.DataFrame, cases: Sequence[Any], where: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    if not where:
        return table
    every = case_ids(cases)
    ids = {str(every[p]) for p in _matching(cases, where)}
    return table[table["case_id"].astype(str).isin(ids)]


def _rate(name: str, metric: MetricSpec, rates: PredicateRates) -> MetricValue:
    assert metric.predicate is not None
    held = rates.rate(name, metric.predicate)
    if metric.rate is not None or held.value is None or held.numerator is None or held.denominator is None:
        return held
    failed = held.denominator - held.numerator
    return MetricValue(name, failed / held.denominator, failed, held.denominator, held.failing_case_ids)


def all_hold(name: str, parts: Sequence[MetricValue], thresholds: Sequence[Any]) -> MetricValue:
    """1.0 when every part meets its threshold, 0.0 when one does not, null when a part is null."""
    if any(part.value is None for part in parts):
        return MetricValue(name, None)
    held = all(compare(p.value, t.op, t.value) for p, t in zip(parts, thresholds, strict=True))
    failing = tuple(sorted({case for part in parts for case in part.failing_case_ids}))
    return MetricValue(name, 1.0 if held else 0.0, failing_case_ids=() if held else failing)
