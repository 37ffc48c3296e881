"""The viewer answers only the host names it serves, and a page number it cannot page to is a 400."""

from __future__ import annotations

import http.client
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT
from eval_pipeline.viewer.server import MAX_PAGE, served_hosts

from .viewer_server import get, serving

runner = CliRunner()


def get_as(url: str, host: str) -> tuple[int, str]:
    """Status and body of ``GET /`` at ``url`` with the ``Host`` header ``host``."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.putrequest("GET", "/", skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8")
    finally:
        connection.close()


def test_a_forged_host_header_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_PIPELINE_VIEWER_URL", "https://evals.example.org:8443/")
    with serving(str(tmp_path / "empty"), "--allowed-host", "viewer.internal") as url:
        port = urlsplit(url).port
        for forged in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.attacker.example", ""):
            status, body = get_as(url, forged)
            assert (status, body) == (400, "Invalid host header"), forged
        for served in (f"127.0.0.1:{port}", f"localhost:{port}", "viewer.internal", "evals.example.org:8443"):
            status, body = get_as(url, served)
            assert status == 200 and "No runs in history yet." in body, served


def test_the_served_hosts() -> None:
    assert served_hosts("127.0.0.1", environ={}) == ["localhost", "127.0.0.1", "[::1]"]
    assert served_hosts("::1", ["*.corp.example", "Viewer.Internal"], environ={}) == [
        "localhost",
        "127.0.0.1",
        "[::1]",
        "*.corp.example",
        "viewer.internal",
    ]
    assert served_hosts("0.0.0.0", environ={"EVAL_PIPELINE_VIEWER_URL": "http://evals.local:8765"})[-2:] == [
        "0.0.0.0",
        "evals.local",
    ]


@pytest.mark.parametrize("bad", ["evil*.example", "a b", "http://x", "x/y", ""])
def test_a_malformed_allowed_host_is_bad_input(bad: str) -> None:
    result = runner.invoke(app, ["view", "--allowed-host", bad, "--port", "0"])
    assert (
        result.exit_code == EXIT_BAD_INPUT
        and f"--allowed-host {bad!r}: expected a host name" in result.stderr
    )
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_page_past_any_offset_is_a_400(history: str) -> None:
    with serving(history) as viewer:
        for page in ("99999999999999999999999", str(MAX_PAGE + 1), "9" * 5000, "%C2%B2", "-1", "1e3"):
            for path in ("/runs/run-c4", "/lanes/deterministic_fluency/grid"):
                status, html = get(f"{viewer}{path}?page={page}")
                assert status == 400 and f"page must be a whole number from 1 to {MAX_PAGE}" in html, (
                    path,
                    page,
                )
        status, _ = get(f"{viewer}/runs/run-c4?page={MAX_PAGE}")
        assert status == 200  # the last page it takes: empty, not an error
