"""An upstream chat runtime driven by the pipeline, against the upstream's own serial runner and
against a serial loop doing the same work, with a check that all of them answered alike.

The upstream is a checkout (``--checkout DIR``, never part of this repository) holding
``chat/runtime.py`` (a ``ChatRuntime`` whose ``chat(prompt)`` answers a turn with ``.surface``
and ``.grounding_source``), ``evals/framework.py`` (``get_lane(name)``, ``run_lane(lane,
split=..., workers=...)``) and ``evals/deterministic_fluency/runner.py`` (``run_lane(cases)``,
each case detail holding its six predicate booleans). Over the lanes deterministic_fluency,
articulation_of_status and conversational_thread_coherence it prints, each a whole process's
wall seconds (its imports included):

1. the upstream's own serial runner over its own public cases, the three lanes one after
   another with ``workers=1`` in one process of ``--python`` (context: the upstream's public
   case files of two of these lanes are not this repository's, so this is other work);
2. the same work as the pipeline's, as the upstream's runners do it: a serial loop in one
   process of ``--python`` over this repository's public cases of the three lanes (the turns
   the lanes' threads send, in order), a fresh ``ChatRuntime()`` per case, every surface kept;
3. the pipeline: ``eval-pipeline run`` of the three lanes' public splits on
   ``python:chat.runtime:ChatRuntime`` with the checkout as the adapter's ``paths`` and
   ``workers=auto``, in a fresh state, history and Dagster home, and its exit code (1 is a
   blocking check that failed: still a run);
4. the ratio pipeline / same-work loop (the figure to read against a target), and pipeline /
   upstream runner (different work, for scale);
5. the floor of that ratio on this machine: the loop's time spread over every core, plus what
   the pipeline costs for the same lanes on the embedded reference runtime (its own work, no
   upstream turns), as a fraction of the loop.

Then the parity: the pipeline's surfaces (its history's transcripts) against the loop's, turn
by turn, the first differences shown; and the pipeline's six fluency predicates per case (its
history's case predicates) against the upstream's own fluency runner run over this
repository's fluency cases. Differences are listed, never hidden: the predicates are the
pipeline's own implementation of the lane's contract, not the upstream's code, and the
upstream's fluency runner sends a case's ``prompt`` alone (no ``setup`` turns).

The upstream's runtime checkpoints an engine state after every turn, by default into the
checkout; each measured process is given its own empty folder for it (``CORE_ENGINE_STATE_DIR``)
so that none starts from what another left, and the checkout is not written to.

With ``--rounds R`` the measurements alternate R times and the medians are printed (the
parity lines are per round). Asserts nothing.

Without ``--checkout`` it writes a small stand-in checkout of the same shape into a temporary
folder: a ``ChatRuntime`` that burns ``--stand-in-construct-ms`` of CPU when built and
``--stand-in-turn-ms`` per turn and answers a deterministic surface depending on the prompt and
the session's earlier turns, and a framework and fluency runner of the same entry points (its
predicates are this project's). The stand-in only keeps this benchmark from rotting (the test
suite has no upstream checkout); the figures that matter come from a real checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # this repository: its lanes and cases
FLUENCY = "deterministic_fluency"
LANES = (FLUENCY, "articulation_of_status", "conversational_thread_coherence")
RUNTIME = "python:chat.runtime:ChatRuntime"
ENGINE_STATE_ENV = "CORE_ENGINE_STATE_DIR"  # where the upstream runtime checkpoints its state
# Other names the upstream fluency runner may give this lane's predicates: the seed's other
# spellings (its predicate table's no_dotted_domain_inventory; its rubric's finite_predicate_rate,
# the rate of a finite_predicate). A predicate found under none of the names is shown as None.
UPSTREAM_ALIASES = {
    "finite_predicate_shape": ("finite_predicate",),
    "no_dotted_inventory": ("no_dotted_domain_inventory",),
}
SHOWN_DIFFERENCES = 5

# The test suite's run of this benchmark (benchmarks/README.md, "Tiny runs"): the stand-in.
TINY_RUNS = {
    "--stand-in-construct-ms 60 --stand-in-turn-ms 30": [
        r"^upstream's own serial runner, its public cases \(3 lanes, \d+ cases\): [0-9.]+ s$",
        r"^same work, serial loop \(\d+ cases, \d+ turns\): [0-9.]+ s$",
        r"^pipeline \(python:chat\.runtime:ChatRuntime, workers=auto, 3 lanes\): [0-9.]+ s \(exit [01]\)$",
        r"^ratio pipeline / same-work serial loop: [0-9.]+$",
        r"^floor on \d+ cores: loop / \d+ \+ the same lanes on the reference runtime \([0-9.]+ s\) = [0-9.]+ s = [0-9.]+ of the loop$",
        r"^ratio pipeline / upstream runner \(different work\): [0-9.]+$",
        r"^surfaces equal to the serial loop's: (\d+) of \1 turns$",
        r"^fluency verdicts equal to upstream's runner: (\d+) of \1 cases \(6 predicates each\)$",
    ]
}

# --- what runs in the checkout's interpreter (each guarded: the upstream may spawn processes) ---

UPSTREAM_RUNNER = """
import json, sys
if __name__ == "__main__":
    from evals import framework
    cases = 0
    for name in sys.argv[1:]:
        cases += len(framework.run_lane(framework.get_lane(name), split="public", workers=1).case_details)
    print(json.dumps({"cases": cases}))
