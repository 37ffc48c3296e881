"""Column contracts of the tables that flow between stages and into history.

Stage functions produce the *lane columns*; the Dagster wiring adds the *run columns*
(run_id and the columns of the run's series, :mod:`eval_pipeline.core.series`) that every stored
table carries. One pyarrow schema per table keeps Parquet files of different runs and lanes
union-compatible.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd
import pyarrow as pa

RUN_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("run_id", pa.string()),
    pa.field("lane", pa.string()),
    pa.field("split", pa.string()),
    pa.field("runtime", pa.string()),  # the runtime target's name
    pa.field("case_set", pa.string()),  # the split's name, or custom-<sha256 prefix> for --cases
)

# Evidence is a JSON object. Parquet files type the column as JSON (Arrow's canonical
# ``arrow.json`` extension, Parquet's JSON logical type), so DuckDB reads it as JSON
# (``evidence->>'$.found[0]'``); files written before that hold the same text as a plain
# string, and the views read both. In a DataFrame it is canonical JSON text, decoded where
# it is shown (``--json``, tables, the report).
JSON_TEXT = pa.json_(pa.string())

TRANSCRIPTS = pa.schema(
    [
        *RUN_COLUMNS,
        pa.field("case_id", pa.string()),
        pa.field("turn_index", pa.int32()),
        pa.field("role", pa.string()),  # turn | setup | probe | translate
        pa.field("prompt", pa.string()),
        pa.field("surface", pa.string()),
        pa.field("grounding_source", pa.string()),
        pa.field("surface_tag", pa.string()),
        pa.field("epistemic_status", pa.string()),
        pa.field("latency_ms", pa.float64()),
        pa.field("attempts", pa.int32()),
        pa.field("error", pa.string()),
        pa.field("raw", pa.string()),  # JSON text of whatever else the runtime said
        pa.field("sample_index", pa.int32()),  # which of the run's N samples of the case (0 when N = 1)
        pa.field("seed", pa.int64()),  # the seed the sample was sent with (null: none)
        pa.field("prompt_tokens", pa.int64()),  # from the reply's usage (null: the runtime did not say)
        pa.field("completion_tokens", pa.int64()),
        pa.field("cost", pa.float64()),  # the tokens at the target's price (null: no price or no usage)
        pa.field("cached", pa.bool_()),  # answered from the response cache: nothing was sent
        pa.field("ttft_ms", pa.float64()),  # time to the first token of a streamed reply (null: not measured)
        pa.field("finish_reason", pa.string()),  # why generation stopped (null: the runtime did not say)
    ]
)

TURN_PREDICATES = pa.schema(
    [
        *RUN_COLUMNS,
        pa.field("case_id", pa.string()),
        pa.field("turn_index", pa.int32()),
        pa.field("predicate", pa.string()),
        pa.field("passed", pa.bool_()),  # null = not applicable to this turn
        pa.field("code", pa.string()),
        pa.field("evidence", JSON_TEXT),
        pa.field("sample_index", pa.int32()),
    ]
)

# History's narrow form of the turn predicates: each turn's verdict of each predicate, without
# its code and evidence (what a paired test over turns reads, at a fraction of the bytes).
TURN_VERDICTS = pa.schema([field for field in TURN_PREDICATES if field.name not in ("code", "evidence")])

CASE_PREDICATES = pa.schema(
    [
        *RUN_COLUMNS,
        pa.field("case_id", pa.string()),
        pa.field("predicate", pa.string()),  # predicate or assertion name
        pa.field("passed", pa.bool_()),  # null = not applicable to this case
        pa.field("severity", pa.string()),
        pa.field("code", pa.string()),
        pa.field("message", pa.string()),  # a sentence a person can act on, quoting the surface
        pa.field("evidence", JSON_TEXT),
        pa.field("sample_index", pa.int32()),
    ]
)

METRICS = pa.schema(
    [
        *RUN_COLUMNS,
        pa.field("metric", pa.string()),
        pa.field("value", pa.float64()),  # null = not computable (empty denominator)
        pa.field("numerator", pa.float64()),
        pa.field("denominator", pa.float64()),
        pa.field("threshold_op", pa.string()),
        pa.field("threshold", pa.float64()),
        pa.field("severity", pa.string()),  # ERROR | WARN | null (no threshold)
        pa.field("passed", pa.bool_()),  # null when the metric has no threshold; false when void
        pa.field("verdict", pa.string()),  # pass | fail | warn | void | n/a (scoring.VerdictWord)
        pa.field("partition_date", pa.string()),
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
        pa.field("cases_sha256", pa.string()),
        pa.field("pipeline_version", pa.string()),
        pa.field("samples", pa.int32()),  # N: samples per case the value pools
        pa.field("ci_low", pa.float64()),  # 95% Wilson interval on numerator / denominator
        pa.field("ci_high", pa.float64()),
        pa.field("pass_hat_k", pa.float64()),  # the metric counting a case only when all N samples pass
        pa.field(
            "statistic", pa.string()
        ),  # what the threshold gated: mean | lower_bound | upper_bound | pass_hat_k
    ]
)

# One row per lane run, written to history after every other table of the run: a run is
# visible to history queries only once its manifest exists (a run killed half-way is not).
RUN_MANIFESTS = pa.schema(
    [
        *RUN_COLUMNS,
        pa.field("runtime_spec", pa.string()),  # the adapter spec the target resolved to (no secrets)
        pa.field("partition_date", pa.string()),  # the night the run belongs to (YYYY-MM-DD)
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
        pa.field("committed_at", pa.timestamp("us", tz="UTC")),
        pa.field("cases_sha256", pa.string()),
        pa.field("pipeline_version", pa.string()),
        pa.field("dagster_job", pa.string()),
        pa.field("tables", pa.string()),  # comma-separated history tables the run wrote
        pa.field("outcome", JSON_TEXT),  # the run's outcome (outcome.RunOutcome), as every view shows it
        # The target's options (redacted, sorted JSON; null: none, or history from before it).
        pa.field("runtime_options", JSON_TEXT),
    ]
)

# The cases stage: one row per validated case, its row groups the run's case batches.
CASES = pa.schema(
    [
        pa.field("case_id", pa.string()),
        pa.field("split", pa.string()),
        pa.field("file", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("case_json", pa.string()),
        pa.field("turns", pa.int64()),  # turns the case's thread sends (one sample)
    ]
)

SCHEMAS: Mapping[str, pa.Schema] = {
    "transcripts": TRANSCRIPTS,
    "turn_predicates": TURN_PREDICATES,
    "turn_verdicts": TURN_VERDICTS,
    "case_predicates": CASE_PREDICATES,
    "metrics": METRICS,
    "run_manifests": RUN_MANIFESTS,
}

RUN_COLUMN_NAMES: tuple[str, ...] = tuple(f.name for f in RUN_COLUMNS)

# What each column holds, for people (the Dagster UI's column schema). A name means the
# same in every table, so one entry serves them all; a test checks that none is missing.
COLUMN_DESCRIPTIONS: Mapping[str, str] = {
    "run_id": "The Dagster run that produced the row (the history key; any unique prefix names it).",
    "lane": "The lane (evaluation contract) the row belongs to.",
    "split": "The lane split whose rules the cases ran under (dev, locked, …).",
    "runtime": "The runtime target's name (evals/runtimes.yaml, or a derived name for an ad-hoc spec).",
    "case_set": "Which cases: the split's own files (named after the split) or custom-<hash> for --cases.",
    "case_id": "The case's id from its case file.",
    "turn_index": "Position of the turn in the case's session, from 0.",
    "role": "What the turn is for: turn, setup, probe or translate.",
    "prompt": "What was sent to the runtime.",
    "surface": "What the runtime answered (the text the predicates read).",
    "grounding_source": "Where the runtime says the answer came from (pack, teaching, vault, none, …).",
    "surface_tag": "The runtime's own provenance tag for the surface, if any.",
    "epistemic_status": "The runtime's stated status of the claim (e.g. SPECULATIVE), if any.",
    "latency_ms": "Wall time of the runtime call, in milliseconds (null: no call, a recording answered).",
    "attempts": "Calls made for the turn (retries of transient faults included).",
    "error": "The fault that failed the turn (null when the runtime answered).",
    "raw": "JSON text of whatever else the runtime returned (response id, usage, call ids).",
    "predicate": "The predicate or assertion name.",
    "passed": "true passed, false failed (void runs: never true), null not applicable.",
    "code": "A machine-stable code for the outcome (ok, placeholder_present, turn_error, …).",
    "severity": "Case rows: hard (the case's contract) or report. Metric rows: the threshold's ERROR or WARN.",
    "message": "Why, in a sentence a person can act on, quoting the offending part of the surface.",
    "evidence": "A JSON object with what the predicate found (the fragment, the markers, the counts).",
    "metric": "The metric's name.",
    "value": "The metric's value (null: not computable, no applicable case).",
    "numerator": "Passing cases or turns (for a rate).",
    "denominator": "Applicable cases or turns (for a rate).",
    "threshold_op": "The threshold's comparison (>=, <=, ==, >, <), if the metric has one.",
    "threshold": "The threshold's bound, if the metric has one.",
    "verdict": "pass, fail (ERROR threshold missed), warn (WARN missed), void (run not measured) or n/a.",
    "partition_date": "The night the run belongs to (YYYY-MM-DD).",
    "started_at": "When the run started (UTC).",
    "committed_at": "When the run's manifest was written: from then on history queries see it.",
    "outcome": "JSON of the run's outcome: verdict, checks, failing cases and turns, faults (what every view shows).",
    "cases_sha256": "SHA-256 of the case files' bytes: which cases were measured.",
    "pipeline_version": "The eval-pipeline version that produced the row.",
    "runtime_spec": "The adapter spec the runtime target resolved to (never a secret).",
    "runtime_options": "JSON of the runtime target's options, secrets redacted (null: it has none); "
    "with runtime_spec, what a derived runtime name stands for.",
    "dagster_job": "The Dagster job that ran.",
    "tables": "The history tables the run wrote (comma-separated).",
    "sample_index": "Which of the run's N samples of the case (each in a fresh session); 0 when N = 1.",
    "seed": "The seed the sample was sent with, derived from (run seed, case, sample); null: none.",
    "prompt_tokens": "Prompt tokens the runtime counted for the turn (its reply's usage; null: not said).",
    "completion_tokens": "Completion tokens the runtime counted for the turn (its reply's usage; null: not said).",
    "cost": "The turn's tokens at the target's price (per million input and output tokens); null: unknown. "
    "A cached turn carries what its answer cost when it was bought (nothing was spent again).",
    "cached": "true when the turn was answered from the response cache (nothing sent, no latency).",
    "ttft_ms": "Milliseconds to the first token of a streamed reply (null: not streamed or not measured).",
    "finish_reason": "Why the runtime stopped generating the turn's answer, as it said: stop, length (cut at "
    "the token limit), content_filter, tool_calls … (null: the runtime did not say).",
    "samples": "N, the samples per case the metric pools (--repeat).",
    "ci_low": "Lower end of the 95% Wilson interval on numerator / denominator.",
    "ci_high": "Upper end of the 95% Wilson interval on numerator / denominator.",
    "pass_hat_k": "pass^k: the metric counting a case (or turn) as passing only when all N samples pass.",
    "statistic": "Which statistic the threshold gated: mean, lower_bound, upper_bound or pass_hat_k.",
    "file": "The case file the case came from.",
    "line": "The line of the case in its file.",
    "case_json": "The validated case as canonical JSON.",
    "turns": "Turns the case's thread sends, per sample.",
}


@dataclass(frozen=True)
class RowShape:
    """The columns a row read back as JSON (a journal's, a cache entry's) must hold, each with
    what it takes: text for a string, true/false for a boolean, a whole number in range for an
    integer, a finite number for a float; null for any (every column is nullable). Built once
    per schema and columns, since a journal holds millions of cells."""

    columns: tuple[tuple[str, Callable[[Any], bool], str], ...]  # (name, takes a value, what it takes)
    only: bool  # no other key allowed
    optional: frozenset[str] = frozenset()  # columns a row written before they existed lacks (null)

    def misfit(self, row: Any) -> str | None:
        """Why ``row`` is not such a row (None: it is)."""
        if type(row) is not dict:
            return f"a row is {_shown(row)}, expected an object"
        for name, takes, expected in self.columns:
            if name not in row:
                if name in self.optional:
                    continue
                missing = [n for n, _, _ in self.columns if n not in row and n not in self.optional]
                return f"a row has no {', '.join(missing)}"
            value = row[name]
            if value is not None and not takes(value):
                return f"{name} is {_shown(value)}, expected {expected}"
        known = {name for name, _, _ in self.columns}
        if self.only and any(name not in known for name in row):
            extra = [_shown(name) for name in row if name not in known][:3]
            return f"a row has unknown field(s) {', '.join(extra)}"
        return None


def row_shape(
    schema: pa.Schema, names: Iterable[str], *, only: bool = False, optional: Iterable[str] = ()
) -> RowShape:
    """The :class:`RowShape` of ``schema``'s columns ``names`` (with ``only``, no other key;
    ``optional`` ones may be absent: a row written before they existed)."""
    return RowShape(
        tuple((name, *_takes(schema.field(name).type)) for name in names), only, frozenset(optional)
    )


def _takes(kind: pa.DataType) -> tuple[Callable[[Any], bool], str]:
    """What a column of Arrow type ``kind`` takes of a JSON value (bool is no number here)."""
    if pa.types.is_string(kind) or kind == JSON_TEXT:
        return (lambda value: type(value) is str), "text"
    if pa.types.is_boolean(kind):
        return (lambda value: type(value) is bool), "true or false"
    if pa.types.is_integer(kind):
        bound = 1 << (kind.bit_width - 1)
        return (
            lambda value: type(value) is int and -bound <= value < bound
        ), f"a whole number of {kind.bit_width} bits"
    if pa.types.is_floating(kind):
        return (
            lambda value: type(value) is int or (type(value) is float and math.isfinite(value))
        ), "a finite number"
    return (lambda value: False), str(kind)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def lane_columns(schema: pa.Schema) -> list[str]:
    """The columns a stage function produces: the schema minus the run columns."""
    return [name for name in schema.names if name not in RUN_COLUMN_NAMES]


def kind_columns(schema: pa.Schema) -> list[str]:
    """The columns a lane kind produces, scoring one sample: the stage's lane columns but
    ``sample_index``, which per-sample scoring adds (eval_pipeline.metrics.samples.per_sample)."""
    return [name for name in lane_columns(schema) if name != "sample_index"]


def frame(schema: pa.Schema, rows: Iterable[Mapping[str, Any]], **constants: Any) -> pd.DataFrame:
    """Build a DataFrame with exactly ``schema``'s columns, in order, typed as the schema says.

    ``constants`` fill whole columns (e.g. run columns). Columns absent from both rows and
    constants are null. Extra keys are an error: a stage must not invent columns silently.
    """
    allowed = set(schema.names)
    records = [dict(row) for row in rows]
    for record in records:
        extra = record.keys() - allowed
        if extra:
            raise ValueError(f"columns not in the table contract: {sorted(extra)}")
        record.update(constants)
    table = pa.Table.from_pylist(records, schema=schema) if records else schema.empty_table()
    return table.to_pandas(types_mapper=nullable_types)


def to_arrow(schema: pa.Schema, df: pd.DataFrame, **constants: Any) -> pa.Table:
    """Convert a stage DataFrame to an Arrow table of ``schema`` (column order and types enforced);
    ``constants`` fill whole columns (made in Arrow, not in the DataFrame)."""
    missing = [name for name in schema.names if name not in df.columns and name not in constants]
    if missing:
        raise ValueError(f"table is missing contract columns: {missing}")
    if not constants:
        return pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)
    given = [field for field in schema if field.name not in constants]
    table = pa.Table.from_pandas(
        df[[field.name for field in given]], schema=pa.schema(given), preserve_index=False
    )
    return filled(schema, table, **constants)


def filled(schema: pa.Schema, table: pa.Table, **constants: Any) -> pa.Table:
    """``table`` as a table of ``schema``: its columns of that name (already of their type)
    and ``constants`` filling whole columns (the run columns)."""
    columns = {
        field.name: pa.repeat(pa.scalar(constants[field.name], field.type), table.num_rows)
        if field.name in constants
        else table[field.name]
        for field in schema
    }
    return pa.table(columns, schema=schema)


def nullable_types(arrow_type: pa.DataType) -> Any:
    """Map Arrow types to pandas nullable dtypes so null booleans stay null (not False)."""
    if pa.types.is_boolean(arrow_type):
        return pd.BooleanDtype()
    if pa.types.is_integer(arrow_type):
        return pd.Int64Dtype()
    if pa.types.is_floating(arrow_type):
        return pd.Float64Dtype()
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return pd.StringDtype()
    if isinstance(arrow_type, pa.JsonType):
        return pd.StringDtype()
    return None


def column_values(df: pd.DataFrame, name: str) -> list[Any]:
    """A column as a plain list, nulls as None: how stage code walks a table without per-row dicts."""
    values: list[Any] = df[name].to_numpy(dtype=object, na_value=cast(Any, None)).tolist()
    return values
