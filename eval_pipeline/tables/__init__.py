"""The tables that flow between stages: their column contracts (columns) and the Parquet
stage files they are read from and written to one case batch at a time (stage_files).

What other rooms use is exported here and loaded on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.core.faces import lazy_exports

if TYPE_CHECKING:
    from eval_pipeline.tables.columns import (
        CASE_PREDICATES,
        CASES,
        COLUMN_DESCRIPTIONS,
        JSON_TEXT,
        METRICS,
        RUN_COLUMN_NAMES,
        RUN_MANIFESTS,
        SCHEMAS,
        TRANSCRIPTS,
        TURN_PREDICATES,
        column_values,
        frame,
        kind_columns,
        lane_columns,
        nullable_types,
        row_shape,
        to_arrow,
    )
    from eval_pipeline.tables.stage_files import (
        OUTCOME_ATTR,
        StageFile,
        StageWriter,
        aligned_batch,
        aligned_count,
        batch_turns,
        failed,
        faulted,
        read_table,
    )

_EXPORTS: dict[str, str] = {
    "CASES": "columns",
    "CASE_PREDICATES": "columns",
    "COLUMN_DESCRIPTIONS": "columns",
    "JSON_TEXT": "columns",
    "METRICS": "columns",
    "OUTCOME_ATTR": "stage_files",
    "RUN_COLUMN_NAMES": "columns",
    "RUN_MANIFESTS": "columns",
    "SCHEMAS": "columns",
    "StageFile": "stage_files",
    "StageWriter": "stage_files",
    "TRANSCRIPTS": "columns",
    "TURN_PREDICATES": "columns",
    "aligned_batch": "stage_files",
    "aligned_count": "stage_files",
    "batch_turns": "stage_files",
    "column_values": "columns",
    "failed": "stage_files",
    "faulted": "stage_files",
    "frame": "columns",
    "kind_columns": "columns",
    "lane_columns": "columns",
    "nullable_types": "columns",
    "read_table": "stage_files",
    "row_shape": "columns",
    "to_arrow": "columns",
}
__all__ = [
    "CASES",
    "CASE_PREDICATES",
    "COLUMN_DESCRIPTIONS",
    "JSON_TEXT",
    "METRICS",
    "OUTCOME_ATTR",
    "RUN_COLUMN_NAMES",
    "RUN_MANIFESTS",
    "SCHEMAS",
    "TRANSCRIPTS",
    "TURN_PREDICATES",
    "StageFile",
    "StageWriter",
    "aligned_batch",
    "aligned_count",
    "batch_turns",
    "column_values",
    "failed",
    "faulted",
    "frame",
    "kind_columns",
    "lane_columns",
    "nullable_types",
    "read_table",
    "row_shape",
    "to_arrow",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
