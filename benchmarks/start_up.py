"""The fixed cost of the everyday loop: how long the commands people type most take, against the
embedded reference runtime, next to ``python -c "import dagster"`` measured in the same run.

Each figure is the median wall time of ``--repeat`` fresh processes of the installed command
line (``eval-pipeline`` next to this interpreter), taken in rounds that run every command once
in turn (a machine whose speed drifts moves every figure alike), in one scratch project state
(a temporary DAGSTER_HOME and history root, both warmed by one untimed run first, since the
quick start's first run also creates the instance; ``--no-warm-up`` leaves that run out). The
processes keep their compiled bytecode as an installed command does (``PYTHONDONTWRITEBYTECODE``
is unset for them), so no figure includes compiling the project's modules again:

- ``python -c "import dagster"``: the floor every Dagster run pays;
- ``eval-pipeline --help``;
- ``eval-pipeline validate`` (every lane's declaration and cases, no Dagster run);
- ``run --lane deterministic_fluency`` (15 cases), and its ratio to the import;
- ``run`` with 1, 2, … ``--lanes`` lanes in one invocation, and what each further lane adds;
- the main job (``run``: every lane);
- Dagster's own floor for one lane run: a job shaped like a lane (six assets partitioned by
  case set × runtime, with the fluency lane's dependencies and its ten checks) whose steps do
  nothing, its outputs kept in memory, executed in process on a SQLite instance like the
  project's the way a lane run is (its run file prepared, its partition lookups remembered,
  SQLite files kept open, logs quiet), the median of ``--repeat`` runs in one warm process:
  what a lane run costs before any of its work, and so the least a further lane can add; then
  one run of two such lanes' assets under one partitions definition (what all lanes in one
  Dagster run would cost, had each lane not its own case-set partitions);
- the modules a lane run loads that are not this project's (Dagster, pandas, DuckDB, pyarrow,
  SQLAlchemy, the standard library…), found by running ``run --lane deterministic_fluency`` in a
  process that then lists ``sys.modules``, imported in one fresh process in the order they were
  loaded; and the floor of one lane run: those imports plus Dagster's lane-shaped run, as a
  multiple of the Dagster import (no lane run can cost less without loading less of them).

Next to each wall time is the CPU time of the process and its children, which a loaded
machine inflates less.

The command ``run`` exits 1 when a blocking check fails and 0 otherwise; both count as a run
(the figures are times, not verdicts). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
COMMAND = str(Path(sys.executable).with_name("eval-pipeline"))
# The cheapest lanes first: the per-lane figure is about fixed cost, not a lane's own work.
LANES = (
    "deterministic_fluency",
    "articulation_of_status",
    "refusal_calibration",
    "conversational_thread_coherence",
)
# The test suite's run of this benchmark (benchmarks/README.md, "Tiny runs").
TINY_RUNS = {
    "--repeat 1 --lanes 2 --no-main-job --no-warm-up": [
        r"^eval-pipeline --help +[0-9.]+ s +[0-9.]+ s CPU$",
        r"^run, 1 lane\(s\) +[0-9.]+ s +[0-9.]+ s CPU$",
        r"^each further lane adds +-?[0-9.]+ s +-?[0-9.]+ s CPU$",
        r"^Dagster floor, one lane-shaped run +[0-9.]+ s$",
        r"^Dagster floor, two lanes' assets in one run +[0-9.]+ s$",
        r"^imports a lane run loads, not this project's \(\d+ modules\) +[0-9.]+ s +[0-9.]+ s CPU$",
        r"^floor of one lane run: those imports \+ Dagster floor +[0-9.]+ s = +[0-9.]+ × import dagster$",
    ]
}


Figure = tuple[float, float]  # (wall seconds, CPU seconds of the process and its children)


def timed(argv: Sequence[str], env: dict[str, str]) -> Figure:
    """One process's figure; raises when it exits with a code that is not a run's own."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=PROJECT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


def medians_of(commands: dict[str, list[str]], env: dict[str, str], repeat: int) -> dict[str, Figure]:
    """Each command's median figure over ``repeat`` rounds, every round running each command once
    in turn: a machine that slows down or speeds up meanwhile moves every figure alike."""
    rounds = [{name: timed(argv, env) for name, argv in commands.items()} for _ in range(repeat)]
    return {
        name: (
            statistics.median(r[name][0] for r in rounds),
            statistics.median(r[name][1] for r in rounds),
        )
        for name in commands
    }


