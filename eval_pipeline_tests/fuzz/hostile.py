"""Hostile project files and runtime replies, and the property every one of them must meet.

Four sources, each mutated by seeded random choices from known attacks and slips:

- ``lane``: a lane's ``lane.yaml`` (each real lane's), through ``eval-pipeline validate``;
- ``targets``: ``evals/runtimes.yaml``, through ``validate`` (which reads it, every target's
  options included);
- ``notify``: ``evals/notify.yaml`` (:data:`NOTIFY_FILE`, channels and routes), through
  ``validate`` (which reads it, the lanes and targets its routes name and the environment
  variables its channels name included);
- ``reply``: the lines an ``exec:`` runtime answers with, through ``eval-pipeline run``;
- ``webhook``: a channel's webhook URL (:data:`WEBHOOK_URLS`) and the receiver behind it
  (:func:`webhook_receivers`: redirects, endless bodies and headers, a byte every second,
  silence, not HTTP, echoes), through ``eval-pipeline notify test``.

The property (:func:`check`): every input gives exit 0, 1, 2 or 4 with something said, never a
traceback, never more than 1 GB resident, never past its deadline, and never prints
:data:`SECRET` (planted in every webhook URL). One batch of inputs runs
in one child process under a memory ceiling (``python -m eval_pipeline_tests.fuzz.hostile``), the
command line in-process for each input, so the batch's peak memory bounds every input's and each
input's seconds are its own.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval_pipeline_tests.paths import PROJECT_ROOT

SOURCES = ("lane", "targets", "notify", "reply", "webhook")
DEADLINE_S = 60.0  # per input
LANES = ("deterministic_fluency", "articulation_of_status", "conversational_thread_coherence")
REPLY_CHILD = Path(__file__).with_name("reply_child.py")
# The notify file every hostile one starts from: valid against the copied lanes and targets,
# its channels' variables set in the batch's environment (NOTIFY_ENV).
NOTIFY_FILE = """\
# Which webhooks hear about which lane runs.
channels:
  team: {format: slack, url_env: TEAM_WEBHOOK_URL}
  pager:
    format: json
    url_env: PAGER_HOOK
routes:
  - {channel: team, events: [check_failed, regression, void, stale, recovered], lanes: all}
  - channel: pager
    events: [check_failed, void]
    lanes: [deterministic_fluency, articulation_of_status]
    runtimes: [reference]
    severity: [ERROR]
"""
NOTIFY_ENV = {"TEAM_WEBHOOK_URL": "http://127.0.0.1:9/team", "PAGER_HOOK": "http://127.0.0.1:9/pager"}


SECRET = "s3cr3t"
# The delivery deadline of a webhook batch (the batch's own process): a receiver that never
# finishes answering costs this, not the 30 s a real delivery allows it.
WEBHOOK_DEADLINE_S = 3.0
WEBHOOK_URLS = {
    "no_scheme": f"hooks.example.com/services/{SECRET}",
    "host_as_scheme": f"hooks.example.com:443/{SECRET}",
    "port_not_a_number": f"http://127.0.0.1:port/{SECRET}",
    "space": f"http://127.0.0.1:9/a {SECRET}",
    "header_injection": f"http://127.0.0.1:9/{SECRET}\r\nX-Injected: 1",
    "file": f"file:///etc/passwd?{SECRET}",
    "ftp": f"ftp://127.0.0.1/{SECRET}",
    "no_host": f"http:///{SECRET}",
    "bad_ipv6": f"http://[::1/{SECRET}",
    "long": "http://127.0.0.1:9/" + SECRET * 20_000,
    "nothing_listens": f"http://127.0.0.1:9/{SECRET}",
}


def webhook_receivers() -> dict[str, Any]:
    """Each hostile receiver's behaviour (see eval_pipeline_tests/notify/hostile_receivers.py)."""
    from eval_pipeline_tests.notify import hostile_receivers as r

    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    elsewhere = "http://127.0.0.1:9/elsewhere"
    return {
        "accepts": r.answer(ok),
        "redirect_elsewhere": r.redirect_to(elsewhere),
        "redirect_307": r.redirect_to(elsewhere, 307),
        "redirect_to_file": r.redirect_to("file:///etc/passwd"),
        "huge_body": r.huge_body(3 << 30),
        "endless_chunks": r.endless(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"100000\r\n" + b"x" * (1 << 20) + b"\r\n",
        ),
        "endless_header": r.endless(b"HTTP/1.1 200 OK\r\nX-Long: ", b"x" * 65536),
        "many_headers": r.endless(b"HTTP/1.1 200 OK\r\n", b"X-A: b\r\n"),
        "drip": r.drip(1.0),
        "silence": r.silence,
        "hang_up": r.answer(b""),
        "not_http": r.answer(b"SSH-2.0-OpenSSH_9.6\r\n"),
        "status_999": r.answer(b"HTTP/1.1 999 Whatever\r\nContent-Length: 0\r\n\r\n"),
        "echo": r.echo_request,
    }


