"""Files hashed once while they are unchanged, and again as soon as they change."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from eval_pipeline.core import memo
from eval_pipeline.core.memo import content_sha256


def test_the_hash_is_of_the_files_bytes_in_order(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(b"one\n" * 300_000)  # more than a block
    second.write_bytes(b"two\n")
    assert content_sha256([first, second]) == hashlib.sha256(first.read_bytes() + b"two\n").hexdigest()
    assert content_sha256([second, first]) != content_sha256([first, second])


def test_an_unchanged_file_is_hashed_once_and_a_changed_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b"one\n")
    hashed: list[Path] = []
    real = memo._sha256
    monkeypatch.setattr(memo, "_sha256", lambda paths: hashed.extend(paths) or real(paths))
    before = content_sha256([path])
    assert content_sha256([path]) == before and hashed == [path]
    path.write_bytes(b"two\n")  # same size, written later
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1))
    assert content_sha256([path]) == hashlib.sha256(b"two\n").hexdigest() and hashed == [path, path]
