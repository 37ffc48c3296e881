"""A surface holding characters XML 1.0 forbids (U+FFFE, U+FFFF, C0 controls) still gives a
``--junit`` file every XML parser reads."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline_tests.fuzz.hostile import REPLY_CHILD

# Escaped in the JSON reply, so the child writes valid UTF-8 and the runtime decodes them.
SURFACE = "No \\ufffe placeholder\\uffff here\\u0001, \\ud7ff\\ue000 kept \\ud83d\\ude00."


def test_a_surface_with_xml_illegal_characters_gives_a_well_formed_junit_file(tmp_path: Path) -> None:
    replies = tmp_path / "replies.txt"
    replies.write_text('{"id": "{id}", "surface": "' + SURFACE + '"}\n', encoding="utf-8")
    junit = tmp_path / "junit.xml"
    spec = f"exec:{sys.executable} {REPLY_CHILD} {replies}"
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--lane",
            "deterministic_fluency",
            "--split",
            "dev",
            "--runtime",
            spec,
            "--junit",
            str(junit),
        ],
    )
    assert result.exit_code in (0, 1), (result.output, result.exception)
    surfaces = [element.text or "" for element in ET.parse(junit).iter("failure")]  # expat: strict XML 1.0
    assert surfaces and all("No  placeholder here, \ud7ff\ue000 kept 😀." in text for text in surfaces), (
        surfaces
    )
