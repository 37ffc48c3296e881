"""protocol_complete: every code, on both sides, over the raw batch response."""

from __future__ import annotations

import pytest

from eval_pipeline.i18n.protocol import decode_batch
from eval_pipeline_tests.i18n.helpers import assertion, codes, make_case, results

ITEMS = "Start\nOptions\nQuit"


def _codes(raw: str | None, **params: object) -> list[str]:
    case = make_case(ITEMS, assertion("protocol_complete", **params))
    return codes(case, "", raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("[1] 开始\n[2] 选项\n[3] 退出\n<<END>>", ["ok"]),
        ("[1] 开始\n\n[2] 选项\n[3] 退出\n<<END>>\n", ["ok"]),  # blank lines are ignored
        ("[1] 开始\n[2] 选项\n<<END>>", ["protocol_missing_item"]),
        ("[1] 开始\n[2] 选项\n[3] 退出\n[4] 更多\n<<END>>", ["protocol_extra_item"]),
        ("[1] 开始\n[2] 选项\n[2] 选项\n[3] 退出\n<<END>>", ["protocol_duplicate_item"]),
        ("[1] 开始\n[3] 退出\n<<END>>", ["protocol_item_gap"]),
        ("[1] 开始\n[2]\n[3] 退出\n<<END>>", ["protocol_empty_item"]),
        ("[1] 开始\n2. 选项\n[3] 退出\n<<END>>", ["protocol_item_gap", "protocol_malformed_item"]),
        ("[2] 选项\n[1] 开始\n[3] 退出\n<<END>>", ["protocol_out_of_order"]),
        ("[1] 开始\n[2] 选项\n[3] 退出", ["protocol_missing_terminator"]),
        ("[1] 开始\n[2] 选项\n[3] 退出\n<<end>>", ["protocol_malformed_terminator"]),
        ("[1] 开始\n[2] 选项\n[3] 退出 <<END>>", ["protocol_malformed_terminator"]),
        ("[1] 开始\n[2] 选项\n<<END>>\n[3] 退出", ["protocol_malformed_terminator", "protocol_missing_item"]),
        ("", ["protocol_no_response"]),
        (None, ["protocol_no_response"]),
    ],
)
def test_protocol_codes(raw: str | None, expected: list[str]) -> None:
    assert _codes(raw, terminator="<<END>>") == expected


def test_named_batch_missing_extra_duplicate_and_no_terminator_at_once() -> None:
    raw = "[1] 开始\n[1] 开始\n[4] 多余"
    case = make_case(ITEMS, assertion("protocol_complete", terminator="<<END>>"))
    found = [(r.code, r.evidence.get("item")) for r in results(case, "", raw)]
    assert ("protocol_duplicate_item", 1) in found
    assert ("protocol_extra_item", 4) in found
    assert ("protocol_item_gap", 2) in found and ("protocol_item_gap", 3) in found
    assert ("protocol_missing_terminator", None) in found
    assert all(not r.passed for r in results(case, "", raw))


def test_extra_items_allowed_and_no_terminator_needed_when_not_named() -> None:
    assert _codes("[1] a\n[2] b\n[3] c\n[4] d", allow_extra_items=True) == ["ok"]
    assert _codes("[1] a\n[2] b\n[3] c\n[4] d") == ["protocol_extra_item"]
    assert _codes("[1] a\n[2] b\n[3] c") == ["ok"]


def test_decoded_text_is_the_items_in_order_with_missing_ones_empty() -> None:
    assert decode_batch("[2] b\n[1] a\n[1] again\n<<END>>", 3, "<<END>>") == "a\nb\n"
