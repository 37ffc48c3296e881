"""Scoring at scale: replayed turns end to end (CLI → Dagster → Parquet → history) next to the
bare scalar predicate loop over the same surfaces.

For each N it writes N single-turn fluency cases and N/10 ten-turn thread cases, each with a
replay file of recorded surfaces (about one in twenty fails a predicate; every surface carries
its case number, so no two are alike), then runs ``eval-pipeline run --cases … --runtime
replay:…`` in a child process and, in another, the lane's predicates in a plain Python loop
over the same recorded turns. Each child's wall time and peak RSS (``wait4``) are printed
side by side. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

FLUENCY = "deterministic_fluency"
THREAD = "conversational_thread_coherence"
FLUENCY_PREDICATES = (
    "no_placeholder",
    "no_provenance_only",
    "complete_punctuation",
    "finite_predicate_shape",
    "no_dotted_inventory",
    "surface_provenance_match",
)
SUBJECTS = ("wisdom", "memory", "trust", "evidence", "time", "justice", "courage", "language")


def fluency_surface(i: int) -> dict[str, object]:
    """A recorded turn: mostly fluent, one in twenty broken in one known way."""
    subject = SUBJECTS[i % len(SUBJECTS)]
    flaw = i % 20
    if flaw == 1:
        surface = f"{subject.capitalize()} {i} is <pending>"
    elif flaw == 2:
        surface = f"{subject} — pack-grounded (core): meta.a{i}.b; meta.c.d. No session evidence yet."
    elif flaw == 3:
        surface = f"See meta.{subject}.a{i}; meta.b.c; meta.d.e for {subject}"
    else:
        surface = f"{subject.capitalize()} (note {i}) is what a careful person relies on when deciding."
    return {"surface": surface, "grounding_source": "pack", "surface_tag": "pack-grounded"}


def write_fluency(folder: Path, n: int) -> tuple[Path, Path]:
    cases, replay = folder / f"fluency_{n}.jsonl", folder / f"fluency_{n}_replay.jsonl"
    listed = list(FLUENCY_PREDICATES[:3])
    with cases.open("w") as c, replay.open("w") as r:
        for i in range(n):
            case_id = f"scale_fluency_{i:07d}"
            prompt = f"What is {SUBJECTS[i % len(SUBJECTS)]}?"
            c.write(
                json.dumps(
                    {
                        "id": case_id,
                        "prompt": prompt,
                        "category": "pack_definition",
                        "expected_predicates": listed,
                        "post_gloss_predicates": list(FLUENCY_PREDICATES[3:]),
                    }
                )
                + "\n"
            )
            r.write(
                json.dumps({"case_id": case_id, "turn_index": 0, "prompt": prompt, **fluency_surface(i)})
                + "\n"
            )
    return cases, replay


def write_thread(folder: Path, n_cases: int) -> tuple[Path, Path]:
    cases, replay = folder / f"thread_{n_cases}.jsonl", folder / f"thread_{n_cases}_replay.jsonl"
    with cases.open("w") as c, replay.open("w") as r:
        for i in range(n_cases):
            case_id = f"scale_thread_{i:07d}"
            turns = []
            for t in range(10):
                subject = SUBJECTS[(i + t // 2) % len(SUBJECTS)]
                if t % 2:
                    turns.append(
                        {
                            "prompt": "What about that?",
                            "subject_lemma": subject,
                            "anaphora_anchor_to": subject,
                        }
                    )
                else:
                    turns.append({"prompt": f"What is {subject}?", "subject_lemma": subject})
            c.write(json.dumps({"id": case_id, "turns": turns}) + "\n")
            for t, turn in enumerate(turns):
                subject = str(turn["subject_lemma"])
                body = fluency_surface(i * 10 + t)["surface"]
                surface = f"{subject.capitalize()}: {body}" if (i * 10 + t) % 20 else "..."
                r.write(
                    json.dumps(
                        {
                            "case_id": case_id,
                            "turn_index": t,
                            "prompt": turn["prompt"],
                            "surface": surface,
                            "grounding_source": "pack",
                            "surface_tag": "pack-grounded",
                        }
                    )
                    + "\n"
                )
    return cases, replay


@dataclass(frozen=True)
class Measured:
    wall_s: float
    peak_rss_mb: float
    returncode: int
    stdout: str


def measure(command: list[str], env: dict[str, str]) -> Measured:
    """Run ``command`` as a child; its wall time and its own peak RSS (``wait4``'s rusage)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    return Measured(wall, usage.ru_maxrss / 1024, child.returncode, text)


def bare_loop(lane: str, replay: Path) -> None:
    """The child side of the bare loop: read the recorded turns, judge each with the scalar
    predicates in a plain loop, print the loop's own seconds (reading excluded)."""
    from eval_pipeline.predicates import PREDICATES, TurnView

    rows = [json.loads(line) for line in replay.open()]
    views = [
        TurnView(
            surface=r["surface"], grounding_source=r.get("grounding_source"), surface_tag=r.get("surface_tag")
        )
        for r in rows
    ]
    if lane == FLUENCY:
        names: tuple[str, ...] = FLUENCY_PREDICATES
    else:
        names = ("no_placeholder", "is_grounded", "not_walk_fragment", "length_adequate")
    predicates = [PREDICATES.get(name) for name in names]
    started = time.perf_counter()
    failed = 0
    for threads in _threads(rows, views):
        for index in range(len(threads)):
            for predicate in predicates:
                failed += predicate.on_turn(threads, index).passed is False
    print(json.dumps({"loop_s": time.perf_counter() - started, "failed": failed}))


def _threads(rows: list[dict[str, object]], views: list[object]) -> Iterator[list[object]]:
    current: list[object] = []
    case = None
    for row, view in zip(rows, views, strict=True):
        if row["case_id"] != case and current:
            yield current
            current = []
        case = row["case_id"]
        current.append(view)
    if current:
        yield current


def pipeline_command(lane: str, cases: Path, replay: Path, history: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from eval_pipeline.cli import main; main()",
        "run",
        "--lane",
        lane,
        "--cases",
        str(cases),
        "--runtime",
        f"replay:{replay}",
        "--history",
        str(history),
    ]


def row(label: str, turns: int, wall: float, rss: float) -> str:
    return f"  {label:<26} {turns:>9,} {wall:>9.1f} {turns / wall:>10,.0f} {rss:>9,.0f}"


def run_size(
    n: int, folder: Path, lanes: list[str], writer: dict[str, Callable[[Path, int], tuple[Path, Path]]]
) -> None:
    for lane in lanes:
        count = n if lane == FLUENCY else n // 10
        cases, replay = writer[lane](folder, count)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(folder / f"dagster_{lane}_{n}"),
            "EVAL_PIPELINE_STATE": str(folder),
        }
        pipeline = measure(pipeline_command(lane, cases, replay, folder / f"history_{lane}_{n}"), env)
        bare = measure([sys.executable, __file__, "--bare", lane, str(replay)], env)
        loop_s = (
            json.loads(bare.stdout.strip().splitlines()[-1])["loop_s"]
            if bare.returncode == 0
            else float("nan")
        )
        print(f"{lane}, {count:,} cases, {n:,} turns (pipeline exit {pipeline.returncode})")
        print(f"  {'':<26} {'turns':>9} {'wall s':>9} {'turns/s':>10} {'peak MB':>9}")
        print(row("pipeline (CLI, end to end)", n, pipeline.wall_s, pipeline.peak_rss_mb))
        print(row("bare scalar loop", n, loop_s, bare.peak_rss_mb))
        print(f"  {'ratio pipeline / loop':<26} {'':>9} {pipeline.wall_s / loop_s:>9.2f}")
        if pipeline.returncode not in (0, 1):
            print("  pipeline output (tail):\n" + "\n".join(pipeline.stdout.splitlines()[-15:]))
        for path in (cases, replay):
            path.unlink()
        sys.stdout.flush()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--bare":
        bare_loop(sys.argv[2], Path(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="turns per lane"
    )
    parser.add_argument("--lanes", nargs="+", default=[FLUENCY, THREAD], choices=[FLUENCY, THREAD])
    parser.add_argument("--out", type=Path, default=None, help="keep the generated files and history here")
    args = parser.parse_args()
    writer = {FLUENCY: write_fluency, THREAD: write_thread}
    with tempfile.TemporaryDirectory(prefix="eval-scale-") as temp:
        folder = args.out or Path(temp)
        folder.mkdir(parents=True, exist_ok=True)
        for n in args.n:
            run_size(n, folder, args.lanes, writer)


if __name__ == "__main__":
    main()
