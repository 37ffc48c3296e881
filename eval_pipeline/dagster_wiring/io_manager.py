"""Stage tables stored as Parquet, one file per asset partition *and run*.

``<base>/<lane>/<asset>/<case_set>/<runtime>/<run_id>.parquet``: two runs of one partition
(two nights, or two runs started at once) never write the same file, so their rows cannot
mix. A step reads its inputs from its own run's files; when its run did not produce an
input (a re-execution of failed steps, or materializing one stage alone) it reads the file
recorded by that input's latest materialization. Files are written to a temporary name
and renamed, so a failed step never leaves half a file. With no ``base_dir`` the files live
in the Dagster instance's storage folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import PrivateAttr

from eval_pipeline.dagster_wiring.partitions import series_of
from eval_pipeline.tables import OUTCOME_ATTR, StageFile, read_table

PATH_METADATA = "path"


class ParquetIOManager(dg.ConfigurableIOManager):
    """Stores stage tables as Parquet files under ``base_dir``.

    An asset returns a pandas DataFrame (written here) or a :class:`StageFile` it wrote batch
    by batch (moved here); an input annotated ``StageFile`` is handed the file to stream,
    any other input reads the whole table."""

    base_dir: str = ""
    _resolved_base: Path = PrivateAttr(default=Path("."))

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if self.base_dir:
            self._resolved_base = Path(self.base_dir)
        elif context.instance is not None:
            self._resolved_base = Path(context.instance.storage_directory()) / "tables"
        else:
            raise ValueError("ParquetIOManager needs base_dir when no Dagster instance is available")

    def _path(self, asset_key: dg.AssetKey, partition: str | None, run_id: str) -> Path:
        folder = self._resolved_base.joinpath(*asset_key.path)
        if partition is not None:
            folder = folder.joinpath(*series_of(partition))
        return folder / f"{run_id}.parquet"

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame | StageFile) -> None:
        partition = context.asset_partition_key if context.has_asset_partitions else None
        path = self._path(context.asset_key, partition, context.run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
        os.close(handle)
        try:
            if isinstance(obj, StageFile):
                shutil.move(obj.path, temp)  # a rename on one file system
            else:
                table = pa.Table.from_pandas(obj, preserve_index=False)
                if OUTCOME_ATTR in obj.attrs:
                    kept = {
                        **(table.schema.metadata or {}),
                        OUTCOME_ATTR.encode(): obj.attrs[OUTCOME_ATTR].encode(),
                    }
                    table = table.replace_schema_metadata(kept)
                pq.write_table(table, temp, compression="zstd", row_group_size=max(len(table), 1))
            os.replace(temp, path)
        finally:
            if os.path.exists(temp):
                os.remove(temp)
        context.add_output_metadata({PATH_METADATA: dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> Any:
        partition = context.asset_partition_key if context.has_asset_partitions else None
        path = self._path(context.asset_key, partition, context.step_context.run_id)
        if not path.exists():
            path = self._latest_materialized(context, partition) or path
        if not path.exists():
            raise FileNotFoundError(
                f"{path} does not exist: materialize {context.asset_key.to_user_string()} for this partition first"
            )
        if context.dagster_type.typing_type is StageFile:
            return StageFile(path)
        return read_table(path)

    def _latest_materialized(self, context: dg.InputContext, partition: str | None) -> Path | None:
        """The file recorded by the input's latest materialization of this partition, if any."""
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=context.asset_key, asset_partitions=[partition] if partition else None
            ),
            limit=1,
        ).records
        if not records or records[0].asset_materialization is None:
            return None
        recorded = records[0].asset_materialization.metadata.get(PATH_METADATA)
        return Path(str(recorded.value)) if recorded is not None else None
