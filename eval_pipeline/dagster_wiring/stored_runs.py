"""A run's stage tables as the instance stored them, found by run id prefix.

History keeps only runs that reached the ``history`` asset; a run that broke before it (a
stage raised, a worker died) still left its stage tables in the instance's storage
(``tables/<lane>/<asset>/<case_set>/<runtime>/<run_id>.parquet``, see ``io_manager``), so
``eval-pipeline show`` can explain it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from eval_pipeline.tables import read_table


@dataclass(frozen=True)
class StoredRun:
    run_id: str
    lane: str
    case_set: str
    runtime: str
    folder: Path  # <tables>/<lane>

    def table(self, asset: str) -> pd.DataFrame | None:
        path = self.folder / asset / self.case_set / self.runtime / f"{self.run_id}.parquet"
        return read_table(path) if path.exists() else None


def stored_runs(tables_dir: Path, prefix: str) -> list[StoredRun]:
    """Every lane run whose stored ``case_predicates`` file name starts with ``prefix``."""
    if not prefix or not tables_dir.is_dir():
        return []
    found = []
    for path in sorted(tables_dir.glob(f"*/case_predicates/*/*/{prefix.lower()}*.parquet")):
        lane_folder = path.parents[3]
        found.append(
            StoredRun(path.stem, lane_folder.name, path.parents[1].name, path.parent.name, lane_folder)
        )
    return found
