"""Adaptive concurrency against a rate-limited server: turns lost and throughput.

Serves the reference runtime on 127.0.0.1 behind a token bucket (``--rate`` requests a second,
``--burst`` held; a request beyond it is refused with 429 and the wait for the next token in
``Retry-After``), and drives ``--cases`` single-turn cases through the ``openai:`` adapter at
``--concurrency`` sessions (the adapter's ``max_concurrency`` too). Prints the turns lost (a
turn whose every attempt was refused), the throughput of answered turns against the allowed
rate, the 429s, the retries recorded on the turns and the limit the target ended with.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.adapters.openai_http import OpenAIRuntime
from eval_pipeline.runtimes.reference import default_pack
from eval_pipeline.runtimes.serve import ReferenceServer, ServeConfig

TINY_RUNS = {
    "--cases 60 --rate 50 --burst 5 --latency-ms 5 --concurrency 8": [
        r"^  turns lost: +0$",
        r"^  throughput: +[0-9.]+ turns/s = [0-9.]+ % of the allowed rate$",
        r"^  429s from the server: \d+$",
    ]
}


def single_turn_threads(cases: int) -> list[Thread]:
    words = sorted(default_pack().concepts)
    return [
        Thread(
            case_id=f"bench_{i:05d}",
            turns=(TurnRequest(turn_index=0, role="turn", prompt=f"What is {words[i % len(words)]}? ({i})"),),
        )
        for i in range(cases)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=100.0, help="requests a second the server allows")
    parser.add_argument("--burst", type=int, default=10, help="requests its bucket holds")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--max-retries", type=int, default=10)
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    config = ServeConfig(latency_ms=args.latency_ms, rate_limit_rps=args.rate, rate_limit_burst=args.burst)
    server = ReferenceServer(0, config).start_background()
    options = {"model": "reference", "max_concurrency": args.concurrency, "max_retries": args.max_retries}
    runtime = build_runtime(f"openai:{server.base_url}", options)
    assert isinstance(runtime, OpenAIRuntime)
    try:
        started = time.perf_counter()
        rows = drive(runtime, single_turn_threads(args.cases), Sending(concurrency=args.concurrency))
        wall = time.perf_counter() - started
    finally:
        runtime.close()
        server.stop()
    answered = int(rows["error"].isna().sum())
    retries = sum(len(json.loads(raw).get("retries", [])) for raw in rows["raw"].dropna())
    throughput = answered / wall
    print(
        f"rate limit {args.rate:g} req/s (burst {args.burst}), {args.latency_ms:g} ms latency, "
        f"{args.cases} single-turn cases, concurrency {args.concurrency}, max_retries {args.max_retries}"
    )
    print(f"  turns lost:          {args.cases - answered}")
    print(f"  wall:                {wall:.2f} s (ideal {args.cases / args.rate:.2f} s)")
    print(
        f"  throughput:          {throughput:.1f} turns/s = {100 * throughput / args.rate:.1f} % of the allowed rate"
    )
    print(f"  429s from the server: {server.fault_counts['over_rate_limit_429']}")
    print(
        f"  retries on turns:    {retries} (attempts {int(rows['attempts'].sum())}, requests {server.requests})"
    )
    limit = runtime.adaptive_limit
    print(f"  limit at the end:    {limit.limit:.1f} of {limit.maximum} ({limit.backoffs} back-offs)")


if __name__ == "__main__":
    main()
