"""Runtime driving speed: the OpenAI-compatible HTTP path and CPU-bound Python in worker processes.

(a) Starts ``eval-pipeline serve-reference`` (its own process) with an injected latency and
drives single-turn cases through the ``openai:`` adapter at several concurrencies, next to
the ideal ``turns × latency / concurrency``, each concurrency also with the run's journal
kept (every session appended and fsynced as a real run does; median of ``--rounds-each``
alternating rounds, so a busy machine slows both alike) and the journal's overhead, and the
CPU a turn of the client (this process) and of the server; with ``--cache``, also without and
through the response cache alternately, ``--cache-rounds`` times each (cold: every session
stored), the median of each and the cold run's overhead, then warm (every session answered
from the cache). (b) Drives a CPU-bound ``python:`` runtime with
1 and with N worker processes. (c) The ``exec:`` protocol's own cost: turns per second
through a child that answers at once, and the time from starting a child (behind its
guard) to its first reply. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from statistics import median
from typing import Any

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import Books, Sending, drive
from eval_pipeline.run.journal import JournalIdentity
from eval_pipeline.run.ledger import Journaling, open_ledger
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.budget import Budget
from eval_pipeline.runtimes.cache import ResponseCache
from eval_pipeline.runtimes.reference import default_pack

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {
    "--cases 40 --latency-ms 5 --concurrency 4 --cpu-cases 4 --rounds 1000 --workers 2 --exec-cases 50 "
    "--exec-starts 1": [
        r"^ +4( +[0-9.]+){4} +0 +[0-9.]+ +[-+][0-9.]+%$",  # ..., errors, with the journal, its overhead
        r"^ +CPU a turn: client [0-9,]+ µs, serve-reference [0-9,]+ µs$",
        r"^ +2( +[0-9.]+){2} +[0-9.]+x$",
        r"turns/s \(\d+ µs a turn\)$",
        r"start to first reply .*: \d+ ms$",
    ],
    "--cases 40 --latency-ms 5 --concurrency 4 --cache --only http": [
        r"^ +cache cold +[0-9.]+ +wall s [0-9., ]+; CPU s [0-9., ]+$",
        r"^ +cache overhead \(median of \d+\): wall [-+][0-9.]+ %, CPU [-+][0-9.]+ %$",
        r"^ +cache overhead \(all \d+ rounds\): wall [-+][0-9.]+ %, CPU [-+][0-9.]+ %$",
        r"^ +cache warm +[0-9.]+ +40 of 40 turns from the cache$",
    ],
}


def single_turn_threads(cases: int) -> list[Thread]:
    words = sorted(default_pack().concepts)
    return [
        Thread(
            case_id=f"bench_{i:05d}",
            turns=(TurnRequest(turn_index=0, role="turn", prompt=f"What is {words[i % len(words)]}?"),),
        )
        for i in range(cases)
    ]


def start_server(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-c", "from eval_pipeline.cli import main; main()", "serve-reference"]
    server = subprocess.Popen(
        [*command, "--port", "0", "--latency-ms", str(latency_ms)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    match = re.search(r"(http://\S+)", server.stdout.readline())
    if match is None:
        server.kill()
        raise SystemExit("serve-reference did not report its URL")
    return server, match.group(1)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def journaled_drive(
    runtime: object, threads: list[Thread], concurrency: int, folder: Path, run: int
) -> float:
    """Wall seconds of one drive with the run's journal kept (its writer closed, all fsynced)."""
    identity = JournalIdentity("bench", "dev", "dev", "0" * 64, "bench", None, 1, None)
    started = time.perf_counter()
    ledger = open_ledger(Journaling(folder, f"run-{run}"), identity, Budget(), print)
    try:
        drive(runtime, threads, Sending(concurrency=concurrency), books=Books(ledger=ledger))  # type: ignore[arg-type]
    finally:
        ledger.close()
    return time.perf_counter() - started


