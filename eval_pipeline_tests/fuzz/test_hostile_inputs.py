"""Hostile lane.yaml, runtimes.yaml, notify.yaml, runtime replies, webhook URLs and receivers:
every input gives exit 0/1/2/4 with a message, never a traceback, never more than 1 GB, never
past its deadline, never a secret printed."""

from __future__ import annotations

import json
import sys

import pytest

from eval_pipeline_tests.fuzz.bounded_cli import MAX_RSS_BYTES, run_bounded
from eval_pipeline_tests.fuzz.hostile import (
    DEADLINE_S,
    REPLIES,
    WEBHOOK_DEADLINE_S,
    WEBHOOK_URLS,
    Outcome,
    _yaml_mutations,
    webhook_kinds,
)


def batch(source: str, count: int, seed: int) -> list[Outcome]:
    """One batch in a child process under the memory ceiling; its peak memory bounds each input's."""
    command = [
        sys.executable,
        "-m",
        "eval_pipeline_tests.fuzz.hostile",
        source,
        f"--count={count}",
        f"--seed={seed}",
    ]
    result = run_bounded(command, deadline_s=count * DEADLINE_S)
    assert result.exit_code == 0 and not result.timed_out, (result.exit_code, result.stderr[-3000:])
    assert result.peak_rss_bytes <= MAX_RSS_BYTES, f"{result.peak_rss_bytes / 2**20:.0f} MB"
    return [Outcome(**outcome) for outcome in json.loads(result.stdout)]


@pytest.mark.slow
@pytest.mark.parametrize("source", ["lane", "targets", "notify"])
def test_every_hostile_project_file_is_a_clean_exit(source: str) -> None:
    kinds = _yaml_mutations()
    outcomes = batch(source, len(kinds) + 5, seed=7)
    assert {o.kind for o in outcomes} == set(kinds)
    assert [v for o in outcomes for v in o.violations()] == []
    assert {o.exit_code for o in outcomes if o.kind == "unchanged"} == {0}  # the file it starts from is valid
    # Only the mutations that keep the file valid may pass; the attacks must be refused.
    passed = {o.kind for o in outcomes if o.exit_code == 0}
    assert passed <= {
        "unchanged",
        "tab_indent",
        "long_scalar",
        "unknown_tag",
        "bom",
        "swapped_type",
        "byte_flip",
        "truncated",
        "only_comment",
        "duplicate_nested",
        "unknown_key",
    }, passed
    refused = {o.kind for o in outcomes if o.exit_code == 2}
    assert {
        "alias_bomb",
        "self_alias",
        "python_tag",
        "deep_flow",
        "python_name",
        "deep_block",
        "duplicate_top",
        "non_text_key",
        "bad_utf8",
        "utf16",
        "huge_file",
        "huge_integer",
        "two_documents",
    } <= refused, refused


@pytest.mark.slow
def test_every_hostile_runtime_reply_is_a_clean_exit() -> None:
    outcomes = batch("reply", len(REPLIES), seed=7)
    assert {o.kind for o in outcomes} == set(REPLIES)
    assert [v for o in outcomes for v in o.violations()] == []
    by_kind = {o.kind: o.exit_code for o in outcomes}
    assert by_kind["answer"] in (0, 1)  # a well-formed answer is judged
    assert (
        by_kind["duplicate_surface"] == 4 and by_kind["lone_surrogate"] == 4
    )  # faults, never recorded as answers


@pytest.mark.slow
def test_every_hostile_webhook_url_and_receiver_is_a_clean_exit() -> None:
    kinds = webhook_kinds()
    outcomes = batch("webhook", len(kinds), seed=7)
    assert [o.kind for o in outcomes] == kinds
    assert [v for o in outcomes for v in o.violations()] == []
    by_kind = {o.kind: o.exit_code for o in outcomes}
    # Accepted: a 2xx, whatever follows it (read up to the cap, then dropped).
    assert {by_kind[kind] for kind in ("accepts", "huge_body", "endless_chunks")} == {0}, by_kind
    # Not an http(s) URL: bad input, refused before anything is sent.
    reachable = ("long", "nothing_listens")  # well-formed URLs where nothing listens
    assert {by_kind[kind] for kind in WEBHOOK_URLS if kind not in reachable} == {2}, by_kind
    # Every other receiver: a failed delivery (exit 1), by the delivery's deadline at the latest.
    accepted = ("accepts", "huge_body", "endless_chunks")
    failed = [kind for kind in kinds if kind not in WEBHOOK_URLS and kind not in accepted]
    assert {by_kind[kind] for kind in [*failed, *reachable]} == {1}, by_kind
    # A receiver that never finishes answering costs the delivery's deadline, not a read timeout per byte.
    slowest = max(o.seconds for o in outcomes if o.kind in ("drip", "silence"))
    assert WEBHOOK_DEADLINE_S <= slowest < WEBHOOK_DEADLINE_S + 10, slowest
