"""A real model for the tests of this folder: SmolLM2-135M-Instruct on llama.cpp's server, started
once per test session (per worker: the tests share one xdist group) on a free port; every
test here skips, saying why, without it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eval_pipeline.runtimes.local_model import missing_parts, served_model


@pytest.fixture(scope="session")
def local_model_url() -> Iterator[str]:
    missing = missing_parts()
    if missing:
        pytest.skip(f"no local model to evaluate: not installed: {', '.join(missing)}")
    with served_model(threads=1) as base_url:  # a shared CPU: one thread never spins waiting for another
        yield base_url
