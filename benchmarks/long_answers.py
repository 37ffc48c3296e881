"""Long answers: the peak memory of a run whose runtime answers many kB a turn, and of the same
run resumed after a kill.

It writes ``--turns`` single-turn fluency cases and a ``python:`` bot answering ``--answer-kb``
kB of text a turn (``--turn-ms`` a turn), then runs ``eval-pipeline run --cases … --runtime
python:…`` in a child process: its wall time, its own peak RSS (``wait4``) and the peak of it
and its worker processes together. Then the same run again in a fresh state, killed once its
journal holds about half the answers, and ``--resume``'d: that resume's figures. A stage batch
is cut by turns (``EVAL_PIPELINE_BATCH_TURNS``, 20,000) and each batch is written, driven and
scored in parts of ``EVAL_PIPELINE_BATCH_BYTES`` of text, so the peak should not grow with the
answers' size. ``--baseline DIR`` runs the same from another checkout too. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scale.py's measure
from scale import FLUENCY, Measured, measure

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {
    "--turns 300 --answer-kb 20 --turn-ms 5": [
        r"^300 turns of 20 kB answers \(\d+ MB of text\)$",
        r"^  run +[0-9.]+ +[0-9,]+ +[0-9,]+ +exit [01]$",
        r"^  resumed \(killed at \d+ answered\) +[0-9.]+ +[0-9,]+ +[0-9,]+ +exit [01]$",
    ]
}

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BOT = """
import time
TEXT = ("Wisdom is what a careful person relies on when deciding. " * {repeat})[:{size}]
def chat(prompt):
    time.sleep({seconds})
    return {{"surface": TEXT, "grounding_source": "pack", "surface_tag": "pack-grounded"}}
"""


def write_inputs(folder: Path, turns: int, answer_kb: float, turn_ms: float) -> Path:
    """The case file (``turns`` fluency cases) and the bot module (``longbot.py``) in ``folder``."""
    size = int(answer_kb * 1000)
    (folder / "longbot.py").write_text(
        BOT.format(repeat=size // 50 + 1, size=size, seconds=turn_ms / 1000), encoding="utf-8"
    )
    cases = folder / "cases.jsonl"
    with cases.open("w") as out:
        for i in range(turns):
            case = {
                "id": f"long_{i:07d}",
                "prompt": "What is wisdom?",
                "category": "pack_definition",
                "expected_predicates": ["no_placeholder", "complete_punctuation"],
            }
            out.write(json.dumps(case) + "\n")
    return cases


def run_command(cases: Path, folder: Path, *extra: str) -> list[str]:
    return [
        str(Path(sys.executable).parent / "eval-pipeline"),
        "run",
        "--lane",
        FLUENCY,
        "--cases",
        str(cases),
        "--runtime",
        "python:longbot:chat",
        "-o",
        f'paths=["{folder}"]',
        "-o",
        "target=chat",
        "--date",
        "2026-12-01",
        *extra,
    ]


def state(folder: Path, name: str, checkout: Path | None) -> dict[str, str]:
    """A fresh state, history and Dagster home under ``folder``; ``checkout`` first on the path."""
    root = folder / name
    home = root / "dagster_home"
    home.mkdir(parents=True)
    env = {
        **os.environ,
        "EVAL_PIPELINE_STATE": str(root / "state"),
        "EVAL_PIPELINE_HISTORY": str(root / "history"),
        "DAGSTER_HOME": str(home),
        "EVAL_PIPELINE_PROJECT": str(checkout or PROJECT_ROOT),  # its lanes
    }
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    return env


def killed_half_way(command: list[str], env: dict[str, str], journals: Path, turns: int) -> int:
    """Run ``command`` and kill it (SIGKILL, its process group) once its journal holds about
    half of ``turns`` answers; how many it held."""
    child = subprocess.Popen(
        command,
        env=env,
        cwd=tempfile.gettempdir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    answered = 0
    try:
        while child.poll() is None and answered < turns // 2:
            time.sleep(0.2)
            answered = max(
                (
                    sum(1 for line in path.open("rb") if b'"surface"' in line)
                    for path in journals.rglob("*.journal")
                ),
                default=0,
            )
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    return answered


def row(label: str, run: Measured) -> str:
    return f"  {label:<32} {run.wall_s:>8.1f} {run.peak_rss_mb:>9,.0f} {run.peak_tree_mb:>9,.0f}   exit {run.returncode}"


def figures(folder: Path, cases: Path, turns: int, checkout: Path | None, tag: str) -> None:
    env = state(folder, f"run{tag}", checkout)
    print(row(f"run{tag}", measure(run_command(cases, folder), env)))
    env = state(folder, f"resume{tag}", checkout)
    answered = killed_half_way(run_command(cases, folder), env, folder / f"resume{tag}", turns)
    resumed = measure(run_command(cases, folder, "--resume"), env)
    print(row(f"resumed (killed at {answered} answered){tag}", resumed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12_000, help="single-turn cases")
    parser.add_argument("--answer-kb", type=float, default=20.0, help="kB of text the bot answers a turn")
    parser.add_argument("--turn-ms", type=float, default=3.0, help="the bot's time a turn")
    parser.add_argument("--baseline", type=Path, default=None, help="also run from this checkout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eval-long-answers-") as temp:
        folder = Path(temp)
        cases = write_inputs(folder, args.turns, args.answer_kb, args.turn_ms)
        text_mb = args.turns * args.answer_kb / 1000
        print(f"{args.turns} turns of {args.answer_kb:g} kB answers ({text_mb:.0f} MB of text)")
        print(f"  {'':<32} {'wall s':>8} {'peak MB':>9} {'all MB':>9}")
        figures(folder, cases, args.turns, None, "")
        if args.baseline is not None:
            figures(folder, cases, args.turns, args.baseline, " (baseline)")


if __name__ == "__main__":
    main()
