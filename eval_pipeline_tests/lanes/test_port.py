"""The declared lanes score exactly as the code kinds they replaced (fixtures committed before the port).

One change is intended: fluency's ``surface_provenance_match`` is binary (issue 14, item 5). A
surface that claims no provenance passes with code ``no_provenance_claim`` instead of being
null, and the rate's denominator is every case; :func:`binary_provenance` applies exactly that
change to the fixture, and nothing else may differ. (The reference runtime tags every surface,
so on its fixtures the change finds nothing to change: the fluency tests show it on untagged
surfaces.)

The reference runtime has learned one thing since: it reports its turn log as telemetry
(``turn_log_surface`` in each turn's raw fields, for warmed_session_consistency).
:func:`without_telemetry` takes exactly that key out of the new transcripts.

Issue 10 (what failed, and why) changed two columns on purpose, after the fixtures were
committed: a case row's ``message`` is now a sentence quoting the offending fragment, and
``evidence`` is JSON-typed and carries that fragment (``excerpt`` and the like) besides what it
held. It also added the ``verdict`` word to each metrics row. So ``message`` is not compared,
``evidence`` must keep every key and value the fixture has (new keys are allowed), and the
metrics rows may add ``verdict`` and nothing else; every other column must be equal.

Issue 16 (repeats) added ``sample_index`` to the transcripts and predicate tables (0 in a run
of one sample, which these are), the ``seed`` a sample was sent with (null: no run seed), and
to the metrics rows their statistics (``samples``, the Wilson ``ci_low``/``ci_high``,
``pass_hat_k``) and the ``statistic`` a threshold gated. A run of one sample must otherwise
equal the fixtures.

Issue 29 (usage) added to the transcripts each turn's ``prompt_tokens``, ``completion_tokens``,
``cost``, ``cached`` and ``ttft_ms`` (the in-process reference says no usage, has no price, is
not cached and does not stream), and to the metrics the usage rows every lane emits
(:data:`USAGE_METRICS`): they are checked against the run's own transcripts, then left out.

Issue 47 reshaped the i18n request for chat models: its instructions, and how an example is
written (``Example:`` … ``Translation: …`` instead of ``<example>`` tags), changed on purpose. So
an i18n prompt is compared by what it asks (:func:`same_request`): the request a runtime reads
back from it, every ``<source>`` block and every example's translation must be the fixture's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from eval_pipeline.i18n.prompts import parse_request
from eval_pipeline.metrics.usage import USAGE_METRICS
from eval_pipeline_tests.lanes.lane_outputs import RUNTIMES, fixture_path, lane_outputs

PORTED: dict[str, tuple[str, ...]] = {
    "deterministic_fluency": ("dev", "public"),
    "articulation_of_status": ("dev", "public"),
    "conversational_thread_coherence": ("dev", "public", "holdout"),
    "i18n_prompt": ("dev", "locked"),
}
PROVENANCE = "surface_provenance_match"
# Columns issue 10 changed on purpose (see the module docstring), and the one it added.
REWORDED = "message"
EXTENDED = "evidence"
ADDED: dict[str, frozenset[str]] = {
    "metrics": frozenset({"verdict", "samples", "ci_low", "ci_high", "pass_hat_k", "statistic"}),
    "transcripts": frozenset(
        {"sample_index", "seed", "prompt_tokens", "completion_tokens", "cost", "cached", "ttft_ms"}
    ),
    "turn_predicates": frozenset({"sample_index"}),
    "case_predicates": frozenset({"sample_index"}),
}
ONE_SAMPLE = {
    "sample_index": 0,
    "seed": None,
    "samples": 1,
    "prompt_tokens": None,
    "completion_tokens": None,
    "cost": None,
    "cached": False,
    "ttft_ms": None,
}


def as_object(evidence: Any) -> dict[str, Any]:
    return dict(json.loads(evidence) if isinstance(evidence, str) else evidence or {})


def compare_rows(table: str, actual: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """What differs between a row and its fixture, outside the changes issue 10 made on purpose."""
    problems = [f"unexpected column {c}" for c in set(actual) - set(expected) - ADDED.get(table, frozenset())]
    problems += [
        f"{column}: {actual[column]!r} in a run of one sample"
        for column, value in ONE_SAMPLE.items()
        if column in ADDED.get(table, frozenset()) and actual.get(column) != value
    ]
    for column, value in expected.items():
        if column == REWORDED:
            continue
        if column == EXTENDED:
            got = as_object(actual.get(column))
            lost = {k: v for k, v in as_object(value).items() if got.get(k) != v}
            if lost:
                problems.append(f"evidence lost or changed {lost} (now {got})")
        elif column == "prompt" and parse_request(str(value)) is not None:
            if not same_request(str(actual.get(column)), str(value)):
                problems.append(f"prompt asks something else: {actual.get(column)!r} != {value!r}")
        elif actual.get(column) != value:
            problems.append(f"{column}: {actual.get(column)!r} != {value!r}")
    return problems


SOURCE_BLOCK = re.compile(r"<source>\n(.*?)\n</source>", re.S)
# An example's translation, as the fixture's requests wrote it and as they are written now.
OLD_TRANSLATION = re.compile(r"<translation>\n(.*?)\n</translation>", re.S)
NEW_TRANSLATION = re.compile(r"^Translation: (.+)$", re.M)


def same_request(prompt: str, fixture: str) -> bool:
    """Whether an i18n prompt asks what the fixture's did: the same request read back, the same
    source blocks (examples' and the case's) and the same example translations."""
    return (
        parse_request(prompt) == parse_request(fixture)
        and SOURCE_BLOCK.findall(prompt) == SOURCE_BLOCK.findall(fixture)
        and NEW_TRANSLATION.findall(prompt) == OLD_TRANSLATION.findall(fixture)
    )


def without_usage(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The tables without the usage metric rows, once they say what the transcripts hold."""
    usage = {row["metric"]: row["value"] for row in tables["metrics"] if row["metric"] in USAGE_METRICS}
    assert list(usage) == list(USAGE_METRICS)
    assert usage["turns_driven"] == len(tables["transcripts"]) and usage["cached_turns"] == 0
    assert usage["prompt_tokens"] is None and usage["cost"] is None and usage["ttft_p50_ms"] is None
    assert usage["latency_p50_ms"] is not None  # every turn was timed
    assert usage["truncated_turns"] == 0
    for row in tables["transcripts"]:  # the reference runtime never says why it stopped
        assert row.pop("finish_reason") is None
    tables["metrics"] = [row for row in tables["metrics"] if row["metric"] not in USAGE_METRICS]
    return tables


