"""Scoring at scale: replayed turns end to end (CLI → Dagster → Parquet → history) next to the
bare scalar predicate loop over the same surfaces.

For each N it writes N single-turn fluency cases and N/10 ten-turn thread cases, each with a
replay file of recorded surfaces (about one in twenty fails a predicate; every surface carries
its case number, so no two are alike), then runs ``eval-pipeline run --cases … --runtime
replay:…`` in a child process and, in another, the lane's predicates in a plain Python loop
over the same recorded turns. Each child's wall time, its own peak RSS (``wait4``) and the
peak of it and its worker processes together (``all MB``, sampled ten times a second: see
:func:`_tree_peak`) are printed side by side. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {
    "--n 100 --lanes deterministic_fluency conversational_thread_coherence": [
        r"^deterministic_fluency, 100 cases, 100 turns \(pipeline exit [01]\)$",
        r"^conversational_thread_coherence, 10 cases, 100 turns \(pipeline exit [01]\)$",
        r"^  ratio pipeline / loop +[0-9.]+$",
        r"^  pipeline seconds by stage: cases [0-9.]+, transcripts [0-9.]+, .*, history [0-9.]+$",
    ],
    "--cpu --cpu-repeat 1 --start-s 0.1 --turn-ms 1": [
        r"^CPU-bound bot .*, 4 lanes, \d+ turns \(pipeline exit 0\)$",
        r"^  ratio pipeline / serial +[0-9.]+$",
        r"^  CPU floor, \d+ workers, no harness +[0-9.]+$",
        r"^  ratio pipeline / CPU floor +[0-9.]+$",
        r"^  every core busy, the run's CPU / \d+ +[0-9.]+$",
        r"^  ratio pipeline / every core busy +[0-9.]+$",
    ],
}

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # this repository: its lanes, its test helpers
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
    cpu_s: float  # user + system, its worker processes' too: less at the mercy of other processes
    peak_rss_mb: float  # of the child process itself (exact)
    peak_tree_mb: float  # of the child and its worker processes together (sampled, see _tree_peak)
    returncode: int
    stdout: str


def _descendants(pid: int) -> list[int]:
    found = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                for child in children.read().split():
                    found += _descendants(int(child))
    except OSError:  # gone meanwhile
        pass
    return found


def _memory_kb(pid: int) -> tuple[int, int]:
    """A process's private memory (anonymous and shared-memory pages) and its file-backed pages
    (the libraries it maps), in KB, from ``/proc/PID/status`` (cheap to read, unlike ``smaps``)."""
    found = {"RssAnon:": 0, "RssShmem:": 0, "RssFile:": 0}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                key = line.split(maxsplit=1)[0] if line.strip() else ""
                if key in found:
                    found[key] = int(line.split()[1])
    except OSError:  # gone meanwhile
        pass
    return found["RssAnon:"] + found["RssShmem:"], found["RssFile:"]


def _tree_peak(pid: int, done: threading.Event, every_s: float = 0.1) -> list[int]:
    """Sample the memory ``pid`` and its descendants take together until ``done``: their private
    pages summed, plus the file pages of the one that maps the most (spawned workers share no
    private pages with their parent; the libraries they map are mostly the same, counted once).
    The peak, in KB, in a list."""
    peak = [0]

    def sample() -> None:
        while not done.wait(every_s):
            private, files = zip(*(_memory_kb(p) for p in _descendants(pid)), strict=True)
            peak[0] = max(peak[0], sum(private) + max(files))

    threading.Thread(target=sample, daemon=True).start()
    return peak


def measure(command: list[str], env: dict[str, str], max_gb: float = 0.0) -> Measured:
    """Run ``command`` as a child; its wall time and its own peak RSS (``wait4``'s rusage).

    ``max_gb`` caps the child's address space (it fails with MemoryError beyond it) so a run
    that would not fit cannot take a shared machine's memory from everyone else."""

    def cap() -> None:
        if max_gb:
            limit = int(max_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        # A neutral working folder: `python -c` puts it first on sys.path, and a checkout there
        # would shadow the one PYTHONPATH names (--baseline).
        child = subprocess.Popen(
            command, env=env, cwd=tempfile.gettempdir(), stdout=out, stderr=subprocess.STDOUT, preexec_fn=cap
        )
        done = threading.Event()
        tree = _tree_peak(child.pid, done) if sys.platform == "linux" else [0]
        _, status, usage = os.wait4(child.pid, 0)
        done.set()
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    cpu = usage.ru_utime + usage.ru_stime
    return Measured(wall, cpu, usage.ru_maxrss / 1024, tree[0] / 1024, child.returncode, text)


# What the run prints of each step with --verbose (Dagster's STEP_SUCCESS event), and the units
# of its duration: "0.83ms", "533ms", "5.6s", "4m52s", "1h4m".
STEP_DONE = re.compile(
    r'STEP_SUCCESS - Finished execution of step "(?P<step>[^"]+)" in (?P<took>[0-9.hms]+)\.$'
)
DURATION_PART = re.compile(r"([0-9.]+)(ms|h|m|s)")
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def stage_seconds(output: str) -> list[tuple[str, float]]:
    """Each step of the run whose ``--verbose`` output is ``output``, with its seconds, in the
    order the steps ended. Read from the output: an ad-hoc run (``--cases``, ``replay:``) runs
    on a scratch instance that is gone when the command ends."""
    seconds = []
    for line in output.splitlines():
        if done := STEP_DONE.search(line):
            took = sum(float(n) * UNIT_SECONDS[unit] for n, unit in DURATION_PART.findall(done["took"]))
            seconds.append((done["step"].split("__")[-1], took))
    return seconds


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
        "--verbose",  # the step events, for stage_seconds
    ]


def row(label: str, turns: int, wall: float, run: Measured, cpu: bool = True) -> str:
    """A figures row: its wall seconds (the bare loop's: the loop's own), and of ``run`` the
    CPU seconds (``cpu``), peak RSS of the process and peak PSS of all its processes."""
    shown = f"{run.cpu_s:>8.1f}" if cpu else f"{'':>8}"
    return (
        f"  {label:<26} {turns:>9,} {wall:>9.1f} {shown} {turns / wall:>10,.0f}"
        f" {run.peak_rss_mb:>9,.0f} {run.peak_tree_mb:>9,.0f}"
    )


def run_size(
    n: int,
    folder: Path,
    lanes: list[str],
    writer: dict[str, Callable[[Path, int], tuple[Path, Path]]],
    baseline: Path | None,
    max_gb: float,
) -> None:
    for lane in lanes:
        count = n if lane == FLUENCY else n // 10
        cases, replay = writer[lane](folder, count)
        os.sync()  # written out now, not while the runs below are timed
        env = {
            **os.environ,
            "DAGSTER_HOME": str(folder / f"dagster_{lane}_{n}"),
            "EVAL_PIPELINE_STATE": str(folder),
            # The child runs in a neutral folder (see measure): the project is named, not found.
            "EVAL_PIPELINE_PROJECT": str(PROJECT_ROOT),
        }
        pipeline = measure(pipeline_command(lane, cases, replay, folder / f"history_{lane}_{n}"), env, max_gb)
        before = None
        if baseline is not None:  # the same run from another checkout (e.g. before a change)
            before_env = {
                **env,
                "PYTHONPATH": str(baseline),
                "EVAL_PIPELINE_PROJECT": str(baseline),
                "DAGSTER_HOME": env["DAGSTER_HOME"] + "_baseline",
            }
            history = folder / f"history_{lane}_{n}_baseline"
            before = measure(pipeline_command(lane, cases, replay, history), before_env, max_gb)
        bare = measure([sys.executable, str(Path(__file__).resolve()), "--bare", lane, str(replay)], env)
        loop_s = (
            json.loads(bare.stdout.strip().splitlines()[-1])["loop_s"]
            if bare.returncode == 0
            else float("nan")
        )
        print(f"{lane}, {count:,} cases, {n:,} turns (pipeline exit {pipeline.returncode})")
        print(
            f"  {'':<26} {'turns':>9} {'wall s':>9} {'cpu s':>8} {'turns/s':>10} {'peak MB':>9} {'all MB':>9}"
        )
        print(row("pipeline (CLI, end to end)", n, pipeline.wall_s, pipeline))
        if before is not None:
            print(row(f"baseline (exit {before.returncode})", n, before.wall_s, before))
        print(row("bare scalar loop", n, loop_s, bare, cpu=False))
        print(f"  {'ratio pipeline / loop':<26} {'':>9} {pipeline.wall_s / loop_s:>9.2f}")
        stages = stage_seconds(pipeline.stdout)
        if stages:  # the rest: the CLI's imports, pre-checks and report, run set-up, stored events
            outside = pipeline.wall_s - sum(sec for _, sec in stages)
            print("  pipeline seconds by stage: " + ", ".join(f"{step} {sec:.1f}" for step, sec in stages))
            print(f"  {'':<28}outside the steps (CLI: imports, pre-checks, report; run set-up) {outside:.1f}")
        if pipeline.returncode not in (0, 1):
            print("  pipeline output (tail):\n" + "\n".join(pipeline.stdout.splitlines()[-15:]))
        for path in (cases, replay):
            path.unlink()
        sys.stdout.flush()


CPU_LANES = (FLUENCY, "articulation_of_status", THREAD, "refusal_calibration")
CPU_BOT = "eval_pipeline_tests.runtimes.slow_start_bot:SlowStartBot"


def cpu_evals(folder: Path, repeat: int) -> Path:
    """An evals folder with the four lanes, each public split's cases repeated ``repeat`` times."""
    evals = folder / "cpu_evals"
    shutil.rmtree(evals, ignore_errors=True)
    evals.mkdir(parents=True)
    shutil.copyfile(PROJECT_ROOT / "evals" / "runtimes.yaml", evals / "runtimes.yaml")
    for lane in CPU_LANES:
        shutil.copytree(PROJECT_ROOT / "evals" / lane, evals / lane)
        cases = evals / lane / "public" / "v1" / "cases.jsonl"
        lines = [json.loads(line) for line in cases.read_text().splitlines() if line.strip()]
        with cases.open("w") as out:
            for copy in range(repeat):
                for case in lines:
                    out.write(json.dumps({**case, "id": f"{case['id']}_r{copy}"}) + "\n")
    return evals


def serial_loop() -> None:
    """The child side of the serial reference: import the bot, play every case of the four
    lanes' public splits in one process, one bot per case, turn after turn."""
    from eval_pipeline.lanes.registry import discover_lanes
    from eval_pipeline.run.pipeline import lane_threads, load_split
    from eval_pipeline.runtimes.adapters.python_object import resolve_target

    bot_class = resolve_target(CPU_BOT, [])
    turns = 0
    for spec in discover_lanes():
        if spec.name not in CPU_LANES:
            continue
        for thread in lane_threads(spec, "public", [item.case for item in load_split(spec, "public")]):
            bot = bot_class()
            for turn in thread.turns:
                bot.chat(turn.prompt)
                turns += 1
    print(json.dumps({"turns": turns}))


def cpu_floor(turns: int, busy: int, start_s: float, turn_ms: float) -> float:
    """The least wall time any harness could take with ``busy`` workers at work: each starts the
    bot once, all at the same time, then the turns' CPU is spread evenly over them, and the
    harness itself costs nothing."""
    return start_s + turns * turn_ms / 1000 / busy


def cpu_figures(folder: Path, repeat: int, workers: int, start_s: float, turn_ms: float) -> None:
    evals = cpu_evals(folder, repeat)
    env = {
        **os.environ,
        "EVAL_PIPELINE_PROJECT": str(PROJECT_ROOT),
        "EVAL_PIPELINE_EVALS": str(evals),
        "EVAL_PIPELINE_STATE": str(folder / "cpu_state"),
        "DAGSTER_HOME": str(folder / "cpu_dagster"),
        "PYTHONPATH": str(PROJECT_ROOT),
        "SLOW_START_S": str(start_s),
        "SLOW_TURN_MS": str(turn_ms),
    }
    serial = measure([sys.executable, str(Path(__file__).resolve()), "--serial"], env)
    turns = json.loads(serial.stdout.strip().splitlines()[-1])["turns"] if serial.returncode == 0 else 0
    command = [sys.executable, "-c", "from eval_pipeline.cli import main; main()", "run", "--split", "public"]
    command += [arg for lane in CPU_LANES for arg in ("--lane", lane)]
    command += ["--runtime", f"python:{CPU_BOT}", "-o", f"workers={workers}"]
    pipeline = measure(command, env)
    print(
        f"CPU-bound bot ({start_s:g} s import start-up, {turn_ms:g} ms CPU per turn), {len(CPU_LANES)} lanes, "
        f"{turns} turns (pipeline exit {pipeline.returncode})"
    )
    print(f"  {'':<34} {'wall s':>8} {'peak MB':>9} {'all MB':>9}")
    for label, run in (
        ("serial loop (one process)", serial),
        (f"pipeline, {workers} workers, one pool", pipeline),
    ):
        print(f"  {label:<34} {run.wall_s:>8.1f} {run.peak_rss_mb:>9,.0f} {run.peak_tree_mb:>9,.0f}")
    print(f"  {'ratio pipeline / serial':<34} {pipeline.wall_s / serial.wall_s:>8.2f}")
    cores = os.cpu_count() or 1
    busy_workers = max(1, min(workers, cores))  # no more workers at work than there are cores
    floor = cpu_floor(turns, busy_workers, start_s, turn_ms)
    print(f"  {f'CPU floor, {busy_workers} workers, no harness':<34} {floor:>8.1f}")
    print(f"  {'ratio pipeline / CPU floor':<34} {pipeline.wall_s / floor:>8.2f}")
    busy = pipeline.cpu_s / cores  # the wall time had no core been idle: what the run spent
    label = f"every core busy, the run's CPU / {cores}"
    print(f"  {label:<34} {busy:>8.1f}")
    print(f"  {'ratio pipeline / every core busy':<34} {pipeline.wall_s / busy:>8.2f}")
    if pipeline.returncode not in (0, 1):
        print("  pipeline output (tail):\n" + "\n".join(pipeline.stdout.splitlines()[-15:]))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--bare":
        bare_loop(sys.argv[2], Path(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--serial":
        serial_loop()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="turns per lane"
    )
    parser.add_argument("--lanes", nargs="+", default=[FLUENCY, THREAD], choices=[FLUENCY, THREAD])
    parser.add_argument("--out", type=Path, default=None, help="keep the generated files and history here")
    parser.add_argument(
        "--baseline", type=Path, default=None, help="also run the pipeline from this checkout"
    )
    parser.add_argument("--max-gb", type=float, default=0.0, help="cap each pipeline's address space (GB)")
    parser.add_argument("--cpu", action="store_true", help="only the CPU-bound bot figures")
    parser.add_argument("--cpu-repeat", type=int, default=5, help="copies of each public case (CPU figures)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (CPU figures)")
    parser.add_argument("--start-s", type=float, default=3.0, help="the bot's import-time start-up")
    parser.add_argument("--turn-ms", type=float, default=50.0, help="the bot's CPU per turn")
    args = parser.parse_args()
    writer = {FLUENCY: write_fluency, THREAD: write_thread}
    with tempfile.TemporaryDirectory(prefix="eval-scale-") as temp:
        folder = args.out or Path(temp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.cpu:
            cpu_figures(folder, args.cpu_repeat, args.workers, args.start_s, args.turn_ms)
            return
        for n in args.n:
            run_size(n, folder, args.lanes, writer, args.baseline, args.max_gb)


if __name__ == "__main__":
    main()
