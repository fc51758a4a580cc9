"""DuckDB's thread count around a compare's per-row stages (msq.db.threads, msq.pipeline.compute).

The per-row stages run as strands on their own cursors, one core each; inside them DuckDB runs
with one thread when the compare fits in one row group (larger ones keep every thread: DuckDB
splits a scan by row group), and the connection gets its own setting back afterwards (the outputs
and the history's insert run with it).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from msq import db
from msq.config import input_from_api, options_from_kwargs
from msq.pipeline import compute
from tests.dumps import fwd, t, write_pair


def _threads(con: duckdb.DuckDBPyConnection) -> int:
    return int(db.scalar(con, "SELECT current_setting('threads')"))


def test_threads_set_inside_the_block_and_restored_after() -> None:
    con = db.connect(threads=2)
    with db.threads(con, 1):
        assert _threads(con) == 1
    assert _threads(con) == 2
    with pytest.raises(RuntimeError), db.threads(con, 1):
        raise RuntimeError("a failing stage")
    assert _threads(con) == 2
    with db.threads(con, 0):  # 0: left as it is
        assert _threads(con) == 2


def _threads_during_compute(tmp_path: Path,
                            workers: int | None = 2) -> tuple[list[int], int, int]:
    """Compare 3 ops (6 rows, their maxima differing) on a connection of two DuckDB threads: the
    thread count seen while the result and marks are tables, the rows, and the count after."""
    data = {f"Functional.relu.{i}.forward": fwd(t(mx=1.0 + i), out=t(mx=2.0 + i))
            for i in range(3)}
    bench = {name: fwd(t(mx=1.0 + i), out=t(mx=2.5 + i)) for i, name in enumerate(data)}
    cfg = json.loads(write_pair(tmp_path, data, bench).read_text())
    inp = input_from_api({"npu_json_path": cfg["npu_path"], "bench_json_path": cfg["bench_path"],
                          "stack_json_path": cfg["stack_path"]})
    opts = options_from_kwargs(False, True, False, {"workers": workers, "record": False})
    seen: list[int] = []
    con, mode, _, result = compute(inp, opts, tmp_path / "out", "", None,
                                   on_result=lambda c, _mode, _rows: seen.append(_threads(c)))
    try:
        assert mode == "statistics"
        return seen, result.rows, _threads(con)
    finally:
        con.close()


def test_compute_runs_the_result_on_one_thread_and_gives_the_setting_back(tmp_path: Path) -> None:
    # the result and marks were computed with one DuckDB thread; the connection has two again
    assert _threads_during_compute(tmp_path) == ([1], 6, 2)


def test_a_compare_larger_than_a_row_group_keeps_every_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB splits a scan by row group: above one, its second thread does real work, and a
    many-core machine should use it. (The row group is made 5 rows here, below the 6 rows.)"""
    monkeypatch.setattr(db, "DEFAULT_ROW_GROUP_ROWS", 5)
    assert _threads_during_compute(tmp_path) == ([2], 6, 2)


def test_a_small_compare_has_one_thread_from_the_start(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --workers, a compare whose dumps' rows fit in one row group opens its database
    with one thread (pipeline.small_input) and keeps it for the outputs."""
    assert _threads_during_compute(tmp_path / "small", workers=None) == ([1], 6, 1)
    # above one row group (5 rows here: the dumps have 12, the output 6): DuckDB's own count
    monkeypatch.setattr(db, "DEFAULT_ROW_GROUP_ROWS", 5)
    default = _threads(duckdb.connect())
    assert _threads_during_compute(tmp_path / "large", workers=None) == ([default], 6, default)


def test_materialize_halves_makes_one_table_in_the_views_order(tmp_path: Path) -> None:
    """--compat's result in two halves at once (msq.db.materialize_halves): one table under the
    view's name, its rows in the view's order (the lower half first), the view gone; an insert
    of its rows into a file of small row groups then fills them whole (a view of two tables'
    union was scanned by two threads, each writing its own partial row groups, which DuckDB
    merged again at the next CHECKPOINT)."""
    con = db.connect(threads=2)
    con.execute("CREATE TABLE base AS SELECT range AS seq, 'row ' || range AS txt "
                "FROM range(10000)")
    con.execute("CREATE VIEW halved AS SELECT seq, txt, seq % 7 AS m FROM base")
    want = con.execute("SELECT * FROM halved").fetchall()
    db.materialize_halves(con, "halved", "seq", 4567)
    assert db.scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'halved'") == 1
    assert db.scalar(con, "SELECT count(*) FROM duckdb_views() WHERE view_name LIKE '%halved%'") == 0
    assert con.execute("SELECT * FROM halved").fetchall() == want  # the table's own order
    con.execute("SET write_buffer_row_group_count = 1")
    con.execute(f"ATTACH '{tmp_path / 'h.duckdb'}' AS h (ROW_GROUP_SIZE 2048)")
    con.execute("CREATE TABLE h.copy AS SELECT * FROM halved")
    groups = con.execute("SELECT row_group_id, max(count) FROM pragma_storage_info('h.copy') "
                         "GROUP BY ALL ORDER BY ALL").fetchall()
    assert [n for _, n in groups] == [2048] * 4 + [10000 - 4 * 2048]
    con.close()
