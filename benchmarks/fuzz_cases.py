"""Fuzz every lane's case reading: mutated case lines through what ``validate`` and ``run`` do.

For each lane, ``--lines`` mutated lines (about a third still valid: equal JSON written
differently, free text with line separators JSON allows; the rest broken in one known way:
duplicate keys, coerced types, NaN / Infinity, lone surrogates, bad UTF-8, UTF-16, deep
nesting, truncation, huge integers, control characters, unknown or missing fields, bad ids, …)
are written in files of 250 lines with blank lines between some, then read by ``validate`` and
by ``run``'s loading path (without Dagster). Prints the counts; every count but the line
counts must be 0.

Then hostile project files and runtime replies (``eval_pipeline_tests/fuzz/hostile.py``):
``--hostile`` mutated lane.yaml, runtimes.yaml and notify.yaml files through ``validate``, and every hostile
``exec:`` reply through ``run``, each source as one batch in a child process under a memory
ceiling. Prints per source the inputs, their exit codes, the slowest input, the batch's peak
memory and the property's violations (exit 0/1/2/4 with a message, no traceback, at most 1 GB,
within the deadline), which must be 0. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the test package's fuzz harness

from eval_pipeline.lanes import discover_lanes
from eval_pipeline_tests.fuzz.bounded_cli import run_bounded
from eval_pipeline_tests.fuzz.harness import COUNT_FIELDS, FuzzCounts, fuzz_lane
from eval_pipeline_tests.fuzz.hostile import DEADLINE_S, REPLIES, Outcome

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {
    "--lines 20 --hostile 1": [
        r"^all lanes +120 +[0-9,]+( +0){5}$",
        r"^lane +1 .* 0$",
        r"^targets +1 .* 0$",
        r"^reply +\d+ .* 0$",
    ]
}

COLUMNS = COUNT_FIELDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=10_000, help="mutated lines per lane")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--hostile", type=int, default=100, help="hostile lane.yaml, runtimes.yaml and notify.yaml files each"
    )
    args = parser.parse_args()
    if args.lines:
        cases(args)
    hostile(args.hostile, args.seed)


def hostile(count: int, seed: int) -> None:
    print(
        f"\n{'source':10} {'inputs':>7} {'exit codes':28} {'slowest s':>10} {'peak MB':>8} {'violations':>11}"
    )
    for source, inputs in (
        ("lane", count),
        ("targets", count),
        ("notify", count),
        ("reply", min(count, len(REPLIES))),
    ):
        command = [
            sys.executable,
            "-m",
            "eval_pipeline_tests.fuzz.hostile",
            source,
            f"--count={inputs}",
            f"--seed={seed}",
        ]
        result = run_bounded(command, deadline_s=inputs * DEADLINE_S)
        if result.exit_code != 0:
            print(
                f"{source:10} the batch failed: {result.violations(inputs * DEADLINE_S)} {result.stderr[-500:]}"
            )
            continue
        outcomes = [Outcome(**o) for o in json.loads(result.stdout)]
        codes = Counter(o.exit_code for o in outcomes)
        shown = ", ".join(f"{code}: {n}" for code, n in sorted(codes.items(), key=str))
        violations = [f"{o.kind}: {v}" for o in outcomes for v in o.violations()]
        slowest = max(o.seconds for o in outcomes)
        print(
            f"{source:10} {len(outcomes):>7} {shown:28} {slowest:>10.1f} "
            f"{result.peak_rss_bytes / 2**20:>8.0f} {len(violations):>11}"
        )
        for violation in violations[:10]:
            print("   ", violation)


def cases(args: argparse.Namespace) -> None:
    print(f"{'lane':34} " + " ".join(f"{c:>18}" for c in COLUMNS) + f" {'seconds':>8}")
    total = FuzzCounts()
    with tempfile.TemporaryDirectory() as folder:
        for index, spec in enumerate(discover_lanes()):
            started = time.perf_counter()
            counts = fuzz_lane(spec, Path(folder), lines=args.lines, seed=args.seed + index)
            elapsed = time.perf_counter() - started
            print(
                f"{spec.name:34} "
                + " ".join(f"{getattr(counts, c):>18,}" for c in COLUMNS)
                + f" {elapsed:>8.1f}"
            )
            total.add(counts)
    print(f"{'all lanes':34} " + " ".join(f"{getattr(total, c):>18,}" for c in COLUMNS))
    print("\nmutations:", ", ".join(f"{kind} {n:,}" for kind, n in sorted(total.kinds.items())))
    for example in total.examples:
        print("  ", example)


if __name__ == "__main__":
    main()
