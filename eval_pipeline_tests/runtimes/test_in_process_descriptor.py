"""An in-process ``python:`` bot that writes to file descriptor 1 itself (``os.write``, a C
library's ``printf``) never reaches this process's stdout: it goes to stderr, as its
``print()`` does, with turns running concurrently, while this process's own stdout still works.

Each case runs in a child process with real descriptors, as the command line does."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from eval_pipeline_tests.paths import PROJECT_ROOT

CHILD = textwrap.dedent(
    """
    import json, sys, threading, time
    from eval_pipeline.run.drive import Sending, drive
    from eval_pipeline.lanes.kind import Thread, TurnRequest
    from eval_pipeline.runtimes.registry import build_runtime

    concurrency = int(sys.argv[1])
    threads = [
        Thread(case_id=f"case{i}", turns=tuple(
            TurnRequest(turn_index=t, role="turn", prompt=f"case{i} turn{t}") for t in range(2)
        ))
        for i in range(6)
    ]
    runtime = build_runtime(
        "python:eval_pipeline_tests.runtimes.descriptor_bot:make_descriptor_writer", {}
    )
    # The first bot call puts the router in front of sys.stdout; a print() already under way
    # holds the stream it started with, so ours begin after it.
    runtime.open_session("first").close()
    stop = threading.Event()

    def our_own_output():  # this process writing its stdout while bot turns run
        while not stop.is_set():
            print("ours", flush=True)
            time.sleep(0.01)

    writer = threading.Thread(target=our_own_output)
    writer.start()
    try:
        rows = drive(runtime, threads, Sending(concurrency=concurrency)).to_dict("records")
    finally:
        stop.set()
        writer.join()
        runtime.close()
    print(json.dumps([[row["surface"], row["error"]] for row in rows]))
    """
)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_bot_writing_to_descriptor_1_never_reaches_stdout(concurrency: int) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(concurrency)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    *ours, document = result.stdout.splitlines()
    assert set(ours) == {"ours"} and len(ours) > 1, result.stdout  # our writes, all of them on stdout
    answers = json.loads(document)
    assert len(answers) == 12 and all(error is None for _, error in answers), answers
    assert "from the bot" not in result.stdout
    assert "ours" not in result.stderr  # none of our own writes was swept along to stderr
    prompts = [f"case{i} turn{t}" for i in range(6) for t in range(2)]
    for prompt in prompts:  # every write of every turn, on stderr
        assert f"fd1 from the bot: {prompt}\n" in result.stderr, result.stderr
        assert f"printf from the bot: {prompt}\n" in result.stderr, result.stderr
    # Descriptor 1 is put back once no bot call runs: our last line reached stdout.
    assert document.startswith("[[")
