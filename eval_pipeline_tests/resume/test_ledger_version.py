"""The journal of a transcripts step with a response cache takes the runtime version the cache
was opened with: an ``openai:`` server is asked ``GET /models`` once, and the journal holds the
same version the ledger would have asked for. Counted at a real local server."""

from __future__ import annotations

import logging
from pathlib import Path

from eval_pipeline.run.journal import JournalIdentity, nothing_committed, read_journal
from eval_pipeline.run.ledger import Journaling, transcripts_ledger
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.budget import Budget
from eval_pipeline.runtimes.cache import target_cache
from eval_pipeline.runtimes.serve import MODELS_PATH, ReferenceServer, _Handler
from eval_pipeline.runtimes.targets import RuntimeTarget


def _identity(runtime_version: str | None) -> JournalIdentity:
    return JournalIdentity("lane", "dev", "dev", "0" * 64, "served", runtime_version, 1, None)


def test_a_journal_takes_its_caches_runtime_version_and_asks_the_server_once(tmp_path: Path) -> None:
    models_asked: list[str] = []

    class CountingHandler(_Handler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") == MODELS_PATH:
                models_asked.append(self.path)
            super().do_GET()

    server = ReferenceServer(0)
    server.RequestHandlerClass = CountingHandler
    server.start_background()
    try:
        target = RuntimeTarget(
            name="served", spec=f"openai:{server.base_url}", options={"model": "reference"}
        )
        runtime = build_runtime(target.spec, target.options)
        cache = target_cache(target.spec, target.options, tmp_path / "cache")
        assert len(models_asked) == 1
        ledgers = {}
        for run_id, told in (("told", cache.runtime_version), ("asked", None)):
            ledger = transcripts_ledger(
                runtime,
                target,
                _identity(told),
                Journaling(tmp_path / "journal", run_id, is_committed=nothing_committed),
                Budget(),
                logging.getLogger(__name__),
            )
            assert ledger is not None
            ledger.close()
            ledgers[run_id] = read_journal(ledger.journal.writer.path).identity
        runtime.close()
        cache.close()
    finally:
        server.stop()
    assert len(models_asked) == 2  # the journal told its version asked nothing; the other asked once
    assert ledgers["told"] == ledgers["asked"] == _identity(cache.runtime_version)