"""

SERIAL_LOOP = """
import json, sys
if __name__ == "__main__":
    from chat.runtime import ChatRuntime
    with open(sys.argv[1], encoding="utf-8") as file:
        threads = json.load(file)
    answered = []
    for thread in threads:
        runtime = ChatRuntime()
        for turn_index, prompt in thread["turns"]:
            answered.append([thread["lane"], thread["case_id"], turn_index, runtime.chat(prompt).surface])
    with open(sys.argv[2], "w", encoding="utf-8") as file:
        json.dump(answered, file)
"""

FLUENCY_RUNNER = """
import importlib, json, sys
if __name__ == "__main__":
    runner = importlib.import_module("evals.deterministic_fluency.runner")
    with open(sys.argv[1], encoding="utf-8") as file:
        cases = [json.loads(line) for line in file if line.strip()]
    details = runner.run_lane(cases).case_details
    with open(sys.argv[2], "w", encoding="utf-8") as file:
        json.dump({detail["case_id"]: detail["predicates"] for detail in details}, file)
"""

# --- the stand-in checkout (tiny runs) ---------------------------------------------------------

STAND_IN_RUNTIME = '''"""A stand-in upstream runtime: CPU burnt per construction and per turn, a deterministic surface."""
import hashlib
import time
from dataclasses import dataclass

CONSTRUCT_MS = {construct_ms!r}
TURN_MS = {turn_ms!r}


def burn(ms):
    until = time.process_time() + ms / 1000
    while time.process_time() < until:
        hashlib.sha256(b"stand-in").digest()


@dataclass(frozen=True)
class ChatResponse:
    surface: str
    grounding_source: str


class ChatRuntime:
    def __init__(self):
        burn(CONSTRUCT_MS)
        self.heard = hashlib.sha256()
        self.turns = 0

    def chat(self, prompt):
        burn(TURN_MS)
        self.heard.update(prompt.encode())
        self.turns += 1
        thread = self.heard.hexdigest()[:12]
        grounding = "pack" if len(prompt) % 2 else "none"
        words = len(prompt.split())
        return ChatResponse(f"Turn {{self.turns}} answers {{words}} words; its thread is {{thread}}.", grounding)
'''

STAND_IN_FRAMEWORK = '''"""A stand-in upstream eval framework: get_lane and run_lane, each case in a fresh runtime."""
import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from chat.runtime import ChatRuntime

EVALS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Lane:
    name: str
    root: Path


@dataclass
class LaneResult:
    lane: str
    split: str
    metrics: dict
    case_details: list = field(default_factory=list)


def get_lane(name):
    return Lane(name, EVALS / name)


def prompts_of(case):
    if "turns" in case:
        return [turn["prompt"] for turn in case["turns"]]
    return [*case.get("setup", []), case["probe"] if "probe" in case else case["prompt"]]


def run_lane(lane, *, version="v1", split="public", config=None, workers=None):
    lines = (lane.root / split / version / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    cases = [json.loads(line) for line in lines if line.strip()]
    if (lane.root / "runner.py").exists():
        report = importlib.import_module(f"evals.{{lane.name}}.runner").run_lane(cases)
        return LaneResult(lane.name, split, report.metrics, report.case_details)
    details = []
    for case in cases:
        runtime = ChatRuntime()
        details.append({{"id": case["id"], "surfaces": [runtime.chat(p).surface for p in prompts_of(case)]}})
    return LaneResult(lane.name, split, {{"cases": len(details)}}, details)
'''

STAND_IN_FLUENCY = '''"""A stand-in upstream fluency runner: the six predicates (this project's) of each case's last turn."""
import sys
from dataclasses import dataclass, field

sys.path.append({project!r})
from chat.runtime import ChatRuntime
from eval_pipeline.predicates.base import TurnView, get_turn_predicate
from evals.framework import prompts_of

PREDICATES = {predicates!r}


@dataclass
class LaneReport:
    metrics: dict = field(default_factory=dict)
    case_details: list = field(default_factory=list)


def run_lane(cases, config=None):
    details = []
    for case in cases:
        runtime = ChatRuntime()
        for prompt in prompts_of(case):
            response = runtime.chat(prompt)
        view = TurnView(surface=response.surface, grounding_source=response.grounding_source)
        verdicts = {{name: bool(get_turn_predicate(name)(view).passed) for name in PREDICATES}}
        details.append({{"case_id": case["id"], "predicates": verdicts}})
    return LaneReport({{"cases": len(details)}}, details)
'''


def fluency_predicates() -> tuple[str, ...]:
    """The fluency lane's turn predicates, as its ``lane.yaml`` names them."""
    from eval_pipeline.lanes.registry import find_lane

    spec = find_lane(FLUENCY, PROJECT_ROOT / "evals")
    return tuple(name for rule in spec.turn_predicates for name in rule.predicates)


def write_stand_in(folder: Path, construct_ms: float, turn_ms: float) -> Path:
    """A stand-in checkout under ``folder`` (see the module docstring); its path."""
    checkout = folder / "stand_in_checkout"
    files = {
        "chat/__init__.py": "",
        "chat/runtime.py": STAND_IN_RUNTIME.format(construct_ms=construct_ms, turn_ms=turn_ms),
        "evals/__init__.py": "",
        "evals/framework.py": STAND_IN_FRAMEWORK.format(),
        f"evals/{FLUENCY}/__init__.py": "",
        f"evals/{FLUENCY}/runner.py": STAND_IN_FLUENCY.format(
            project=str(PROJECT_ROOT), predicates=fluency_predicates()
        ),
    }
    for lane in LANES:  # its own public cases: this repository's
        files[f"evals/{lane}/public/v1/cases.jsonl"] = public_cases(lane).read_text(encoding="utf-8")
    for name, text in files.items():
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text(text, encoding="utf-8")
    return checkout


def public_cases(lane: str) -> Path:
    return PROJECT_ROOT / "evals" / lane / "public" / "v1" / "cases.jsonl"


class SentThread(TypedDict):
    """One case's session as the pipeline sends it: its (turn index, prompt) pairs in order."""

    lane: str
    case_id: str
    turns: list[tuple[int, str]]


def lane_turns() -> list[SentThread]:
    """Every thread the three lanes' public splits send, as the pipeline builds them: lane, case
    id and its (turn index, prompt) pairs in order."""
    from eval_pipeline.lanes.registry import find_lane
    from eval_pipeline.run.pipeline import lane_threads, load_split

    threads: list[SentThread] = []
    for lane in LANES:
        spec = find_lane(lane, PROJECT_ROOT / "evals")
        cases = [item.case for item in load_split(spec, "public")]
        for thread in lane_threads(spec, "public", cases):
            turns = [(turn.turn_index, turn.prompt) for turn in thread.turns]
            threads.append({"lane": lane, "case_id": thread.case_id, "turns": turns})
    return threads


@dataclass(frozen=True)
class Upstream:
    """Where the upstream code is and how its processes run."""

    checkout: Path
    python: str
    scratch: Path  # a folder for this invocation's files

    def env(self, engine_state: str) -> dict[str, str]:
        """The environment of one upstream process: the checkout first on the path, its own
        empty engine-state folder."""
        state = self.scratch / "engine_state" / engine_state
        state.mkdir(parents=True)
        return {**os.environ, "PYTHONPATH": str(self.checkout), ENGINE_STATE_ENV: str(state)}

    def run(self, program: str, args: list[str], engine_state: str) -> tuple[float, str]:
        """Wall seconds of ``python -c program args`` and its standard output; exits on failure."""
        argv = [self.python, "-c", program, *args]
        seconds, done = timed(argv, self.env(engine_state))
        if done.returncode != 0:
            raise SystemExit(
                f"{self.python} -c ... {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
            )
        return seconds, done.stdout


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall seconds of one process, run in a neutral folder (nothing there shadows a module)."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    return time.perf_counter() - started, done


def pipeline_run(upstream: Upstream, name: str, *, reference: bool = False) -> tuple[float, int, Path]:
    """Wall seconds and exit code of the pipeline's run in a fresh state under the scratch
    folder, and its history root; ``reference``: on the embedded reference runtime instead
    (what the pipeline itself costs for these lanes)."""
    root = upstream.scratch / name
    (root / "dagster_home").mkdir(parents=True)
    env = {
        **upstream.env(name),
        "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        "EVAL_PIPELINE_PROJECT": str(PROJECT_ROOT),
        "EVAL_PIPELINE_STATE": str(root / "state"),
        "EVAL_PIPELINE_HISTORY": str(root / "history"),
        "DAGSTER_HOME": str(root / "dagster_home"),
    }
    for inherited in ("EVAL_PIPELINE_RUNTIME", "EVAL_PIPELINE_EVALS"):
        env.pop(inherited, None)
    argv = [sys.executable, "-c", "from eval_pipeline.cli import main; main()", "run", "--split", "public"]
    argv += [arg for lane in LANES for arg in ("--lane", lane)]
    if not reference:
        argv += [
            "--runtime",
            RUNTIME,
            "-o",
            f"paths={json.dumps([str(upstream.checkout)])}",
            "-o",
            "workers=auto",
        ]
    seconds, done = timed(argv, env)
    if done.returncode not in (0, 1):
        raise SystemExit(
            f"the pipeline exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    return seconds, done.returncode, root / "history"


@dataclass(frozen=True)
class Round:
    """One round's figures and what the parity checks read."""

    upstream_s: float
    upstream_cases: int
    loop_s: float
    loop_surfaces: dict[tuple[str, str, int], str]
    pipeline_s: float
    pipeline_exit: int
    history: Path
    own_s: float  # the same lanes on the reference runtime: the pipeline's own cost


def one_round(upstream: Upstream, threads_file: Path, index: int) -> Round:
    upstream_s, out = upstream.run(UPSTREAM_RUNNER, list(LANES), f"upstream_{index}")
    surfaces_file = upstream.scratch / f"loop_surfaces_{index}.json"
    loop_s, _ = upstream.run(SERIAL_LOOP, [str(threads_file), str(surfaces_file)], f"loop_{index}")
    answered = json.loads(surfaces_file.read_text(encoding="utf-8"))
    pipeline_s, code, history = pipeline_run(upstream, f"pipeline_{index}")
    own_s, _, _ = pipeline_run(upstream, f"reference_{index}", reference=True)
    return Round(
        upstream_s=upstream_s,
        upstream_cases=int(json.loads(out.strip().splitlines()[-1])["cases"]),
        loop_s=loop_s,
        loop_surfaces={(lane, case, int(turn)): surface for lane, case, turn, surface in answered},
        pipeline_s=pipeline_s,
        pipeline_exit=code,
        history=history,
        own_s=own_s,
    )


def pipeline_surfaces(history: Path) -> dict[tuple[str, str, int], str | None]:
    """Every turn's surface in the history's one run (None for a turn that faulted)."""
    from eval_pipeline.history.views import connect

    with connect(str(history)) as con:
        rows = con.execute("SELECT lane, case_id, turn_index, surface, error FROM transcripts").fetchall()
    return {(lane, case, int(turn)): None if error else surface for lane, case, turn, surface, error in rows}


def pipeline_fluency_verdicts(history: Path, predicates: tuple[str, ...]) -> dict[str, dict[str, bool]]:
    """Each fluency case's verdict of each of ``predicates`` in the history's one run."""
    from eval_pipeline.history.views import connect

    with connect(str(history)) as con:
        rows = con.execute(
            "SELECT case_id, predicate, passed FROM case_predicates WHERE lane = ? AND list_contains(?, predicate)",
            [FLUENCY, list(predicates)],
        ).fetchall()
    verdicts: dict[str, dict[str, bool]] = {}
    for case, predicate, passed in rows:
        verdicts.setdefault(case, {})[predicate] = bool(passed)
    return verdicts


def surface_parity(
    loop: dict[tuple[str, str, int], str], pipeline: dict[tuple[str, str, int], str | None]
) -> list[str]:
    """The report of the pipeline's surfaces against the loop's: a count line, then differences."""
    differing = [key for key in loop if pipeline.get(key) != loop[key]]
    lines = [f"surfaces equal to the serial loop's: {len(loop) - len(differing)} of {len(loop)} turns"]
    extra = sorted(set(pipeline) - set(loop))
    if extra:
        lines.append(f"  turns only the pipeline answered: {len(extra)}, first {extra[:SHOWN_DIFFERENCES]}")
    for lane, case, turn in sorted(differing)[:SHOWN_DIFFERENCES]:
        lines.append(f"  {lane} {case} turn {turn}:")
        lines.append(f"    loop:     {loop[lane, case, turn][:160]!r}")
        shown = pipeline.get((lane, case, turn))
        lines.append(f"    pipeline: {'(no answer)' if shown is None else repr(shown[:160])}")
    return lines


def upstream_verdict(verdicts: dict[str, bool], predicate: str) -> bool | None:
    """The upstream runner's verdict of one of this lane's predicates, by its name or an alias."""
    for name in (predicate, *UPSTREAM_ALIASES.get(predicate, ())):
        if name in verdicts:
            return bool(verdicts[name])
    return None


def fluency_parity(
    upstream: dict[str, dict[str, bool]], pipeline: dict[str, dict[str, bool]], predicates: tuple[str, ...]
) -> list[str]:
    """The report of the pipeline's fluency verdicts against the upstream runner's, per case."""
    cases = [
        json.loads(line)
        for line in public_cases(FLUENCY).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    differences: list[str] = []
    equal = 0
    for case in cases:
        ours, theirs = pipeline.get(case["id"], {}), upstream.get(case["id"], {})
        apart = [
            f"{name} pipeline {ours.get(name)} upstream {upstream_verdict(theirs, name)}"
            for name in predicates
            if ours.get(name) is None or ours.get(name) != upstream_verdict(theirs, name)
        ]
        equal += not apart
        if apart:
            sent_alone = (
                " (has setup turns: the upstream runner sends its prompt alone)" if case.get("setup") else ""
            )
            differences.append(f"  {case['id']}{sent_alone}: {'; '.join(apart)}")
    head = f"fluency verdicts equal to upstream's runner: {equal} of {len(cases)} cases ({len(predicates)} predicates each)"
    return [head, *differences]


def figures(rounds: list[Round], threads: list[SentThread]) -> list[str]:
    """The lines of figures: each measurement's median over the rounds, and the two ratios."""
    upstream_s = statistics.median(r.upstream_s for r in rounds)
    loop_s = statistics.median(r.loop_s for r in rounds)
    pipeline_s = statistics.median(r.pipeline_s for r in rounds)
    own_s = statistics.median(r.own_s for r in rounds)
    cores = os.cpu_count() or 1
    floor_s = loop_s / cores + own_s
    turns = sum(len(thread["turns"]) for thread in threads)
    exits = ",".join(sorted({str(r.pipeline_exit) for r in rounds}))
    lines = (
        [
            f"round {i}: upstream {r.upstream_s:.2f} s, loop {r.loop_s:.2f} s, pipeline {r.pipeline_s:.2f} s"
            for i, r in enumerate(rounds, 1)
        ]
        if len(rounds) > 1
        else []
    )
    return [
        *lines,
        f"upstream's own serial runner, its public cases ({len(LANES)} lanes, {rounds[0].upstream_cases} cases): "
        f"{upstream_s:.2f} s",
        f"same work, serial loop ({len(threads)} cases, {turns} turns): {loop_s:.2f} s",
        f"pipeline ({RUNTIME}, workers=auto, {len(LANES)} lanes): {pipeline_s:.2f} s (exit {exits})",
        f"ratio pipeline / same-work serial loop: {pipeline_s / loop_s:.3f}",
        f"floor on {cores} cores: loop / {cores} + the same lanes on the reference runtime ({own_s:.2f} s) = "
        f"{floor_s:.2f} s = {floor_s / loop_s:.3f} of the loop",
        f"ratio pipeline / upstream runner (different work): {pipeline_s / upstream_s:.3f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, help="the upstream checkout (default: a stand-in)")
    parser.add_argument("--python", default=sys.executable, help="the checkout's interpreter")
    parser.add_argument("--rounds", type=int, default=1, help="measurements of each, alternating (medians)")
    parser.add_argument(
        "--stand-in-construct-ms",
        type=float,
        default=150.0,
        help="CPU a stand-in runtime's construction burns",
    )
    parser.add_argument("--stand-in-turn-ms", type=float, default=100.0, help="CPU a stand-in turn burns")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    predicates = fluency_predicates()
    threads = lane_turns()
    with tempfile.TemporaryDirectory(prefix="upstream-runtime-") as folder:
        scratch = Path(folder)
        if args.checkout is None:
            checkout = write_stand_in(scratch, args.stand_in_construct_ms, args.stand_in_turn_ms)
            print(
                f"checkout: a stand-in ({args.stand_in_construct_ms:g} ms per construction, "
                f"{args.stand_in_turn_ms:g} ms per turn): its figures are not the upstream's"
            )
        else:
            checkout = args.checkout.resolve()
            print(f"checkout: {checkout}, python {args.python}")
        upstream = Upstream(checkout, args.python, scratch)
        threads_file = scratch / "threads.json"
        threads_file.write_text(json.dumps(threads), encoding="utf-8")
        rounds = [one_round(upstream, threads_file, index) for index in range(max(1, args.rounds))]
        verdicts_file = scratch / "upstream_fluency.json"
        upstream.run(FLUENCY_RUNNER, [str(public_cases(FLUENCY)), str(verdicts_file)], "fluency")
        upstream_verdicts = json.loads(verdicts_file.read_text(encoding="utf-8"))
        print("\n".join(figures(rounds, threads)))
        for index, measured in enumerate(rounds, 1):
            suffix = f" (round {index})" if len(rounds) > 1 else ""
            surfaces = surface_parity(measured.loop_surfaces, pipeline_surfaces(measured.history))
            ours = pipeline_fluency_verdicts(measured.history, predicates)
            verdicts = fluency_parity(upstream_verdicts, ours, predicates)
            print("\n".join([surfaces[0] + suffix, *surfaces[1:], verdicts[0] + suffix, *verdicts[1:]]))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