FLOOR_CHILD = """
import statistics, sys, time, uuid
import dagster as dg
from eval_pipeline.dagster_wiring.partitions import partitions_remembered
from eval_pipeline.dagster_wiring.sqlite_files import prepare_run_file, sqlite_files_kept_open

series = dg.MultiPartitionsDefinition({
    "case_set": dg.DynamicPartitionsDefinition(name="floor__case_sets"),
    "runtime": dg.DynamicPartitionsDefinition(name="floor_runtime_targets"),
})
THRESHOLDS = [f"threshold_{i}" for i in range(8)]  # the fluency lane's checks of its metrics
SERIES_CHECKS = ["no_regression", "error_thresholds_hold"]
STAGES = {  # each stage's inputs, as in a lane
    "cases": [],
    "transcripts": ["cases"],
    "turn_predicates": ["cases", "transcripts"],
    "case_predicates": ["cases", "transcripts", "turn_predicates"],
    "metrics": ["cases", "transcripts", "turn_predicates", "case_predicates"],
    "history": ["metrics", "case_predicates", "turn_predicates", "transcripts"],
}
CHECKS = {"metrics": THRESHOLDS, "history": SERIES_CHECKS}

def stage(lane: str, name: str) -> dg.AssetsDefinition:
    key = dg.AssetKey([lane, name])
    checks = CHECKS.get(name, [])

    @dg.multi_asset(
        name=f"{lane}__{name}",
        outs={"result": dg.AssetOut(key=key, io_manager_key="memory")},
        ins={d: dg.AssetIn(dg.AssetKey([lane, d])) for d in STAGES[name]},
        check_specs=[dg.AssetCheckSpec(check, asset=key) for check in checks],
        partitions_def=series,
    )
    def step(**inputs: int):
        yield dg.Output(1)
        for check in checks:
            yield dg.AssetCheckResult(asset_key=key, check_name=check, passed=True)

    return step

def job_of(lanes: int) -> dg.JobDefinition:
    stages = [stage(f"lane{n}", name) for n in range(lanes) for name in STAGES]
    return dg.Definitions(
        assets=stages, resources={"memory": dg.InMemoryIOManager()}
    ).resolve_implicit_global_asset_job_def()

instance = dg.DagsterInstance.get()
instance.add_dynamic_partitions("floor__case_sets", ["public"])
instance.add_dynamic_partitions("floor_runtime_targets", ["reference"])
key = dg.MultiPartitionKey({"case_set": "public", "runtime": "reference"})
quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}

def run(job: dg.JobDefinition) -> None:  # as launch.materialize_lane runs a lane's job
    run_id = str(uuid.uuid4())
    with sqlite_files_kept_open(), partitions_remembered(instance):
        prepare_run_file(instance.root_directory, run_id)
        job.execute_in_process(instance=instance, partition_key=key, run_config=quiet, run_id=run_id)

for lanes in (1, 2):
    job = job_of(lanes)
    run(job)  # the instance's files and the job's snapshot exist
    seconds = []
    for _ in range(int(sys.argv[1])):
        started = time.perf_counter()
        run(job)
        seconds.append(time.perf_counter() - started)
    print(statistics.median(seconds))
"""


# Runs one lane in this process, then writes the modules it loaded that are not this project's
# to the file named by its argument (the run prints its tables to stdout).
LOADED_CHILD = """
import sys
from pathlib import Path
from eval_pipeline.cli import main
listing = Path(sys.argv[1])
sys.argv = ["eval-pipeline", "run", "--lane", "deterministic_fluency"]
try:
    main()
except SystemExit:
    pass
ours = ("eval_pipeline", "__main__")
listing.write_text("\\n".join(name for name in list(sys.modules) if not name.startswith(ours)))
"""
# Imports the modules named on its command line, in that order (one the import system cannot
# load again by name, such as an alias a package set in sys.modules, is left out), then freezes
# what they made, as the command line freezes what its start-up made (core.collector): without
# that, the interpreter's exit would walk every object of them (about half a second after
# importing Dagster), which a run's process does not pay.
IMPORT_CHILD = """
import gc, importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
gc.freeze()
"""


