"""A one-predicate lane in its own evals folder: a case passes when its answer ends with a full stop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CASES = 40
LANE_YAML = """\
name: sampled
version: v1
title: Sampled answers
splits: {dev: [dev/cases.jsonl]}
nightly_splits: [dev]
thresholds:
  - {metric: punctuation_rate, op: ">=", value: 0.6, severity: ERROR, reason: "Test floor."}
case_schema:
  fields:
    prompt: {type: str, min_length: 1}
threads:
  session: per_case
  turns:
    - {role: probe, from: prompt}
turn_predicates:
  - role: probe
    predicates: [complete_punctuation]
    case_rows: {severity: hard}
metrics:
  punctuation_rate: {rate: complete_punctuation}
  cases: {count: cases}
"""
TARGETS_YAML = """\
targets:
  reference: {spec: reference, nightly: true}
  coin:
    spec: python:eval_pipeline_tests.samples.coin_bot:CoinBot
    options: {kwargs: {pass_probability: 0.7}}
"""


@pytest.fixture
def sampled_evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An evals folder holding the ``sampled`` lane and a ``coin`` target (the bot at p = 0.7)."""
    evals = tmp_path / "evals"
    folder = evals / "sampled"
    (folder / "dev").mkdir(parents=True)
    (folder / "lane.yaml").write_text(LANE_YAML, encoding="utf-8")
    (folder / "contract.md").write_text("# sampled\n", encoding="utf-8")
    rows = [{"id": f"case_{i:03d}", "prompt": f"Question {i}?"} for i in range(CASES)]
    (folder / "dev" / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (evals / "runtimes.yaml").write_text(TARGETS_YAML, encoding="utf-8")
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(evals))
    return evals
