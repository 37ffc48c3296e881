"""Stage tables stored as Parquet, one file per asset partition.

``<base>/<lane>/<asset>/<date>/<split>.parquet``; written to a temporary name and renamed,
so a failed step never leaves half a file. With no ``base_dir`` the files live in the
Dagster instance's storage folder.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import PrivateAttr

from eval_pipeline.dagster_wiring.partitions import date_and_split
from eval_pipeline.tables import nullable_types


class ParquetIOManager(dg.ConfigurableIOManager):
    """Reads and writes pandas DataFrames as Parquet files under ``base_dir``."""

    base_dir: str = ""
    _resolved_base: Path = PrivateAttr(default=Path("."))

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if self.base_dir:
            self._resolved_base = Path(self.base_dir)
        elif context.instance is not None:
            self._resolved_base = Path(context.instance.storage_directory()) / "tables"
        else:
            raise ValueError("ParquetIOManager needs base_dir when no Dagster instance is available")

    def _path(self, context: dg.InputContext | dg.OutputContext) -> Path:
        path = self._resolved_base.joinpath(*context.asset_key.path)
        if context.has_asset_partitions:
            date, split = date_and_split(context.asset_partition_key)
            return path / date / f"{split}.parquet"
        return path.with_suffix(".parquet")

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        path = self._path(context)
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pandas(obj, preserve_index=False)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
        os.close(handle)
        try:
            pq.write_table(table, temp, compression="zstd")
            os.replace(temp, path)
        finally:
            if os.path.exists(temp):
                os.remove(temp)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        path = self._path(context)
        if not path.exists():
            raise FileNotFoundError(
                f"{path} does not exist: materialize {context.asset_key.to_user_string()} for this partition first"
            )
        return pq.read_table(path).to_pandas(types_mapper=nullable_types)
