"""Recording compares into the history database (msq/history/recorder.py)."""

from __future__ import annotations

import logging
import math
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import msq
from msq import db as msq_db
from msq import history
from msq.blame import compute as blame_compute
from msq.blame import run as blame_run
from msq.cli import main
from msq.errors import HistoryError
from msq.export import outputs
from msq.history import recorder, schema
from tests.history.builders import (
    LINEAR1_OUT,
    RANKS,
    STEPS,
    count,
    csv_rows,
    locked_by_another_process,
    run_api,
    single_card,
    sql,
    tensor,
)


def test_every_compare_of_both_runs_is_recorded(hist: Path) -> None:
    rows = csv_rows(sql(hist, "SELECT label, step, rank, mode, n_rows, n_matched FROM compares "
                              "ORDER BY label, step, rank", "--format", "csv"))
    assert rows[0] == ["label", "step", "rank", "mode", "n_rows", "n_matched"]
    assert rows[1:] == [[label, str(s), str(r), "statistics", "13", "13"]
                        for label in ("v1", "v2") for s in STEPS for r in RANKS]


def test_default_database_is_in_the_output_directory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MSQ_DB", raising=False)
    cj = single_card(tmp_path, {LINEAR1_OUT: {"Max": 3.0}})
    run_api(cj, tmp_path / "out", label="first")
    db = tmp_path / "out" / "msq.duckdb"
    assert count(db) == 1
    row = history.query(db, "SELECT label, rank, step, mode, framework, fuzzy, stack, compat, "
                            "n_rows, n_red, suspect, msq_version, npu_path FROM compares")
    assert row.rows == [("first", 0, 0, "statistics", "pytorch", False, False, None, 13, 1,
                         "Functional.linear.1.forward.output.0", msq.__version__,
                         str((tmp_path / "npu/step0/rank0/dump.json").absolute()))]
    monkeypatch.setenv("MSQ_DB", str(tmp_path / "env.duckdb"))
    run_api(cj, tmp_path / "out")
    assert count(tmp_path / "env.duckdb") == 1 and count(db) == 1
    run_api(cj, tmp_path / "out", record=False)
    assert count(tmp_path / "env.duckdb") == 1


def test_no_history_flag_writes_no_database(tmp_path: Path) -> None:
    cj = single_card(tmp_path)
    result = CliRunner().invoke(main, ["compare", str(cj), "-o", str(tmp_path / "out"),
                                       "--format", "csv", "--no-history"], env={"MSQ_DB": None})
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "out" / "msq.duckdb").exists()


def test_rank_and_step_come_from_the_dump_path() -> None:
    assert history.parse_rank_step(Path("/d/step3/rank12/dump.json")) == (12, 3)
    assert history.parse_rank_step(Path("/d/step0/rank/dump.json")) == (None, 0)
    assert history.parse_rank_step(Path("/d/step0/dump.json")) == (None, None)
    assert history.parse_rank_step(Path("/d/run/rank1/dump.json")) == (1, None)
    assert history.parse_rank_step(Path("dump.json")) == (None, None)