def lane_run_modules(env: dict[str, str], scratch: Path) -> list[str]:
    """The modules a one-lane run loads that are not this project's, in the order loaded."""
    listing = scratch / "lane_run_modules.txt"
    done = subprocess.run(
        [sys.executable, "-c", LOADED_CHILD, str(listing)],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
    )
    if not listing.is_file():
        raise SystemExit(f"listing a lane run's modules failed:\n{done.stderr[-2000:]}")
    return listing.read_text(encoding="utf-8").split()


def dagster_floor(env: dict[str, str], repeat: int, home: Path) -> tuple[float, float]:
    """Median seconds of one trivial lane-shaped run, and of one run of two lanes' assets (see
    the module docstring), in one process."""
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(
        (PROJECT / "dagster.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-c", FLOOR_CHILD, str(repeat)],
        cwd=PROJECT,
        env={**env, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"the Dagster floor run failed:\n{done.stderr[-2000:]}")
    one, two = (float(line) for line in done.stdout.split()[-2:])
    return one, two


def lane_args(count: int) -> list[str]:
    return [arg for lane in LANES[:count] for arg in ("--lane", lane)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="processes per figure (median)")
    parser.add_argument("--lanes", type=int, default=len(LANES), help="most lanes in one invocation")
    parser.add_argument("--no-main-job", action="store_true", help="skip the every-lane run")
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="skip the untimed first run (the first timed one then creates the instance and history)",
    )
    args = parser.parse_args()
    lanes = max(1, min(args.lanes, len(LANES)))

    with tempfile.TemporaryDirectory(prefix="start-up-") as scratch:
        env = {
            **os.environ,
            "DAGSTER_HOME": str(Path(scratch) / "dagster_home"),
            "EVAL_PIPELINE_HISTORY": str(Path(scratch) / "history"),
            "COLUMNS": "100",
        }
        env.pop("EVAL_PIPELINE_RUNTIME", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if not args.no_warm_up:
            timed([COMMAND, "run", *lane_args(1)], env)  # creates the instance and the history root

        modules = lane_run_modules(env, Path(scratch))
        loads = f"imports a lane run loads, not this project's ({len(modules)} modules)"
        commands = {
            'python -c "import dagster"': [sys.executable, "-c", "import dagster"],
            loads: [sys.executable, "-c", IMPORT_CHILD, *modules],
            "eval-pipeline --help": [COMMAND, "--help"],
            "eval-pipeline validate": [COMMAND, "validate"],
            **{f"run, {k} lane(s)": [COMMAND, "run", *lane_args(k)] for k in range(1, lanes + 1)},
            **({} if args.no_main_job else {"run (main job, every lane)": [COMMAND, "run"]}),
        }
        measured = medians_of(commands, env, args.repeat)
        figures = list(measured.items())
        imports = measured['python -c "import dagster"']
        by_count = {k: measured[f"run, {k} lane(s)"] for k in range(1, lanes + 1)}
        floor = dagster_floor(env, args.repeat, Path(scratch) / "floor_home")

    floor_two = "Dagster floor, two lanes' assets in one run"
    width = max([len(name) for name, _ in figures] + [len(floor_two)])
    print(f"median of {args.repeat} rounds of one process each; wall seconds, then CPU seconds")
    for name, (wall, cpu) in figures:
        print(f"{name:<{width}}  {wall:6.2f} s  {cpu:6.2f} s CPU")
    print(f"{'run, 1 lane / import dagster':<{width}}  {by_count[1][0] / imports[0]:6.2f} ×")
    if lanes > 1:
        per_lane = [(by_count[lanes][i] - by_count[1][i]) / (lanes - 1) for i in (0, 1)]
        print(f"{'each further lane adds':<{width}}  {per_lane[0]:6.2f} s  {per_lane[1]:6.2f} s CPU")
    print(f"{'Dagster floor, one lane-shaped run':<{width}}  {floor[0]:6.2f} s")
    print(f"{floor_two:<{width}}  {floor[1]:6.2f} s")
    lane_floor = measured[loads][0] + floor[0]
    print(
        f"floor of one lane run: those imports + Dagster floor  {lane_floor:6.2f} s = "
        f"{lane_floor / imports[0]:5.2f} × import dagster"
    )


if __name__ == "__main__":
    main()
