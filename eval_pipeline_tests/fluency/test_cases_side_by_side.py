"""A big case file validated in line ranges by worker processes: the same problems, in the same
order, and the same cases table, batch for batch, as one process reading it line by line."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eval_pipeline.cases import CaseFileError, JsonLine, LineRange, line_ranges
from eval_pipeline.cases.jsonl import iter_jsonl
from eval_pipeline.lanes import LaneSpec, find_lane
from eval_pipeline.run import cases_stage
from eval_pipeline.run.cases_stage import write_cases
from eval_pipeline.run.workers import WORKERS_ENV
from eval_pipeline.tables.stage_files import BATCH_TURNS_ENV

FLUENCY = find_lane("deterministic_fluency")
GOOD = [json.loads(line) for line in FLUENCY.case_files("public")[0].read_text().splitlines() if line]
LINES = 3_000  # with the ranges below, a file of about a dozen ranges


def _case(index: int, prefix: str = "case") -> str:
    """A valid case; every seventh one sends set-up turns first (cases of 1 to 3 turns)."""
    case = {**GOOD[index % len(GOOD)], "id": f"{prefix}_{index:05d}"}
    if index % 7 == 0:
        case["setup"] = ["Remember: a fact is checked."] * (1 + index % 2)
    return json.dumps(case)


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of a few hundred lines, so a file of a few thousand is cut into many (the workers
    are real processes; only where this process cuts changes)."""
    monkeypatch.setattr(cases_stage, "PARALLEL_MIN_LINES", 1_000)
    monkeypatch.setattr(cases_stage, "RANGE_BYTES", 64 << 10)
    monkeypatch.setenv(BATCH_TURNS_ENV, "97")


def _split(tmp_path: Path, files: dict[str, list[str] | None]) -> LaneSpec:
    """A fluency lane whose split ``big`` is these files (None: a file that does not exist)."""
    folder = tmp_path / "lane"
    folder.mkdir()
    for name, lines in files.items():
        if lines is not None:
            (folder / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return FLUENCY.model_copy(update={"folder": folder, "splits": {"big": list(files)}})


def _written(spec: LaneSpec, workers: int, monkeypatch: pytest.MonkeyPatch) -> tuple[pa.Table, list[int]]:
    monkeypatch.setenv(WORKERS_ENV, str(workers))
    stage = write_cases(spec, "big")
    try:
        file = pq.ParquetFile(stage.path)
        return file.read(), [file.metadata.row_group(i).num_rows for i in range(file.metadata.num_row_groups)]
    finally:
        stage.path.unlink()


def _problems(spec: LaneSpec, workers: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv(WORKERS_ENV, str(workers))
    with pytest.raises(CaseFileError) as raised:
        write_cases(spec, "big")
    return [str(problem) for problem in raised.value.problems]


@pytest.mark.usefixtures("small_ranges")
def test_valid_files_make_the_same_table_batch_for_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _split(
        tmp_path,
        {
            "first.jsonl": [_case(i, "first") for i in range(LINES)],
            "small.jsonl": [_case(i, "small") for i in range(40)],  # read whole, by a worker
            "last.jsonl": [_case(i, "last") for i in range(LINES // 2)],
        },
    )
    assert len(cases_stage._ranges_of(spec.case_files("big")[0], 2)) > 4
    serial, serial_batches = _written(spec, 1, monkeypatch)
    parallel, parallel_batches = _written(spec, 2, monkeypatch)
    assert serial.num_rows == LINES + 40 + LINES // 2
    assert len(serial_batches) > 10
    assert parallel_batches == serial_batches
    assert parallel.equals(serial)


@pytest.mark.usefixtures("small_ranges")
def test_problems_in_different_ranges_are_reported_as_one_process_reports_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = [_case(i) for i in range(LINES)]
    big[4] = '{"id": "broken", '  # line 5: not JSON
    big[900] = big[900].replace('"pack_definition"', '"Not A Category"')  # a schema problem
    big[1500] = _case(9)  # line 1501 repeats the id first used at line 10, ranges earlier
    big[1502] = big[1501]  # line 1503 repeats line 1502 (the same range) ...
    big[2799] = big[1501]  # ... and so does line 2800 (a later range)
    big[2000] = ""  # a blank line holds no record and is no problem
    big[2500] = '{"id": "twice", "id": "twice"}'
    spec = _split(
        tmp_path, {"big.jsonl": big, "again.jsonl": [_case(5), _case(LINES + 1)], "gone.jsonl": None}
    )
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "staging"))  # where stage files are written
    (tmp_path / "staging").mkdir()
    ranges = cases_stage._ranges_of(spec.case_files("big")[0], 2)
    range_of = {line: sum(r.first_line <= line for r in ranges) for line in (5, 901, 1501, 2800)}
    assert len(set(range_of.values())) == 4  # problems in ranges of their own (line 10 is in line 5's)

    serial = _problems(spec, 1, monkeypatch)
    parallel = _problems(spec, 2, monkeypatch)
    assert parallel == serial
    big_file, again, gone = (str(path) for path in spec.case_files("big"))
    assert [problem.split(": ")[0] for problem in serial] == [
        *(f"{big_file}:{line}" for line in (5, 901, 1501, 1503, 2501, 2800)),
        f"{again}:1",
        f"{gone}:0",
    ]
    assert f"{big_file}:901: category: " in serial[1]
    assert f"{big_file}:1501: id: duplicate case id 'case_00009' (first used at {big_file}:10)" in serial
    for line in (1503, 2800):
        assert (
            f"{big_file}:{line}: id: duplicate case id 'case_01501' (first used at {big_file}:1502)" in serial
        )
    assert f"{again}:1: id: duplicate case id 'case_00005' (first used at {big_file}:6)" in serial
    assert list((tmp_path / "staging").iterdir()) == []  # nothing half-written, no worker's file left


def test_a_file_is_cut_into_ranges_at_line_starts_that_read_as_the_whole(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    lines = [_case(i) for i in range(20_000)]
    lines[7], lines[12_001] = "not json", ""
    path.write_text("\r\n".join(lines), encoding="utf-8")  # CRLF, and no \n after the last line
    ranges = line_ranges(path, 4, 20_000)
    assert len(ranges) == 4 and ranges[0] == LineRange(0, 1, ranges[1].first_line - 1)
    assert [r.count for r in ranges[:-1]] == [
        b.first_line - a.first_line for a, b in itertools.pairwise(ranges)
    ]
    whole = list(iter_jsonl(path))
    assert [item for part in ranges for item in iter_jsonl(path, part)] == whole
    assert sum(isinstance(item, JsonLine) for item in whole) == 20_000 - 2
    assert line_ranges(path, 4, 20_001) == []  # too few lines: read whole
    assert line_ranges(path, 1, 1) == []


@pytest.mark.parametrize("first", [b"\xef\xbb\xbf", b"\xff\xfe", b"   \n", b"\n"])
def test_a_file_whose_first_line_only_the_whole_file_judges_is_read_whole(
    tmp_path: Path, first: bytes
) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_bytes(first + b"\n".join(_case(i).encode() for i in range(3_000)) + b"\n")
    assert line_ranges(path, 4, 1_000) == []
    path.write_bytes(path.read_bytes()[len(first) :])
    assert len(line_ranges(path, 4, 1_000)) == 4


def test_a_bad_worker_count_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKERS_ENV, "0")
    with pytest.raises(ValueError, match=f"{WORKERS_ENV} must be a whole number of processes >= 1, got '0'"):
        write_cases(FLUENCY, "public")
