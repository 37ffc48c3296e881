"""What failed, and why, as a user at a 100-column terminal sees it: failing cases with reasons
that quote the surface, `show`, a runtime that is down (exit 4, the fault printed), `--junit`
validated against the JUnit schema."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import junitparser
import pytest
import xmlschema
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_OK, EXIT_VOID
from eval_pipeline_tests.runtimes.helpers import write_recording

pytestmark = pytest.mark.slow

JUNIT_XSD = Path(__file__).parent / "data" / "junit.xsd"
WIDTH = 100


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``eval-pipeline ARGS`` at a ``WIDTH``-column terminal, run in this process through the
    command line's own entry point: its exit code, standard output and standard error. An
    exception the command line did not turn into an exit is raised, never read as exit 1."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(WIDTH)})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(
        ["eval-pipeline", *args], result.exit_code, result.stdout, result.stderr
    )


def _closed_port() -> int:
    """A port nothing listens on (bound, then released): a runtime that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_no_gloss_lists_failing_cases_with_reasons_quoting_the_surface(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    result = cli(
        "run", "--lane", "deterministic_fluency", "--runtime", "reference:no-gloss", "--junit", str(junit)
    )
    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    out = result.stdout
    assert all(len(line) <= WIDTH for line in out.splitlines()), max(out.splitlines(), key=len)
    listing = out[out.index("failing cases (10 case(s), 30 result(s)):") :]
    # Case, predicate, severity, code on one line; the reason, quoting the surface, on the next.
    assert "  fluency_belief_004 · no_dotted_inventory · report · dotted_inventory" in listing
    assert "The answer lists internal dotted paths instead of prose: “meta.mental_state.belief;" in listing
    assert "The answer is only a provenance disclosure with no content: “belief — pack-grounded" in listing
    more = re.search(r"…and 20 more; all of them: eval-pipeline show ([0-9a-f]{8})\n", listing)
    assert more is not None, listing
    # The last line counts warnings too (the no-gloss surfaces miss WARN targets), and --junit
    # says where it wrote.
    warned = re.search(r"1 lane run\(s\); 0 blocking check failure\(s\); (\d+) warning\(s\)\n", out)
    assert warned is not None and int(warned.group(1)) == out.count("│ warn ") > 0, out
    assert f"wrote JUnit XML to {junit}" in " ".join(result.stderr.split())

    # `show` with the printed 8-character prefix lists all 30, then one case's whole transcript.
    shown = cli("show", more.group(1))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(
        f"deterministic_fluency [public] · reference-no-gloss · run {more.group(1)}"
    )
    assert (
        shown.stdout.count(" · report · ") == 30
        and "fluency_wisdom_005 · post_gloss_predicates" in shown.stdout
    )
    case = cli("show", more.group(1), "--case", "fluency_truth_001")
    assert case.returncode == 0, case.stderr
    assert "turn 0 (turn)\n  prompt:  What is truth?\n  surface: truth — pack-grounded" in case.stdout
    assert re.search(
        r"fail +no_dotted_inventory \[dotted_inventory\] \{\"inventory\": \"meta\.epistemic\.truth;",
        case.stdout,
    )
    assert re.search(r"pass +no_placeholder \[ok\]", case.stdout)
    unknown = cli("show", more.group(1), "--case", "nope")
    assert unknown.returncode == 2 and "has no case 'nope'" in unknown.stderr

    # JUnit: one suite, a testcase per case; report-severity findings are not failures.
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit))
    (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
    assert suite.name == "deterministic_fluency/public [reference-no-gloss]"
    assert (suite.tests, suite.failures, suite.errors) == (15, 0, 0)
    belief = next(case for case in suite if case.name == "fluency_belief_004")
    assert "no_dotted_inventory [dotted_inventory]" in (belief.system_out or "")


def test_a_runtime_that_is_down_is_a_void_measurement_exit_4(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = cli(
        "run", "--lane", "deterministic_fluency", "--split", "dev",
        "--runtime", f"openai:{url}", "-o", "model=x", "-o", "max_retries=0",
        "--junit", str(junit),
    )  # fmt: skip
    assert result.returncode == EXIT_VOID, result.stdout + result.stderr
    # The cause, once, with how many turns it cost; not a list of echoed predicate failures.
    assert "faults (2 of 2 turns):" in result.stderr
    assert re.search(
        r"2 × TurnFault: connection failed: POST http://127\.0\.0\.1:\d+/v1/chat/completions", result.stderr
    )
    assert (
        "the measurement failed: void: 2 of 2 turns faulted (error_rate 1 > max_error_rate 0.05)"
        in result.stderr
    )
    assert "1 void (the measurement failed: deterministic_fluency)" in " ".join(result.stdout.split())
    assert (
        "measurement: void" in result.stdout and "failing cases: not judged, the run is void" in result.stdout
    )
    table = result.stdout[: result.stdout.index("run ")]
    assert "void" in table and "│ pass" not in table  # no threshold of an unmeasured run passes

    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit))
    (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
    assert (suite.tests, suite.errors, suite.failures) == (2, 2, 0)
    case = next(iter(suite))
    (error,) = case.result
    assert isinstance(error, junitparser.Error) and "connection failed" in (error.message or "")

    document = json.loads(
        cli(
            "run", "--lane", "deterministic_fluency", "--split", "dev",
            "--runtime", f"openai:{url}", "-o", "model=x", "-o", "max_retries=0", "--json",
        ).stdout
    )  # fmt: skip
    (lane,) = document["lanes"]
    assert lane["void"] is True and lane["faults"][0]["turns"] == 2
    assert {c["verdict"] for c in lane["checks"] if c["name"] != "no_regression"} == {"void"}
    # Recorded before the history gate failed the run: in history, its rows say void.
    recorded = cli(
        "history", "--sql", f"select distinct verdict from metrics where run_id = '{lane['run_id']}'",
        "--format", "json",
    )  # fmt: skip
    assert recorded.returncode == EXIT_OK, recorded.stderr
    assert {"void"} <= {row["verdict"] for row in json.loads(recorded.stdout)}
    assert all(isinstance(row["evidence"], dict) for row in lane["case_predicates"])
    assert lane["case_predicates"][0]["evidence"]["error"].startswith("TurnFault: connection failed")


def test_a_replayed_run_has_no_latency_and_its_junit_times_are_zero(tmp_path: Path) -> None:
    recorded = write_recording(
        tmp_path / "turns.jsonl",
        [
            {"case_id": "fluency_dev_time_001", "surface": "Time is the order of events."},
            {"case_id": "fluency_dev_oov_zorblat_002", "surface": "I do not know that word."},
        ],
    )
    junit = tmp_path / "junit.xml"
    result = cli(
        "run", "--lane", "deterministic_fluency", "--split", "dev", "--runtime", f"replay:{recorded}",
        "--junit", str(junit),
    )  # fmt: skip
    assert result.returncode in (EXIT_OK, 1), result.stdout + result.stderr
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit))
    (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
    assert suite.tests == 2 and {case.time for case in suite} == {0.0}