def http_figures(
    cases: int, latency_ms: float, concurrencies: list[int], rounds: int, *, cache_rounds: int = 0
) -> None:
    server, url = start_server(latency_ms)
    threads = single_turn_threads(cases)
    print(
        f"(a) openai: adapter against serve-reference, {cases} single-turn cases, {latency_ms:g} ms latency"
    )
    print(
        f"    {'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'turns/s':>8} {'errors':>6}"
        f" {'journal s':>9} {'overhead':>8}"
    )
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for concurrency in concurrencies:
                runtime = build_runtime(
                    f"openai:{url}", {"model": "reference", "max_concurrency": concurrency}
                )
                drive(
                    runtime, threads[: min(64, cases)], Sending(concurrency=concurrency)
                )  # warm connections
                plain, journaled, errors = [], [], 0
                client_cpu, server_cpu = [], []
                for run in range(rounds):
                    started, client, served = (
                        time.perf_counter(),
                        time.process_time(),
                        process_cpu(server.pid),
                    )
                    transcripts = drive(runtime, threads, Sending(concurrency=concurrency))
                    plain.append(time.perf_counter() - started)
                    client_cpu.append(time.process_time() - client)
                    server_cpu.append(process_cpu(server.pid) - served)
                    errors = int(transcripts["error"].notna().sum())
                    journaled.append(journaled_drive(runtime, threads, concurrency, Path(scratch), run))
                wall, with_journal = sorted(plain)[rounds // 2], sorted(journaled)[rounds // 2]
                ideal = cases * latency_ms / 1000.0 / concurrency
                print(
                    f"    {concurrency:>11} {wall:>8.2f} {ideal:>8.2f} {wall / ideal:>6.2f} {cases / wall:>8.0f}"
                    f" {errors:>6} {with_journal:>9.2f} {(with_journal / wall - 1) * 100:>+7.1f}%"
                )
                print(
                    f"    {'':>11} CPU a turn: client {median(client_cpu) / cases * 1e6:,.0f} µs,"
                    f" serve-reference {median(server_cpu) / cases * 1e6:,.0f} µs"
                )
                if cache_rounds:
                    cached_figures(runtime, threads, concurrency, cache_rounds)
                runtime.close()
    finally:
        server.terminate()
        server.wait()


def cached_figures(runtime: Any, threads: list[Thread], concurrency: int, rounds: int) -> None:
    """The same drive without and through a response cache in a fresh folder (cold: every
    session stored, the cache's opening and closing timed too), alternately (which goes first
    alternating too), ``rounds`` times, the median of each, in wall time and in this
    process's CPU time (the server runs in its own); then warm (every session a hit). Runs of one
    kind differ by a fifth on a shared machine, so the medians, not the best, are compared."""
    plain: list[tuple[float, float]] = []
    cold: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as folder:
        for round_number in range(rounds):
            without = partial(drive, runtime, threads, Sending(concurrency=concurrency))
            through = partial(
                cold_drive, runtime, threads, concurrency, f"bench-{round_number}", Path(folder)
            )
            # Every other round the cached drive goes first, so a drift in the machine's load
            # (or the server's) falls on both kinds alike.
            if round_number % 2:
                cold.append(_timed(through))
                plain.append(_timed(without))
            else:
                plain.append(_timed(without))
                cold.append(_timed(through))
        warm_cache = ResponseCache(f"bench-{rounds - 1}", Path(folder))
        started = time.perf_counter()
        warm = drive(runtime, threads, Sending(concurrency=concurrency), books=Books(cache=warm_cache))
        warm_wall = time.perf_counter() - started
        warm_cache.close()
    for label, runs in (("no cache", plain), ("cache cold", cold)):
        walls = ", ".join(f"{wall:.2f}" for wall, _ in runs)
        cpus = ", ".join(f"{cpu:.2f}" for _, cpu in runs)
        print(f"    {label:>11} {median(w for w, _ in runs):>8.2f}   wall s {walls}; CPU s {cpus}")
    wall_overhead = median(w for w, _ in cold) / median(w for w, _ in plain) - 1.0
    cpu_overhead = median(c for _, c in cold) / median(c for _, c in plain) - 1.0
    print(
        f"    cache overhead (median of {rounds}): wall {100 * wall_overhead:+.1f} %, CPU {100 * cpu_overhead:+.1f} %"
    )
    # Over all rounds: the time every cached drive took against every plain one. Alternating
    # which goes first leaves a drift in the machine's load on both kinds alike, and unlike
    # the medians this counts every round.
    total_wall = sum(w for w, _ in cold) / sum(w for w, _ in plain) - 1.0
    total_cpu = sum(c for _, c in cold) / sum(c for _, c in plain) - 1.0
    print(
        f"    cache overhead (all {rounds} rounds): wall {100 * total_wall:+.1f} %, CPU {100 * total_cpu:+.1f} %"
    )
    print(
        f"    {'cache warm':>11} {warm_wall:>8.2f}   {int(warm['cached'].sum())} of {len(threads)} turns from the cache"
    )


def cold_drive(runtime: Any, threads: list[Thread], concurrency: int, version: str, folder: Path) -> None:
    """One drive through a fresh cache, as a run pays for it: opened (its folder indexed),
    every session stored, and closed (the last entries written)."""
    cache = ResponseCache(version, folder)
    try:
        drive(runtime, threads, Sending(concurrency=concurrency), books=Books(cache=cache))
    finally:
        cache.close()


def _timed(work: Any) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of ``work()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def cpu_figures(cases: int, rounds: int, workers: list[int]) -> None:
    threads = single_turn_threads(cases)
    repo = str(Path(__file__).resolve().parent.parent)
    print(f"(b) python: CPU-bound runtime ({rounds} SHA-256 rounds per turn), {cases} single-turn cases")
    print(f"    {'workers':>11} {'wall s':>8} {'turns/s':>8} {'speed-up':>8}")
    baseline = None
    for count in workers:
        runtime = build_runtime(
            # The test suite's CPU-bound bot: one definition serves the tests and this benchmark.
            "python:eval_pipeline_tests.runtimes.bots:CpuBoundBot",
            {"paths": [repo], "workers": count, "kwargs": {"rounds": rounds}},
        )
        drive(runtime, threads[:count], Sending(concurrency=None))  # start the workers before timing
        started = time.perf_counter()
        transcripts = drive(runtime, threads, Sending(concurrency=None))
        wall = time.perf_counter() - started
        runtime.close()
        assert transcripts["error"].isna().all(), transcripts["error"].dropna().head()
        baseline = baseline or wall
        print(f"    {count:>11} {wall:>8.2f} {cases / wall:>8.1f} {baseline / wall:>7.2f}x")


# Answers at once, so the figures are the protocol's cost and nothing else.
ECHO_CHILD = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps({"id": request["id"], "surface": request.get("prompt", "")}), flush=True)
"""


def exec_figures(cases: int, starts: int) -> None:
    threads = single_turn_threads(cases)
    with tempfile.TemporaryDirectory() as scratch:
        child = Path(scratch, "echo_child.py")
        child.write_text(ECHO_CHILD, encoding="utf-8")
        spec = f"exec:{shlex.join([sys.executable, str(child)])}"
        runtime = build_runtime(spec, {"workers": 1})
        drive(runtime, threads[:10])  # start the child before timing
        started = time.perf_counter()
        transcripts = drive(runtime, threads)
        wall = time.perf_counter() - started
        runtime.close()
        assert transcripts["error"].isna().all(), transcripts["error"].dropna().head()
        print(f"(c) exec: protocol v2, a child that answers at once, {cases} single-turn cases, 1 worker")
        print(f"    {cases / wall:>8.0f} turns/s ({wall / cases * 1e6:.0f} µs a turn)")
        first_replies = []
        for _ in range(starts):
            started = time.perf_counter()
            runtime = build_runtime(spec, {"workers": 1})
            drive(runtime, threads[:1])
            first_replies.append(time.perf_counter() - started)
            runtime.close()
        first_replies.sort()
        median = first_replies[len(first_replies) // 2]
        print(f"    start to first reply (guard + child), median of {starts}: {median * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--cases", type=int, default=2000, help="single-turn cases for (a); 2000 takes ~2 min"
    )
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument(
        "--rounds-each", type=int, default=3, help="rounds with and without the journal in (a); the median"
    )
    parser.add_argument("--cpu-cases", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=100_000, help="CPU work per turn in (b)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="N for (b)")
    parser.add_argument("--exec-cases", type=int, default=5000, help="single-turn cases for (c)")
    parser.add_argument("--exec-starts", type=int, default=9, help="child starts timed in (c)")
    parser.add_argument("--cache", action="store_true", help="(a) through the response cache too")
    parser.add_argument(
        "--cache-rounds", type=int, default=5, help="alternating rounds of each kind with --cache"
    )
    parser.add_argument(
        "--only", choices=["http", "cpu", "exec"], help="run one section (default: all three)"
    )
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    if args.only in (None, "http"):
        http_figures(
            args.cases,
            args.latency_ms,
            args.concurrency,
            args.rounds_each,
            cache_rounds=args.cache_rounds if args.cache else 0,
        )
    if args.only in (None, "cpu"):
        cpu_figures(args.cpu_cases, args.rounds, sorted({1, args.workers}))
    if args.only in (None, "exec"):
        exec_figures(args.exec_cases, args.exec_starts)


if __name__ == "__main__":
    main()
