"""Declared capabilities: what a runtime can do is checked once, when it is built, and read
from its declaration after that; a pool lent out for a scope declares the pool's."""

from __future__ import annotations

import re
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.runtimes import RuntimeSpecError, build_runtime, register_runtime
from eval_pipeline.runtimes.adapters.exec_process import ExecOptions, ExecRuntime
from eval_pipeline.runtimes.base import Capabilities, ChatSession, TurnResponse
from eval_pipeline.runtimes.faults import RetryPolicy, TurnFault
from eval_pipeline.runtimes.options import NoOptions
from eval_pipeline.runtimes.registry import RUNTIME_ADAPTERS, RUNTIME_OPTIONS
from eval_pipeline.runtimes.warm import SharedRuntime, shared, warm_runtimes


def threads(count: int = 3) -> list[Thread]:
    return [
        Thread(case_id=f"case{i}", turns=(TurnRequest(turn_index=0, role="turn", prompt="Hello?"),))
        for i in range(count)
    ]


class BusyOnce:
    """Answers every prompt, after failing its first turn transiently."""

    def __init__(self) -> None:
        self.sent = 0

    def send(self, prompt: str) -> TurnResponse:
        self.sent += 1
        if self.sent == 1:
            raise TurnFault("busy", transient=True, retry_after=0.0)
        return TurnResponse(surface="Hello.")

    def close(self) -> None:
        pass


class Undeclared:
    """A third party's runtime that declares nothing; its sessions take no seed."""

    spec = "undeclared"

    def __init__(self) -> None:
        self.opened_on: list[str] = []

    def open_session(self, session_id: str) -> ChatSession:
        self.opened_on.append(threading.current_thread().name)
        return BusyOnce()

    def close(self) -> None:
        pass


def declaring(capabilities: Any) -> type:
    class Declaring(Undeclared):
        pass

    Declaring.capabilities = capabilities
    return Declaring


class NoSessions:
    spec = "no-sessions"
    capabilities = Capabilities()

    def close(self) -> None:
        pass


Register = Callable[[str, Callable[[], object]], None]


@pytest.fixture
def registered() -> Iterator[Register]:
    """Register a scheme whose factory returns ``build()``; the scheme is gone afterwards."""
    schemes: list[str] = []

    def register(scheme: str, build: Callable[[], object]) -> None:
        schemes.append(scheme)
        register_runtime(scheme, NoOptions)(lambda argument, options: build())

    yield register
    for scheme in schemes:
        RUNTIME_ADAPTERS._entries.pop(scheme)
        RUNTIME_OPTIONS._entries.pop(scheme)


@pytest.mark.parametrize(
    ("built", "wrong"),
    [
        (Undeclared, "has no capabilities"),
        (declaring({"concurrency": 4}), "declares capabilities {'concurrency': 4}, not a Capabilities"),
        (declaring(Capabilities(seeded=True)), "declares itself seeded but its open_session takes no seed"),
        (NoSessions, "has no open_session"),
    ],
    ids=["undeclared", "dict", "seedless", "no-open"],
)
def test_a_registered_adapter_without_a_well_formed_declaration_fails_at_build(
    registered: Register, built: type, wrong: str
) -> None:
    registered("malformed", built)
    with pytest.raises(RuntimeSpecError) as refused:
        build_runtime("malformed:x")
    message = str(refused.value)
    assert message.startswith(f"runtime adapter 'malformed' built a {built.__name__} that "), message
    assert wrong in message, message


@pytest.mark.parametrize(
    ("fields", "wrong"),
    [
        ({"concurrency": 0}, "concurrency must be a whole number of at least 1, not 0"),
        ({"concurrency": True}, "concurrency must be a whole number of at least 1, not True"),
        ({"retry": 3}, "retry must be a RetryPolicy, not 3"),
        ({"seeded": "yes"}, "seeded must be True or False, not 'yes'"),
    ],
    ids=["zero-concurrency", "boolean-concurrency", "int-retry", "text-seeded"],
)
def test_a_malformed_declaration_cannot_be_made(fields: dict[str, Any], wrong: str) -> None:
    with pytest.raises(TypeError, match=re.escape(wrong)):
        Capabilities(**fields)


def test_a_declared_runtime_is_built_as_it_is_and_driven_as_it_declares(registered: Register) -> None:
    declared = Capabilities(retry=RetryPolicy(max_retries=1, backoff_s=0.0), concurrency=3)
    registered("declared", declaring(declared))
    runtime = build_runtime("declared:x")
    assert isinstance(runtime, Undeclared) and runtime.capabilities is declared
    rows = drive(runtime, threads(), Sending(concurrency=None)).to_dict("records")
    assert [(row["attempts"], row["error"]) for row in rows] == [(2, None)] * 3  # retried once
    assert all(name.startswith("eval-session") for name in runtime.opened_on), runtime.opened_on


SEED_ECHO_CHILD = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    reply = {"id": request["id"], "surface": "My seed is %s." % request.get("seed")}
    sys.stdout.write(json.dumps(reply) + "\\n")
    sys.stdout.flush()
"""


def started_pool(argv: list[str], workers: int) -> ExecRuntime:
    pool = ExecRuntime(argv, spec="exec:" + shlex.join(argv), options=ExecOptions(workers=workers))
    pool.start()
    return pool


def test_a_seeded_pool_gets_its_seed_through_the_shared_runtime() -> None:
    argv = [sys.executable, "-c", SEED_ECHO_CHILD]
    with warm_runtimes():
        runtime = shared(("seed-echo",), lambda: started_pool(argv, workers=2))
        assert isinstance(runtime, SharedRuntime)
        assert runtime.capabilities == Capabilities(concurrency=2, seeded=True)
        rows = drive(runtime, threads(), Sending(concurrency=None, seed=7, repeat=2)).to_dict("records")
        runtime.close()  # the pool stays up for the rest of the scope
        assert len(runtime.process_groups) == 2
    assert len(rows) == 6 and all(row["error"] is None for row in rows), rows
    assert len({row["seed"] for row in rows}) == 6
    assert all(row["surface"] == f"My seed is {row['seed']}." for row in rows), rows
    assert runtime.process_groups == []  # the scope's end closed the pool