def test_a_failed_write_leaves_the_database_unchanged(made: tuple[Path, Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cj, db = made
    real = recorder.prepare_rows
    # the compares row goes in first; a row INSERT that fails must take it back out
    monkeypatch.setattr(recorder, "prepare_rows",
                        lambda con, mode, **kw: real(con, mode, **kw)
                        + "\nWHERE error('disk on fire')")
    with pytest.raises(HistoryError, match="history was left unchanged"):
        run_api(cj, tmp_path / "out", db=db)
    assert count(db) == 1 and count(db, "SELECT count(*) FROM result_rows") == 13


def test_blame_computed_after_the_history_is_prepared_is_recorded(
        made: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder opens its transaction, checks the schema and loads the views while blame is
    still computed; blame's tables, created only afterwards, are recorded all the same (the
    transaction begins in the compare's database when it first reads it, after blame)."""
    cj, db = made
    prepared = threading.Event()
    real_load, real_blame = schema.load_views, blame_run.blame_compare

    def load_views(con: Any) -> None:
        real_load(con)
        prepared.set()

    def late_blame(*args: Any, **kwargs: Any) -> Any:
        assert prepared.wait(20), "the history was not prepared while blame was computed"
        return real_blame(*args, **kwargs)

    monkeypatch.setattr(schema, "load_views", load_views)
    monkeypatch.setattr(blame_run, "blame_compare", late_blame)
    run_api(cj, tmp_path / "out", db=db)
    per_compare = "SELECT count(*) FROM {} WHERE compare_id = {}"
    for table in ("blame_rows", "blame_edges"):
        assert count(db, per_compare.format(table, 2)) == count(db, per_compare.format(table, 1))
    assert count(db, per_compare.format("blame_rows", 2)) > 0


def test_result_rows_go_in_while_blame_is_computed(
        made: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the result exists its rows are inserted, while blame may still run; blame's tables,
    which that transaction does not see (they came after its first read of the compare), are
    read through another connection: every blame row and edge is recorded all the same."""
    cj, db = made
    inserting = threading.Event()

    class Signal(str):
        def format(self, *args: Any, **kwargs: Any) -> str:
            inserting.set()
            return str(self).format(*args, **kwargs)

    real_blame = blame_run.blame_compare

    def late_blame(*args: Any, **kwargs: Any) -> Any:
        assert inserting.wait(20), "the result rows waited for blame"
        return real_blame(*args, **kwargs)

    monkeypatch.setattr(recorder, "_NEW_NAMES", Signal(recorder._NEW_NAMES))
    monkeypatch.setattr(blame_run, "blame_compare", late_blame)
    run_api(cj, tmp_path / "out", db=db)
    per_compare = "SELECT * EXCLUDE (compare_id, run_id) FROM blame_rows WHERE compare_id = {}"
    assert count(db, f"SELECT count(*) FROM ({per_compare.format(2)} EXCEPT ALL "
                     f"{per_compare.format(1)})") == 0
    for table in ("blame_rows", "blame_edges", "result_rows"):
        query = f"SELECT count(*) FROM {table} WHERE compare_id = {{}}"
        assert count(db, query.format(2)) == count(db, query.format(1)) > 0


def test_formula_and_other_texts_round_trip(tmp_path: Path) -> None:
    kwargs = {"Functional.pad.0.forward": {
        "input_args": [tensor([2, 2], 0)],
        "input_kwargs": {"mode": {"type": "str", "value": "=HYPERLINK(\"x\")"}},
        "output": [tensor([2, 2], 0)]}}
    cj = single_card(tmp_path / "dumps", extra=kwargs)
    db = tmp_path / "h.duckdb"
    run_api(cj, tmp_path / "out", db=db, stack_mode=True)
    rows = history.query(db, "SELECT npu_name, npu_max, npu_max_text, max_diff, max_diff_text "
                             "FROM result_rows WHERE op_name = 'Functional.pad.0.forward' "
                             "ORDER BY out_seq").rows
    assert rows == [("Functional.pad.0.forward.input.0", 2.0, None, 0.0, None),
                    ("Functional.pad.0.forward.input.mode.0", None, '=HYPERLINK("x")', None,
                     "None"),
                    ("Functional.pad.0.forward.output.0", 2.0, None, 0.0, None)]


def test_two_msq_processes_record_into_one_database(tmp_path: Path) -> None:
    cj = single_card(tmp_path / "dumps")
    db = tmp_path / "shared.duckdb"
    procs = [subprocess.Popen(
        [sys.executable, "-m", "msq.cli", "compare", str(cj), "-o", str(tmp_path / f"out{i}"),
         "--db", str(db), "--label", f"p{i}", "--format", "csv", "-c"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert history.query(db, "SELECT label, n_rows FROM compares ORDER BY label").rows == [
        ("p1", 13), ("p2", 13)]
    assert count(db, "SELECT count(*) FROM result_rows") == 26


@pytest.mark.parametrize("overlap", [True, False])
def test_the_history_file_is_held_during_the_outputs_only_for_compares_that_are_not_huge(
        made: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        overlap: bool) -> None:
    """The rows are inserted while the workbook is written, holding the file; above
    OVERLAP_MAX_ROWS rows (a workbook that takes long) the file is taken only afterwards, so
    that another process waiting for it is not kept waiting for this one's outputs."""
    cj, db = made
    if not overlap:
        monkeypatch.setattr(recorder, "OVERLAP_MAX_ROWS", 0)
    rows_in = threading.Event()
    real_wait = history.Recorder._wait_for_row

    def wait_for_row(self: history.Recorder) -> dict[str, Any]:
        rows_in.set()
        return real_wait(self)

    held: list[bool] = []
    real_write = outputs.write_table

    def write_table(*args: Any, **kwargs: Any) -> None:  # run_api writes the CSV only
        if overlap:
            assert rows_in.wait(30), "the rows were not inserted alongside the outputs"
        held.append(locked_by_another_process(db))
        real_write(*args, **kwargs)

    monkeypatch.setattr(history.Recorder, "_wait_for_row", wait_for_row)
    monkeypatch.setattr(outputs, "write_table", write_table)
    run_api(cj, tmp_path / "out", db=db)
    assert held == [overlap]
    assert count(db) == 2 and rows_in.is_set()


def test_names_go_in_before_the_compare_is_read_while_blame_ends(
        made: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the result exists while blame still runs, the names go in first, read through the
    side connection, so that the record's transaction reads the compare's database only after
    them (and then sees blame's tables, if blame has ended): every row is recorded as in a
    compare recorded the plain way."""
    cj, db = made
    streamed = threading.Event()
    real_names, real_nesting = recorder.Recorder._insert_names_streamed, blame_compute.load_nesting

    def names(self: recorder.Recorder) -> None:
        real_names(self)
        streamed.set()

    def held_nesting(*args: Any, **kwargs: Any) -> Any:
        # blame has begun (its parameters are in) and waits for the names
        assert streamed.wait(20), "the names were not read while blame ran"
        return real_nesting(*args, **kwargs)

    monkeypatch.setattr(recorder.Recorder, "_insert_names_streamed", names)
    monkeypatch.setattr(blame_compute, "load_nesting", held_nesting)
    run_api(cj, tmp_path / "out", db=db)
    assert streamed.is_set()
    for table, exclude in (("result_rows", "compare_id"), ("blame_rows", "compare_id, run_id"),
                           ("blame_edges", "compare_id")):
        rows = f"SELECT * EXCLUDE ({exclude}) FROM {table} WHERE compare_id = {{}}"
        assert count(db, f"SELECT count(*) FROM ({rows.format(2)} EXCEPT ALL "
                         f"{rows.format(1)})") == 0
        query = f"SELECT count(*) FROM {table} WHERE compare_id = {{}}"
        assert count(db, query.format(2)) == count(db, query.format(1)) > 0


def test_blame_rows_read_directly_when_blame_ends_while_the_names_go_in(
        made: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The record's transaction first reads the compare's database (and takes its snapshot
    there) only after the names: blame's tables, complete by then, are read directly, not
    streamed through the side connection (a USE of the compare's database before the names took
    the snapshot early: streamed in 7 of 8 runs of stat)."""
    cj, db = made
    pending_seen = threading.Event()
    real_pending = recorder.Recorder._blame_pending
    real_names, real_nesting = recorder.Recorder._insert_names_streamed, blame_compute.load_nesting

    def pending(self: recorder.Recorder) -> bool:
        found = real_pending(self)
        if found:
            pending_seen.set()
        return found

    def held_nesting(*args: Any, **kwargs: Any) -> Any:
        # blame has begun (its parameters are in): it goes on once the recorder has seen it run
        assert pending_seen.wait(20), "the recorder did not see blame running"
        return real_nesting(*args, **kwargs)

    def names(self: recorder.Recorder) -> None:
        real_names(self)
        assert self._tables.wait(20), "blame's tables did not come"  # blame ends meanwhile

    monkeypatch.setattr(recorder.Recorder, "_blame_pending", pending)
    monkeypatch.setattr(recorder.Recorder, "_insert_names_streamed", names)
    monkeypatch.setattr(blame_compute, "load_nesting", held_nesting)
    with caplog.at_level(logging.DEBUG, logger="msq"):
        run_api(cj, tmp_path / "out", db=db)
    assert pending_seen.is_set()
    assert "history: blame rows" in caplog.text
    assert "blame streamed" not in caplog.text
    rows = "SELECT * EXCLUDE (compare_id, run_id) FROM blame_rows WHERE compare_id = {}"
    assert count(db, f"SELECT count(*) FROM ({rows.format(2)} EXCEPT ALL {rows.format(1)})") == 0
    assert count(db, "SELECT count(*) FROM blame_rows WHERE compare_id = 2") == \
        count(db, "SELECT count(*) FROM blame_rows WHERE compare_id = 1") > 0


@pytest.mark.parametrize("text", ["12.5%", "0.0%", "-0.0%", "inf%", "-inf%", "nan%", "1e-05%",
                                  "12.5%%", "%", "%%", "", " ", "N/A", "1%2%", "é%", "ü1.5%",
                                  "a\u0301%", "\U0001d7d8%", " 3%", "3 %", "5", None])
def test_a_relative_error_reads_as_its_text_without_the_percent_signs(text: str | None) -> None:
    """hist_pct is the number of rtrim(text, '%'), whatever the text (it strips a single '%'
    by substr, which is faster)."""
    con = msq_db.connect()
    msq_db.run_schema(con, "history/record/macros")
    got, want, text_cell = con.execute(
        "SELECT hist_pct($1), TRY_CAST(rtrim($1, '%') AS DOUBLE), hist_pct_text($1)",
        [text]).fetchone()
    assert got == want or (math.isnan(got) and math.isnan(want)) if want is not None \
        else got is None
    assert text is None or (text_cell is None) == (got is not None)
    assert con.execute("SELECT hist_pct($1) IS NOT DISTINCT FROM "
                       "TRY_CAST(rtrim($1, '%') AS DOUBLE)", [text]).fetchone()[0]


@pytest.mark.parametrize("code", [None, -1.0, -2.0, -3.0, -4.0, -0.5, -0.0, 0.0, 1.5, 1e308,
                                  "inf", "-inf", "nan", "-nan"])
def test_a_coded_relative_error_is_its_number_and_text_case_by_case(code: Any) -> None:
    """hist_code_pct and hist_code_pct_text of stat_rows' code of a relative error: -3 the
    number 0.0, a number (NaN too, as the one 'nan') itself, -1 the text 'N/A', -2 ' ', any
    other negative number neither (the macros test x >= 0 first: bench/README, "Session 27:
    hand")."""
    con = msq_db.connect()
    msq_db.run_schema(con, "history/record/macros")
    x = float(code) if code is not None else None
    number, text, is_nan = con.execute(
        "SELECT hist_code_pct($1::DOUBLE), hist_code_pct_text($1::DOUBLE), "
        "isnan(hist_code_pct($1::DOUBLE))", [x]).fetchone()
    if x is None or (x < 0 and x not in (-3.0,)) or x == float("-inf"):
        want = None
    elif x == -3.0:
        want = 0.0
    else:
        want = x
    if want is not None and math.isnan(want):
        assert is_nan and number is not None
    else:
        assert number == want and (number is None or math.copysign(1, number)
                                   == math.copysign(1, want))
    assert text == {-1.0: "N/A", -2.0: " "}.get(x)


def test_a_small_compare_is_recorded_in_smaller_row_groups_that_read_alike(tmp_path: Path
                                                                          ) -> None:
    """recorder.row_group_rows: a compare of up to ROW_GROUP_ROWS rows is written in row groups
    of SMALL_ROW_GROUP_ROWS (its full ones are compressed during the inserts, not at the COMMIT
    after the outputs), a larger one as before. Records of both sizes appended in turn to one
    history table read exactly as if one size had been used."""
    assert recorder.row_group_rows(1) == recorder.SMALL_ROW_GROUP_ROWS
    assert recorder.row_group_rows(recorder.ROW_GROUP_ROWS) == recorder.SMALL_ROW_GROUP_ROWS
    assert recorder.row_group_rows(recorder.ROW_GROUP_ROWS + 1) == recorder.ROW_GROUP_ROWS
    sizes = [(recorder.ROW_GROUP_ROWS, 100_000), (recorder.SMALL_ROW_GROUP_ROWS, 15_000),
             (recorder.ROW_GROUP_ROWS, 15_000), (recorder.SMALL_ROW_GROUP_ROWS, 20_001)]
    got = []
    for mixed in (True, False):
        path = tmp_path / f"h{mixed}.duckdb"
        con = msq_db.connect(threads=1)
        con.execute("SET write_buffer_row_group_count = 1")
        start = 0
        for group, n in sizes:
            con.execute(f"ATTACH '{path}' AS h (ROW_GROUP_SIZE "
                        f"{group if mixed else recorder.ROW_GROUP_ROWS})")
            con.execute("CREATE TABLE IF NOT EXISTS h.t (i BIGINT, s VARCHAR, x DOUBLE)")
            con.execute("BEGIN")
            con.execute(f"INSERT INTO h.t SELECT i, 'op.' || (i % 977), i / 7 "
                        f"FROM range({start}, {start + n}) r(i)")
            con.execute("COMMIT")
            con.execute("CHECKPOINT h")
            con.execute("DETACH h")
            start += n
        con.execute(f"ATTACH '{path}' AS h (READ_ONLY)")
        got.append(con.execute("SELECT * FROM h.t").fetchall())
        con.close()
    assert got[0] == got[1] and len(got[0]) == sum(n for _, n in sizes)


#: Statistics of every kind the readers give (i, f, b, s, o, n), finite and not, zero of both
#: signs, texts that read as non-finite numbers (with a TAB too), for the typed-columns test.
_STAT_VALUES: list[Any] = [1.5, 0.0, -0.0, 3, 0, 2 ** 70, True, False, None, "inf", "-inf",
                           "nan", "in\tf", "abc", float("nan"), float("inf"), float("-inf"),
                           1e-300, 1e300, -2.5]
# the columns as hist_rows_statistics wrote them up to session 15: from the displayed cells
_TYPED_FROM_CELLS = {
    **{f"{col}{suffix}": f'hist_{kind}("{cell}")'
       for cell, col in (("Max diff", "max_diff"), ("Min diff", "min_diff"),
                         ("Mean diff", "mean_diff"), ("L2norm diff", "norm_diff"),
                         ("NPU max", "npu_max"), ("NPU min", "npu_min"), ("NPU mean", "npu_mean"),
                         ("NPU l2norm", "npu_norm"), ("Bench max", "bench_max"),
                         ("Bench min", "bench_min"), ("Bench mean", "bench_mean"),
                         ("Bench l2norm", "bench_norm"))
       for suffix, kind in (("", "num"), ("_text", "text"))},
    **{f"{col}{suffix}": f'hist_{kind}("{cell}")'
       for cell, col in (("MaxRelativeErr", "max_rel_pct"), ("MinRelativeErr", "min_rel_pct"),
                         ("MeanRelativeErr", "mean_rel_pct"), ("NormRelativeErr", "norm_rel_pct"))
       for suffix, kind in (("", "pct"), ("_text", "pct_text"))},
}


#: result_rows' metric columns in their order (the 21 texts' order in result_data.texts)
_V4_COLUMNS = [f"{m}{t}" for m in (
    "max_diff", "min_diff", "mean_diff", "norm_diff", "max_rel_pct", "min_rel_pct", "mean_rel_pct",
    "norm_rel_pct", "cosine", "max_abs_err", "max_rel_err", "one_thousandth_err_ratio",
    "five_thousandths_err_ratio", "npu_max", "npu_min", "npu_mean", "npu_norm", "bench_max",
    "bench_min", "bench_mean", "bench_norm") for t in ("", "_text")]


def _stat_arg(mx: Any, mn: Any, mean: Any, norm: Any) -> dict[str, Any]:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2],
            "Max": mx, "Min": mn, "Mean": mean, "Norm": norm, "requires_grad": False}


@pytest.mark.parametrize("compat", [False, True], ids=["default", "compat"])
@pytest.mark.parametrize("c_reader", [True, False], ids=["C reader", "Python reader"])
def test_typed_statistics_columns_are_what_the_displayed_cells_read_as(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compat: bool, c_reader: bool) -> None:
    """hist_rows_statistics reads each cell's text once, from the cells' plain columns
    (stat_result's in the default mode, result_statistics' cells taken apart under --compat),
    and the relative errors from stat_result's numbers of them (default) or from the statistics'
    numbers (--compat): every typed column (and its NaN, to the bit) is what hist_num,
    hist_text, hist_pct and hist_pct_text read from the workbook's cells (result_statistics),
    for every pair of statistic kinds, on matched, NPU-only and bench-only rows; each row's op
    (hist_row_ops) is its NPU row's, else its bench row's."""
    import json
    import struct

    from msq import pipeline
    from msq.config import options_from_kwargs, parse_compare_json

    if not c_reader:
        monkeypatch.setenv("MSQ_NO_C_READER", "1")
    docs: dict[str, dict[str, Any]] = {"npu": {}, "bench": {}}
    values = _STAT_VALUES
    for i, a in enumerate(values):
        for j, b in enumerate(values):
            # the other statistics shifted, so that every column sees every pair
            k, m = (i + 3) % len(values), (j + 7) % len(values)
            docs["npu"][f"Functional.op{i}_{j}.0.forward"] = {
                "input_args": [_stat_arg(a, values[k], values[m], b)], "output": []}
            docs["bench"][f"Functional.op{i}_{j}.0.forward"] = {
                "input_args": [_stat_arg(b, values[m], values[k], a)], "output": []}
    two = [_stat_arg(1.0, 0.0, 0.5, 2.0), _stat_arg(float("nan"), "x", None, 3)]
    docs["npu"]["Functional.npu_alone.0.forward"] = {"input_args": two, "output": []}
    docs["bench"]["Functional.bench_alone.0.forward"] = {"input_args": two, "output": []}
    paths = {}
    for side, data in docs.items():
        paths[side] = tmp_path / side / "dump.json"
        paths[side].parent.mkdir()
        paths[side].write_text(json.dumps({"task": "statistics", "level": "L1",
                                           "dump_data_dir": None, "data": data}))
    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(paths["npu"]), "bench_path": str(paths["bench"])}))
    kwargs: dict[str, Any] = {"record": False, **({"compat": "msprobe-1.1"} if compat else {})}
    opts = options_from_kwargs(False, False, False, kwargs)
    con, mode, _, _ = pipeline.compute(parse_compare_json(cfg), opts, tmp_path / "out", "", None)
    try:
        assert mode == "statistics"
        kinds = {k for (k,) in con.execute("SELECT DISTINCT kind FROM compare_rows").fetchall()}
        # (msprobe 1.1 shows no bench-only row)
        assert kinds == ({"matched", "npu_only"} if compat else
                         {"matched", "npu_only", "bench_only"})
        stat_kinds = {k for (k,) in con.execute("SELECT DISTINCT max_kind FROM tensors").fetchall()}
        assert stat_kinds == {"i", "f", "b", "s", "n"}
        rows_sql = recorder.prepare_rows(con, mode)
        # each row's op (hist_row_ops: one tensors row a row) is the NPU op's, else the bench
        # op's, as both sides joined give it
        both = con.execute(
            "SELECT r.out_seq, coalesce(no.op_name, bo.op_name) FROM compare_rows r "
            "LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row "
            "LEFT JOIN ops no ON no.side = 'npu' AND no.op_seq = n.op_seq "
            "LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row "
            "LEFT JOIN ops bo ON bo.side = 'bench' AND bo.op_seq = b.op_seq "
            "ORDER BY r.out_seq").fetchall()
        assert con.execute("SELECT out_seq, op_name FROM hist_row_ops "
                           "ORDER BY out_seq").fetchall() == both
        assert all(name is not None for _, name in both)
        # the texts go into result_data's list texts (schema version 5), which result_rows reads
        order = [c for c in _V4_COLUMNS if c.endswith("_text")]
        typed = ", ".join(f"texts[{order.index(c) + 1}]" if c.endswith("_text") else c
                          for c in _TYPED_FROM_CELLS)
        got = con.execute(f"SELECT out_seq, {typed} FROM ({rows_sql}) ORDER BY out_seq").fetchall()
        want = con.execute(f"SELECT out_seq, {', '.join(_TYPED_FROM_CELLS.values())} "
                           "FROM result_statistics ORDER BY out_seq").fetchall()
        # a row's list is NULL exactly where every member is (the SQL tests has_cell_text and
        # the relative errors' texts, not the members): the members are compared above; here
        # no list of NULLs alone, on rows with a cell's text, a relative error's text alone, and
        # neither
        lists = con.execute(
            f"SELECT h.has_cell_text, texts IS NULL, list_aggregate(texts, 'count') = 0, count(*) "
            f"FROM ({rows_sql}) JOIN hist_result h USING (out_seq) GROUP BY ALL").fetchall()
        assert not [g for g in lists if g[2]]
        assert {(has, none) for has, none, _, _ in lists} == {(True, False), (False, False),
                                                              (False, True)}
    finally:
        con.close()

    def bits(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(struct.pack("<d", v) if isinstance(v, float) else v for v in row)

    assert len(got) == len(want) > len(values) ** 2
    assert [bits(r) for r in got] == [bits(r) for r in want]
