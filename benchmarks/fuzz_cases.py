"""Fuzz every lane's case reading: mutated case lines through what ``validate`` and ``run`` do.

For each lane, ``--lines`` mutated lines (about a third still valid: equal JSON written
differently, free text with line separators JSON allows; the rest broken in one known way:
duplicate keys, coerced types, NaN / Infinity, lone surrogates, bad UTF-8, UTF-16, deep
nesting, truncation, huge integers, control characters, unknown or missing fields, bad ids, …)
are written in files of 250 lines with blank lines between some, then read by ``validate`` and
by ``run``'s loading path (without Dagster). Prints the counts; every count but the line
counts must be 0. Asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the test package's fuzz harness

from eval_pipeline.lanes import discover_lanes
from eval_pipeline_tests.fuzz.harness import COUNT_FIELDS, FuzzCounts, fuzz_lane

COLUMNS = COUNT_FIELDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=10_000, help="mutated lines per lane")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
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
