"""Column contracts of the tables that flow between stages and into history.

Stage functions produce the *lane columns*; the Dagster wiring adds the *run columns*
(run_id and the run's series: lane, split, runtime, case_set) that every stored table
carries. One pyarrow schema per table keeps Parquet files of different runs and lanes
union-compatible.

A **series** is what a run is compared with: the same lane, split, runtime target (its
name, see :mod:`eval_pipeline.runtimes.targets`) and case set (the split's own files, named
after the split, or ``custom-<hash>`` for a case file given with ``--cases``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import pyarrow as pa

RUN_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("run_id", pa.string()),
    pa.field("lane", pa.string()),
    pa.field("split", pa.string()),
    pa.field("runtime", pa.string()),  # the runtime target's name
    pa.field("case_set", pa.string()),  # the split's name, or custom-<sha256 prefix> for --cases
)

SERIES_COLUMN_NAMES: tuple[str, ...] = ("lane", "split", "runtime", "case_set")

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
        pa.field("evidence", pa.string()),  # JSON text
    ]
)

CASE_PREDICATES = pa.schema(
    [
        *RUN_COLUMNS,
        pa.field("case_id", pa.string()),
        pa.field("predicate", pa.string()),  # predicate or assertion name
        pa.field("passed", pa.bool_()),  # null = not applicable to this case
        pa.field("severity", pa.string()),
        pa.field("code", pa.string()),
        pa.field("message", pa.string()),
        pa.field("evidence", pa.string()),  # JSON text
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
        pa.field("passed", pa.bool_()),  # null when the metric has no threshold
        pa.field("partition_date", pa.string()),
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
        pa.field("cases_sha256", pa.string()),
        pa.field("pipeline_version", pa.string()),
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
    ]
)

SCHEMAS: Mapping[str, pa.Schema] = {
    "transcripts": TRANSCRIPTS,
    "turn_predicates": TURN_PREDICATES,
    "case_predicates": CASE_PREDICATES,
    "metrics": METRICS,
    "run_manifests": RUN_MANIFESTS,
}

RUN_COLUMN_NAMES: tuple[str, ...] = tuple(f.name for f in RUN_COLUMNS)


def lane_columns(schema: pa.Schema) -> list[str]:
    """The columns a stage function produces: the schema minus the run columns."""
    return [name for name in schema.names if name not in RUN_COLUMN_NAMES]


def frame(schema: pa.Schema, rows: Iterable[Mapping[str, Any]], **constants: Any) -> pd.DataFrame:
    """Build a DataFrame with exactly ``schema``'s columns, in order, typed as the schema says.

    ``constants`` fill whole columns (e.g. run columns). Columns absent from both rows and
    constants are null. Extra keys are an error: a stage must not invent columns silently.
    """
    records = [dict(row) for row in rows]
    for record in records:
        extra = set(record) - set(schema.names)
        if extra:
            raise ValueError(f"columns not in the table contract: {sorted(extra)}")
        record.update(constants)
    table = pa.Table.from_pylist(records, schema=schema) if records else schema.empty_table()
    return table.to_pandas(types_mapper=nullable_types)


def to_arrow(schema: pa.Schema, df: pd.DataFrame) -> pa.Table:
    """Convert a stage DataFrame to an Arrow table of ``schema`` (column order and types enforced)."""
    missing = [name for name in schema.names if name not in df.columns]
    if missing:
        raise ValueError(f"table is missing contract columns: {missing}")
    return pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)


def with_run_columns(df: pd.DataFrame, schema: pa.Schema, **run_values: str) -> pd.DataFrame:
    """Return ``df`` with the run columns set, ordered and typed as ``schema``."""
    out = df.copy()
    for name, value in run_values.items():
        out[name] = value
    return to_arrow(schema, out).to_pandas(types_mapper=nullable_types)


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
    return None
