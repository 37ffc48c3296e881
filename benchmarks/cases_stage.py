"""The cases stage alone: a big fluency case file validated and written (``write_cases``, what
``run`` does before its Dagster run starts), in one process and side by side in workers.

For each size it writes N single-turn fluency cases (as ``scale.py`` does; or takes
``--cases``), then, in a fresh child process per measurement, times ``write_cases`` with
``EVAL_PIPELINE_WORKERS`` set to each of ``--workers`` (``auto``: unset, the usable CPUs),
the settings taking turns ``--repeat`` times. Prints the stage's wall time (worker start-up
included), the CPU seconds of the process and of its workers, and the peak RSS of the process
and its workers together (sampled from /proc). Prints figures; asserts nothing.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scale.py's case writer

from scale import FLUENCY, write_fluency

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {"--sizes 200 --workers 1 --repeat 1": [r"workers=1 +write_cases +[0-9.]+ s median"]}


def child(cases: Path) -> None:
    """In the measured process: write the cases stage once; print seconds and CPU seconds."""
    from eval_pipeline.lanes import find_lane
    from eval_pipeline.run.cases_stage import write_cases

    spec = find_lane(FLUENCY)
    started, cpu = time.perf_counter(), time.process_time()
    stage = write_cases(spec, "public", cases)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    stage.path.unlink()
    print(f"{wall} {cpu} {workers.ru_utime + workers.ru_stime}")


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants, from /proc (0 where there is none)."""
    total_kb, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total_kb += next(
                (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
            )
            pending += [int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total_kb / 1024


def measure(cases: Path, workers: str) -> tuple[float, float, float, float]:
    """(stage seconds, process CPU s, workers' CPU s, peak RSS MB) of one child run."""
    env = {k: v for k, v in os.environ.items() if k != "EVAL_PIPELINE_WORKERS"}
    if workers != "auto":
        env["EVAL_PIPELINE_WORKERS"] = workers
    with tempfile.TemporaryDirectory() as state:
        env["EVAL_PIPELINE_STATE"] = state
        command = [sys.executable, __file__, "--child", str(cases)]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, tree_rss_mb(process.pid))
            time.sleep(0.05)
        assert process.stdout is not None
        output = process.stdout.read().split()
    if process.returncode != 0 or len(output) != 3:
        raise SystemExit(f"the measured process failed (exit {process.returncode})")
    wall, cpu, worker_cpu = (float(x) for x in output)
    return wall, cpu, worker_cpu, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="cases per file, comma-separated")
    parser.add_argument("--cases", type=Path, help="measure this fluency case file instead")
    parser.add_argument("--workers", default="1,auto", help="EVAL_PIPELINE_WORKERS values to compare")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    settings = args.workers.split(",")
    with tempfile.TemporaryDirectory() as folder:
        files = (
            [args.cases]
            if args.cases
            else [write_fluency(Path(folder), int(n))[0] for n in args.sizes.split(",")]
        )
        for cases in files:
            print(f"{cases.name}: load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
            runs: dict[str, list[tuple[float, float, float, float]]] = {w: [] for w in settings}
            for _ in range(args.repeat):
                for workers in settings:
                    runs[workers].append(measure(cases, workers))
            for workers, measured in runs.items():
                walls = [m[0] for m in measured]
                print(
                    f"  workers={workers:<5} write_cases {statistics.median(walls):6.2f} s median"
                    f" ({min(walls):.2f}-{max(walls):.2f}), CPU {statistics.median(m[1] for m in measured):.1f} s"
                    f" + workers {statistics.median(m[2] for m in measured):.1f} s,"
                    f" peak RSS {max(m[3] for m in measured):.0f} MB (with workers)"
                )


if __name__ == "__main__":
    main()
