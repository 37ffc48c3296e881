"""Repeats over the HTTP path: N samples per case keep the driver as busy as N times the cases.

Starts ``eval-pipeline serve-reference`` (its own process) with an injected latency and
drives single-turn cases ``--repeat`` times each through the ``openai:`` adapter at
``--concurrency`` sessions in flight, with a run seed (so every request carries its
sample's ``seed``), next to the ideal ``cases × repeat × latency / concurrency`` and their
ratio; then the same turns as ``cases × repeat`` distinct single-sample cases, for scale.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runtimes import single_turn_threads, start_server

from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.runtimes import build_runtime

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {
    "--cases 8 --repeat 2 --latency-ms 5 --concurrency 4": [r"^ +8 cases × repeat 2( +[0-9.]+){4} +0$"]
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=200, help="cases, each sent --repeat times")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    server, url = start_server(args.latency_ms)
    turns = args.cases * args.repeat
    ideal = turns * args.latency_ms / 1000.0 / args.concurrency
    print(
        f"openai: adapter against serve-reference, {args.cases} cases × {args.repeat} samples, "
        f"{args.latency_ms:g} ms latency, concurrency {args.concurrency}"
    )
    print(f"    {'shape':>26} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'turns/s':>8} {'errors':>6}")
    try:
        runtime = build_runtime(f"openai:{url}", {"model": "reference", "max_concurrency": args.concurrency})
        drive(runtime, single_turn_threads(64), Sending(concurrency=args.concurrency))  # warm connections
        repeated = (
            f"{args.cases} cases × repeat {args.repeat}",
            single_turn_threads(args.cases),
            args.repeat,
        )
        single = (f"{turns} cases × repeat 1", single_turn_threads(turns), 1)
        shapes = [repeated, single, repeated, single]  # twice each, interleaved: load drifts
        for label, threads, repeat in shapes:
            started = time.perf_counter()
            transcripts = drive(
                runtime, threads, Sending(concurrency=args.concurrency, repeat=repeat, seed=11)
            )
            wall = time.perf_counter() - started
            errors = int(transcripts["error"].notna().sum())
            assert len(transcripts) == turns
            print(
                f"    {label:>26} {wall:>8.2f} {ideal:>8.2f} {wall / ideal:>6.2f} {turns / wall:>8.0f} {errors:>6}"
            )
        runtime.close()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
