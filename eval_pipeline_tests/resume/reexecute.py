"""Re-execute a failed lane run from failure, as the Dagster UI's "Re-execute from failure"
does: ``python reexecute.py JOB RUN_ID`` on the instance at DAGSTER_HOME; exit 0 when the
re-execution succeeded."""

from __future__ import annotations

import sys
from pathlib import Path

import dagster as dg
from dagster._core.definitions.reconstruct import ReconstructableRepository

from eval_pipeline.dagster_wiring.launch import CODE_LOCATION_MODULE, ensure_instance

# The repository this script is in (run as a script, the test package is not importable).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
REEXECUTION_TAGS = {"dagster/parent_run_id", "dagster/root_run_id", "dagster/is_resume_retry"}


def main(job: str, run_id: str) -> int:
    instance = ensure_instance()  # marks the killed run failed, as the next command on a host does
    reconstructable = ReconstructableRepository.for_module(
        CODE_LOCATION_MODULE, "defs", working_directory=str(PROJECT_ROOT)
    ).get_reconstructable_job(job)
    options = dg.ReexecutionOptions.from_failure(run_id, instance)
    parent = instance.get_run_by_id(run_id)
    assert parent is not None
    # The UI's re-execution keeps the parent's tags (its partition and series among them).
    tags = {key: value for key, value in parent.tags.items() if key not in REEXECUTION_TAGS}
    with dg.execute_job(reconstructable, instance, tags=tags, reexecution_options=options) as result:
        print(result.run_id)
        for failure in result.get_step_failure_events():
            print(f"{failure.step_key}: {failure.step_failure_data.error}", file=sys.stderr)
        return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
