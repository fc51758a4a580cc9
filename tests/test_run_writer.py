"""The driver of a directory compare records a few pairs per transaction (msq/run_writer.py).

Real pairs, computed as a pool worker computes them (msq.pair_tables.compute_pair), written by
the real driver into a real history file: the pairs commit in batches of BATCH_PAIRS, when the
driver is told it waits (``commit``), and at close (an error or a Ctrl-C ends the run through
close: the pairs whose files are published are recorded). A pair that cannot be recorded loses
its files, and the pairs before it in its transaction are recorded without it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from msq.config import Options
from msq.distributed import PairJob, discover_jobs
from msq.errors import HistoryError
from msq.pair_tables import PairTables, compute_pair
from msq.run_writer import BATCH_PAIRS, RunWriter
from tests.test_distributed import ranks


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[PairJob, PairTables]]:
    root = tmp_path_factory.mktemp("ranks")
    ranks(root, 2)
    opts = Options(workers=1, record=True)
    jobs = discover_jobs(root / "npu" / "step0", root / "bench" / "step0", False)
    out = []
    for job in jobs:
        tables = compute_pair(job, opts, root)
        assert isinstance(tables, PairTables)
        out.append((job, tables))
    return out


def committed(writer: RunWriter) -> list[int]:
    """The compare ids another cursor sees: the committed ones."""
    cur = writer.con.cursor()
    try:
        return [r[0] for r in cur.execute("SELECT compare_id FROM msq_history.compares "
                                          "ORDER BY compare_id").fetchall()]
    finally:
        cur.close()


def history(path: Path) -> list[tuple[int, list[str]]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT compare_id, files FROM compares ORDER BY compare_id").fetchall()


def test_pairs_commit_in_batches_and_when_the_driver_waits(pairs, tmp_path):
    writer = RunWriter(tmp_path, Options(record=True))
    try:
        written = []
        for n in range(BATCH_PAIRS):
            job, tables = pairs[n % len(pairs)]
            written.append(writer.write(job, tables))
            # held until the batch is full
            assert committed(writer) == ([] if n < BATCH_PAIRS - 1 else
                                         list(range(1, BATCH_PAIRS + 1)))
        assert [r.history_id for r in written] == list(range(1, BATCH_PAIRS + 1))
        writer.write(*pairs[0])
        assert committed(writer) == list(range(1, BATCH_PAIRS + 1))
        writer.commit()  # what the engines call when the next pair is not there yet
        assert committed(writer) == list(range(1, BATCH_PAIRS + 2))
    finally:
        writer.close()


def test_pairs_held_at_close_are_recorded(pairs, tmp_path):
    """A run that stops (an error, a Ctrl-C) ends through close: the pairs whose files are
    published are committed, and their rows are all there."""
    writer = RunWriter(tmp_path, Options(record=True))
    try:
        results = [writer.write(job, tables) for job, tables in pairs]
        assert committed(writer) == []
    finally:
        writer.close()
    recorded = history(tmp_path / "msq.duckdb")
    assert [cid for cid, _ in recorded] == [1, 2]
    assert [files for _, files in recorded] == [[str(p) for p in r.files] for r in results]
    with duckdb.connect(str(tmp_path / "msq.duckdb"), read_only=True) as con:
        counts = con.execute("SELECT compare_id, count(*) FROM result_rows GROUP BY ALL "
                             "ORDER BY ALL").fetchall()
    assert counts == [(1, pairs[0][1].summary["rows"]), (2, pairs[1][1].summary["rows"])]


def test_a_pair_that_cannot_be_recorded_keeps_the_pairs_before_it(pairs, tmp_path):
    """Its rows do not fit the history (here: blame rows of the wrong shape): DuckDB drops the
    whole transaction, so the pairs before it in the batch are appended again and committed;
    its files are removed, theirs stay."""
    writer = RunWriter(tmp_path, Options(record=True))
    try:
        first = writer.write(*pairs[0])
        second = writer.write(*pairs[1])
        job, good = pairs[0]
        bad_rows = dict(good.history)
        bad_rows["blame_rows"] = pa.table({"no_such_column": [1]})
        bad = PairTables(good.mode, good.framework, good.started, good.summary,
                         good.cross_framework, good.files, bad_rows, good.blame)
        before = set(tmp_path.iterdir())
        with pytest.raises(HistoryError, match="could not record"):
            writer.write(job, bad)
        assert set(tmp_path.iterdir()) == before  # its files are gone, the others' stay
        assert committed(writer) == [1, 2]
        third = writer.write(*pairs[1])  # the run could go on: the next pair is compare 3
        assert third.history_id == 3
    finally:
        writer.close()
    recorded = history(tmp_path / "msq.duckdb")
    assert recorded == [(r.history_id, [str(p) for p in r.files]) for r in (first, second, third)]
    assert all(Path(p).is_file() for _, files in recorded for p in files)