def without_telemetry(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    for row in tables["transcripts"]:
        raw = json.loads(row["raw"]) if row["raw"] else {}
        assert raw.pop("turn_log_surface") == row["surface"]
        row["raw"] = json.dumps(raw, sort_keys=True, ensure_ascii=False) if raw else None
    return tables


def binary_provenance(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The fixture as item 5 changes it: no provenance claim passes; the rate counts every case."""
    for table in ("turn_predicates", "case_predicates"):
        for row in tables[table]:
            if row["predicate"] == PROVENANCE and row["code"] == "no_provenance_claim":
                assert row["passed"] is None
                row["passed"] = True
    rows = [r for r in tables["case_predicates"] if r["predicate"] == PROVENANCE]
    passed = sum(1 for r in rows if r["passed"] is True)
    for metric in tables["metrics"]:
        if metric["metric"] == f"{PROVENANCE}_rate":
            metric.update(numerator=float(passed), denominator=float(len(rows)), value=passed / len(rows))
    return tables


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(
    ("lane", "split"), [(lane, split) for lane, splits in PORTED.items() for split in splits]
)
def test_ported_lane_equals_its_fixture(lane: str, split: str, runtime: str) -> None:
    expected = json.loads(fixture_path(lane, split, runtime).read_text("utf-8"))
    if lane == "deterministic_fluency":
        expected = binary_provenance(expected)
    outputs = json.loads(json.dumps(lane_outputs(lane, split, runtime), sort_keys=True))
    actual = without_usage(without_telemetry(outputs))
    for table in expected:
        assert len(actual[table]) == len(expected[table]), f"{lane}/{split} on {runtime}: {table} row count"
        for index, (got, want) in enumerate(zip(actual[table], expected[table], strict=True)):
            problems = compare_rows(table, got, want)
            assert not problems, f"{lane}/{split} on {runtime}: {table} row {index}: {problems}"