def webhook_kinds() -> list[str]:
    return [*WEBHOOK_URLS, *webhook_receivers()]


def _bomb(levels: int, fan_out: int) -> str:
    lines = ['z0: &z0 "lol"']
    lines += [f"z{i}: &z{i} [" + ", ".join([f"*z{i - 1}"] * fan_out) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


# Each YAML mutation: (name, text, rng) → bytes. Several break the file, some keep it valid.
def _yaml_mutations() -> dict[str, Callable[[str, random.Random], bytes]]:
    def at_random_line(text: str, rng: random.Random, insert: str) -> str:
        lines = text.splitlines(keepends=True)
        index = rng.randrange(len(lines) + 1)
        return "".join([*lines[:index], insert, *lines[index:]])

    return {
        "unchanged": lambda t, r: t.encode(),
        "alias_bomb": lambda t, r: (t + _bomb(r.randint(6, 12), r.randint(6, 12))).encode(),
        "self_alias": lambda t, r: (t + "loop: &loop [*loop]\n").encode(),
        "python_tag": lambda t, r: (t + "evil: !!python/object/apply:os.system ['true']\n").encode(),
        "python_name": lambda t, r: (t + "evil: !!python/name:os.system ''\n").encode(),
        "unknown_tag": lambda t, r: (t + "odd: !custom {a: 1}\n").encode(),
        "deep_flow": lambda t, r: (
            t + "deep: " + "[" * r.choice([65, 1000, 10_000]) + "]" * 10_000 + "\n"
        ).encode(),
        "deep_block": lambda t, r: (
            t + "deep:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(r.choice([70, 400]))) + "\n"
        ).encode(),
        "duplicate_top": lambda t, r: (t + r.choice(re.findall(r"(?m)^[a-z_]+:", t)) + " again\n").encode(),
        "duplicate_nested": lambda t, r: _duplicate_nested(t, r).encode(),
        "non_text_key": lambda t, r: (
            t + r.choice(["1: one\n", "yes: no\n", "null: x\n", "[a]: b\n", "? {a: 1}\n: c\n"])
        ).encode(),
        "bad_utf8": lambda t, r: _at_byte(t.encode(), r, r.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"])),
        "nul_byte": lambda t, r: _at_byte(t.encode(), r, b"\x00"),
        "bom": lambda t, r: b"\xef\xbb\xbf" + t.encode(),
        "utf16": lambda t, r: t.encode("utf-16"),
        "truncated": lambda t, r: t.encode()[: r.randrange(1, max(2, len(t.encode())))],
        "tab_indent": lambda t, r: t.replace("  ", "\t", 1).encode(),
        "long_scalar": lambda t, r: (t + "long: " + "x" * r.choice([10_000, 1_000_000]) + "\n").encode(),
        "huge_file": lambda t, r: (t + "# " + "x" * (5 << 20) + "\n").encode(),
        "huge_integer": lambda t, r: (
            t
            + r.choice(
                ["", "a: 1\n", "also: " + r.choice(["0x" + "f" * 5000, "1:" * 3000 + "1", "9" * 100_000])]
            )
            + "\nhuge: "
            + "9" * 5000
            + "\n"
        ).encode(),
        "two_documents": lambda t, r: (t + "---\n" + t).encode(),
        "merge_non_mapping": lambda t, r: (t + "m:\n  <<: [1, 2]\n").encode(),
        "unknown_key": lambda t, r: at_random_line(t, r, "unknownn: 1\n").encode(),
        "swapped_type": lambda t, r: _swap_value(t, r).encode(),
        "empty": lambda t, r: b"",
        "only_comment": lambda t, r: b"# nothing here\n",
        "a_list": lambda t, r: b"- a\n- b\n",
        "byte_flip": lambda t, r: _flip(t.encode(), r),
    }


def _duplicate_nested(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    nested = [
        i
        for i, line in enumerate(lines)
        if line.startswith("  ") and ":" in line and not line.strip().startswith("#")
    ]
    if not nested:
        return text + "a: 1\na: 2\n"
    index = rng.choice(nested)
    return "".join([*lines[: index + 1], lines[index], *lines[index + 1 :]])


def _swap_value(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    candidates = [
        i for i, line in enumerate(lines) if ": " in line and not line.strip().startswith(("#", "-"))
    ]
    if not candidates:
        return text
    index = rng.choice(candidates)
    key, _, _ = lines[index].partition(": ")
    lines[index] = f"{key}: {rng.choice(['[1, 2]', '{a: b}', '1.5', 'true', '~', '-7', '1e999', '.nan'])}\n"
    return "".join(lines)


def _at_byte(data: bytes, rng: random.Random, inserted: bytes) -> bytes:
    index = rng.randrange(len(data) + 1)
    return data[:index] + inserted + data[index:]


def _flip(data: bytes, rng: random.Random) -> bytes:
    index = rng.randrange(len(data))
    return data[:index] + bytes([data[index] ^ (1 << rng.randrange(8))]) + data[index + 1 :]


# Reply lines an exec: child answers with (see reply_child.py); "{id}" becomes the request's id.
REPLIES: dict[str, list[bytes]] = {
    "answer": [b'{"id": "{id}", "surface": "An answer."}'],
    "duplicate_surface": [b'{"id": "{id}", "surface": "I do not know that.", "surface": "forged"}'],
    "duplicate_id": [b'{"id": "{id}", "id": "{id}", "surface": "x"}'],
    "lone_surrogate": [b'{"id": "{id}", "surface": "half \\ud800 a character"}'],
    "nan": [b'{"id": "{id}", "surface": "x", "score": NaN}'],
    "deep": [b'{"id": "{id}", "surface": "x", "raw": ' + b"[" * 5000 + b"]" * 5000 + b"}"],
    "not_utf8": [b'{"id": "{id}", "surface": "caf\xe9"}'],
    "not_json": [b"this is not json"],
    "array": [b'["{id}", "x"]'],
    "no_id": [b'{"surface": "x"}'],
    "wrong_id": [b'{"id": "someone-else", "surface": "x"}'],
    "surface_number": [b'{"id": "{id}", "surface": 42}'],
    "surface_null": [b'{"id": "{id}", "surface": null}'],
    "tag_object": [b'{"id": "{id}", "surface": "x", "grounding_source": {"a": 1}}'],
    "error": [b'{"id": "{id}", "error": "the model is down"}'],
    "extra_line": [b'{"id": "{id}", "surface": "x"}', b'{"id": "{id}", "surface": "again"}'],
    "huge": [b'{"id": "{id}", "surface": "' + b"x" * 2_000_000 + b'"}'],
    "blank_then_answer": [b"", b"   ", b'{"id": "{id}", "surface": "late"}'],
    "control_chars": [b'{"id": "{id}", "surface": "a\x01b"}'],
    "big_integer": [b'{"id": "{id}", "surface": "x", "n": ' + b"9" * 5000 + b"}"],
    "silence": [],  # never answers: the deadline ends the turn
    "exit": [b"<exit>"],
}


@dataclass
class Outcome:
    source: str
    kind: str
    exit_code: int | None
    seconds: float
    said: bool
    traceback: str = ""
    leaked: bool = False  # SECRET was printed

    def violations(self) -> list[str]:
        found = []
        if self.exit_code not in (0, 1, 2, 4):
            found.append(f"exit {self.exit_code}")
        if self.traceback:
            found.append(f"traceback: {self.traceback}")
        if not self.said:
            found.append("said nothing")
        if self.seconds > DEADLINE_S:
            found.append(f"took {self.seconds:.1f}s")
        if self.leaked:
            found.append("printed the secret")
        return found


@dataclass
class BatchReport:
    outcomes: list[Outcome] = field(default_factory=list)

    def violations(self) -> list[str]:
        return [f"{o.source}/{o.kind}: {v}" for o in self.outcomes for v in o.violations()]


def _invoke(args: list[str], env: dict[str, str]) -> tuple[int | None, str, str]:
    """The command line in this process: (exit code, what it said, a traceback's last line or '')."""
    from typer.testing import CliRunner

    from eval_pipeline.cli import app

    result = CliRunner().invoke(app, args, env=env)
    exception = result.exception
    traceback = ""
    if exception is not None and not isinstance(exception, SystemExit):
        traceback = f"{type(exception).__name__}: {exception}"[:300]
    return result.exit_code, result.stdout + result.stderr, traceback


@contextlib.contextmanager
def _evals_folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "evals"
        for lane in LANES:
            shutil.copytree(PROJECT_ROOT / "evals" / lane, root / lane)
        shutil.copy(PROJECT_ROOT / "evals" / "runtimes.yaml", root / "runtimes.yaml")
        yield root


def run_batch(source: str, count: int, seed: int) -> BatchReport:
    """``count`` hostile inputs of ``source``, each through the command line it reaches."""
    rng = random.Random(seed)
    report = BatchReport()
    if source == "webhook":
        from eval_pipeline.notify import delivery

        delivery.DEADLINE_S = WEBHOOK_DEADLINE_S  # this batch process's own deadline (see above)
    with _evals_folder() as root, tempfile.TemporaryDirectory() as state:
        if source == "webhook":
            (root / "notify.yaml").write_text(NOTIFY_FILE, encoding="utf-8")
        env = {
            "EVAL_PIPELINE_EVALS": str(root),
            "EVAL_PIPELINE_STATE": state,
            "DAGSTER_HOME": f"{state}/home",
            **NOTIFY_ENV,
        }
        for index in range(count):
            report.outcomes.append(_one(source, root, env, rng, index))
    return report


def _one(source: str, root: Path, env: dict[str, str], rng: random.Random, index: int) -> Outcome:
    mutations = _yaml_mutations()
    original: bytes | None = None  # the project file a YAML mutation replaced (none: no notify file)
    if source == "webhook":
        return _webhook(webhook_kinds()[index % len(webhook_kinds())], env)
    if source == "reply":
        kind = list(REPLIES)[index % len(REPLIES)]
        lines = Path(env["EVAL_PIPELINE_STATE"]) / "replies.txt"
        lines.write_bytes(b"\n".join(REPLIES[kind]) + b"\n" if REPLIES[kind] else b"")
        spec = f"exec:{sys.executable} {REPLY_CHILD} {lines}"
        args = [
            "run",
            "--lane",
            "deterministic_fluency",
            "--split",
            "dev",
            "--runtime",
            spec,
            "-o",
            "timeout_s=0.5",
        ]
    else:
        kind = sorted(mutations)[index % len(mutations)]  # every kind once, then again with new details
        if source == "lane":
            lane = rng.choice(LANES)
            path = root / lane / "lane.yaml"
            base = (PROJECT_ROOT / "evals" / lane / "lane.yaml").read_text(encoding="utf-8")
        elif source == "notify":
            path, base = root / "notify.yaml", NOTIFY_FILE
        else:
            path = root / "runtimes.yaml"
            base = (PROJECT_ROOT / "evals" / "runtimes.yaml").read_text(encoding="utf-8")
        original = path.read_bytes() if path.exists() else None
        path.write_bytes(mutations[kind](base, rng))
        args = ["validate"]
    started = time.monotonic()
    code, said, traceback = _invoke(args, env)
    outcome = Outcome(source, kind, code, time.monotonic() - started, bool(said.strip()), traceback)
    if source != "reply":  # the next input starts from the project's file again
        if original is None:
            path.unlink()
        else:
            path.write_bytes(original)
    return outcome


def _webhook(kind: str, env: dict[str, str]) -> Outcome:
    """``notify test team`` with the channel's URL (and the receiver behind it) hostile."""
    from eval_pipeline_tests.notify.hostile_receivers import hostile_receiver

    receivers = webhook_receivers()
    with contextlib.ExitStack() as stack:
        if kind in receivers:
            url = stack.enter_context(hostile_receiver(receivers[kind])).url  # its path holds SECRET
        else:
            url = WEBHOOK_URLS[kind]
        started = time.monotonic()
        code, said, traceback = _invoke(["notify", "test", "team"], {**env, "TEAM_WEBHOOK_URL": url})
        seconds = time.monotonic() - started
    return Outcome("webhook", kind, code, seconds, bool(said.strip()), traceback, leaked=SECRET in said)


def main() -> None:
    parser = argparse.ArgumentParser(description="One batch of hostile inputs; prints a JSON report.")
    parser.add_argument("source", choices=SOURCES)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with contextlib.redirect_stdout(io.StringIO()):  # the report is the only thing on stdout
        report = run_batch(args.source, args.count, args.seed)
    print(json.dumps([asdict(o) for o in report.outcomes]))


if __name__ == "__main__":
    main()
