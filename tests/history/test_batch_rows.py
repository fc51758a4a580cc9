"""A batch's history rows (msq.pair_tables._batch_history_rows): one SELECT a history table over
the batch's rows, cut into each pair's by out_seq range or pair number and numbered as its own
(msq.pair_tables.split_rows). That each pair's rows (result rows, blame rows and edges) are those
of its own compare is tests/test_batch.py's first test; here the cut itself."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from msq import pair_tables
from msq.pair_tables import split_rows


def rows(seqs: list[int], kind: pa.DataType | None = None) -> pa.Table:
    return pa.table({"out_seq": pa.array(seqs, kind or pa.int64()),
                     "name": [f"r{s}" for s in seqs],
                     "texts": pa.array([[str(s)] if s % 2 else None for s in seqs],
                                       pa.list_(pa.string()))})


@pytest.mark.parametrize(("runs", "chunked"), [(64, 4), (64, 0), (0, 4)])  # put together
# from slices: left as chunks, copied into one; taken
@pytest.mark.parametrize("kind", [pa.int64(), pa.int32()])
def test_each_range_its_rows_in_their_order_numbered_from_its_first(kind, runs, chunked,
                                                                     monkeypatch):
    monkeypatch.setattr(pair_tables, "_SLICED_RUNS", runs)
    monkeypatch.setattr(pair_tables, "_CHUNKED_RUNS", chunked)
    # as a join gives them: each pair's rows in runs, some of every pair last, out of order
    table = pa.concat_tables([rows([0, 1, 5, 3, 6, 7], kind), rows([2, 8, 4], kind)])
    got = split_rows(table, [(0, 2), (3, 5), (6, 8), (0, -1)])
    assert [part.column("out_seq").to_pylist() for part in got] == [[0, 1, 2], [2, 0, 1],
                                                                     [0, 1, 2], []]
    assert [part.column("name").to_pylist() for part in got] == [
        ["r0", "r1", "r2"], ["r5", "r3", "r4"], ["r6", "r7", "r8"], []]
    assert got[1].column("texts").to_pylist() == [["5"], ["3"], None]
    for part in got:
        assert part.schema == table.schema
    # a part of a few runs is its slices, not copied into one chunk (more runs: one chunk)
    assert [part.column("name").num_chunks for part in got] == (
        [2, 2, 2, 1] if runs and chunked else [1, 1, 1, 1])


def reference_cut(table: pa.Table, ranges: list[tuple[int, int]]) -> list[list[dict[str, Any]]]:
    """Each range's rows, in their order, out_seq numbered from the range's first (the rule
    split_rows keeps, written out)."""
    out = []
    for lo, hi in ranges:
        out.append([{**row, "out_seq": row["out_seq"] - lo} for row in table.to_pylist()
                    if lo <= row["out_seq"] <= hi])
    return out


@pytest.mark.parametrize("ranges", [
    [(0, 9), (10, 19), (20, 29), (30, 39)],  # a batch's pairs: in order, apart
    [(10, 19), (0, 9), (30, 39)],  # out of order
    [(0, 15), (10, 25), (5, 5), (40, 30)],  # overlapping, one empty
    [(3, 7), (12, 12), (50, 60)],  # rows outside every range, a range without rows
    [(5, 9), (20, 24), (10**12, 10**12 + 5)],  # a span too wide for a table: the search
])
@pytest.mark.parametrize("chunked", [4, 0, 1000])
@pytest.mark.parametrize("slack", [65_536, -1_000])  # each row's range by a table; by a search
def test_the_cut_of_rows_in_many_chunks_is_each_ranges_rows(ranges, chunked, slack,
                                                            monkeypatch):
    """A batch's rows come in DuckDB's chunks (a run of one pair's rows may cross from one
    to the next): each range gets its rows wherever they are, whatever the chunks and runs,
    each row's range found in a table of the values' span or by a search among the ranges."""
    import random

    monkeypatch.setattr(pair_tables, "_CHUNKED_RUNS", chunked)
    monkeypatch.setattr(pair_tables, "_DENSE_SLACK", slack)
    order = list(range(40))
    random.Random(4).shuffle(order)
    order = sorted(order[:25]) + order[25:] + [order[0]]  # long runs, then short ones
    table = rows(order)
    table = pa.concat_tables([table.slice(a, b - a) for a, b in
                              ((0, 3), (3, 3), (3, 17), (17, 30), (30, len(order)))])
    got = split_rows(table, ranges)
    assert [part.to_pylist() for part in got] == reference_cut(table, ranges)
    for part in got:
        assert part.schema == table.schema
        assert max(column.num_chunks for column in part.columns) <= max(chunked, 1)


def test_a_part_of_few_runs_is_its_rows_not_a_copy():
    """Rows cut into parts of a few runs are not copied (the batch's rows held twice while
    they are cut): each part's texts are the chunks' own bytes."""
    table = pa.concat_tables([rows(list(range(6))), rows(list(range(6, 12)))])
    got = split_rows(table, [(0, 3), (4, 9), (10, 11)])
    sources = [chunk.buffers()[2].address for chunk in table.column("name").chunks]
    for part in got:
        for chunk in part.column("name").chunks:
            assert chunk.buffers()[2].address in sources


def test_a_range_of_one_run_of_rows_is_the_same_rows_as_taken():
    table = rows(list(range(10)))
    (part,) = split_rows(table, [(3, 6)])
    assert part.to_pylist() == [{"out_seq": s - 3, "name": f"r{s}",
                                 "texts": [str(s)] if s % 2 else None} for s in range(3, 7)]


def test_a_cut_by_another_key_shifts_the_columns_it_is_told_nulls_kept():
    # blame's edges: cut by pair number, their out_seqs (NULL: no output line) less the pair's first
    edges = pa.table({"pair": pa.array([0, 1, 0, 1, 1], pa.int32()),
                      "consumer_seq": pa.array([3, 12, None, 10, 11], pa.int64()),
                      "producer_seq": pa.array([1, None, 2, 10, 10], pa.int64())})
    got = split_rows(edges, [(0, 0), (1, 1), (2, 2)], key="pair",
                     shifts={"consumer_seq": [0, 10, 20], "producer_seq": [0, 10, 20]})
    assert [part.to_pylist() for part in got] == [
        [{"pair": 0, "consumer_seq": 3, "producer_seq": 1},
         {"pair": 0, "consumer_seq": None, "producer_seq": 2}],
        [{"pair": 1, "consumer_seq": 2, "producer_seq": None},
         {"pair": 1, "consumer_seq": 0, "producer_seq": 0},
         {"pair": 1, "consumer_seq": 1, "producer_seq": 0}], []]
    for part in got:
        assert part.schema == edges.schema
    # blame's rows: by out_seq range, out_seq and op_seq (INTEGER, NULL on a bench-only row)
    blame = pa.table({"out_seq": pa.array([5, 6, 7], pa.int64()),
                      "op_seq": pa.array([40, None, 41], pa.int32())})
    (part,) = split_rows(blame, [(5, 7)], shifts={"out_seq": [5], "op_seq": [40]})
    assert part.to_pylist() == [{"out_seq": 0, "op_seq": 0}, {"out_seq": 1, "op_seq": None},
                                {"out_seq": 2, "op_seq": 1}]
    assert part.schema == blame.schema


def test_the_edges_select_says_whose_each_edge_is():
    """_batch_history_rows adds the edge's pair to blame_edges' history SELECT where it begins
    (_EDGES_SELECT): the file must still begin its SELECT so."""
    from msq import db

    body = db.sql_file("history/record/hist_blame_edges.sql").body
    assert body.count(f"\n{pair_tables._EDGES_SELECT}") == 1


#: Two edges of edges_database: of sides neither npu nor bench (odd), or of npu and bench
ODD_SIDES = "('other', 10, 0, 11, 0, 'reshape', 1, 0), (NULL, 11, 0, 10, 0, 'constant', 1, 1)"
EVEN_SIDES = "('npu', 10, 0, 11, 0, 'reshape', 1, 0), ('bench', 20, 0, 21, 0, 'constant', 1, 1)"


def edges_database(odd: bool = True) -> Any:
    """compare_rows and blame_edges as a batch has them, with what the history SELECT of the
    edges must get right: a row with two output lines (the first counts), one whose only line
    has no out_seq, rows with no line, NULL rows, a side neither npu nor bench and a NULL side
    (``odd``; else two edges of npu and bench in their place), each pair's edges apart and out
    of order."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TYPE blame_link AS ENUM ('constant', 'external', 'hash', 'md5', "
                "'reshape', 'statistics')")
    con.execute("CREATE TABLE compare_rows (out_seq BIGINT, npu_row BIGINT, bench_row BIGINT)")
    con.execute("INSERT INTO compare_rows VALUES (0, 10, 20), (1, 11, NULL), (2, NULL, 21), "
                "(5, 12, 22), (3, 12, 23), (4, NULL, NULL), (NULL, 13, 24), (6, 14, 25)")
    con.execute("CREATE TABLE blame_edges (side VARCHAR, consumer_row BIGINT, consumer_op INTEGER,"
                " producer_row BIGINT, producer_op INTEGER, how blame_link, candidates BIGINT, "
                "pair INTEGER)")
    con.execute("""INSERT INTO blame_edges VALUES
        ('npu', 12, 0, 10, 0, 'hash', 1, 1), ('bench', 22, 0, 21, 0, 'statistics', 3, 0),
        ('npu', 13, 0, NULL, NULL, 'external', NULL, 0), ('bench', 23, 0, 99, 0, 'md5', 2, 1),
        """ + (ODD_SIDES if odd else EVEN_SIDES) + """,
        ('npu', 14, 0, 11, 0, 'hash', 1, 0), ('bench', 25, 0, 20, 0, NULL, NULL, 1),
        ('npu', NULL, 0, 14, 0, 'hash', 1, 1), ('bench', 24, 0, 22, 0, 'hash', 1, 0)""")
    return con


@pytest.mark.parametrize("odd", [True, False])
@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("batch_rows", [3, 131_072])
def test_a_batchs_edges_are_the_history_selects_rows(odd, dense, batch_rows, monkeypatch):
    """_batch_edges looks the edges' output lines up in numpy (a table of each side's row
    numbers), not by the SELECT's joins, and gives side and how as dictionaries (side's by the
    history's ENUM); where the numbers are too sparse for that table or a side is neither npu
    nor bench, the SELECT runs (texts): the same rows either way (each edge's pair added), in
    blame_edges' order."""
    from msq import db

    con = edges_database(odd)
    body = db.sql_file("history/record/hist_blame_edges.sql").body
    want = pa.table(db.SelectStream(con, body.replace(
        pair_tables._EDGES_SELECT, f"SELECT e.pair AS {pair_tables._PAIR}, e.side, ", 1)))
    monkeypatch.setattr(db, "ARROW_BATCH_ROWS", batch_rows)  # many chunks
    if not dense:
        monkeypatch.setattr(pair_tables, "_DENSE_SLACK", -1)
    got = pair_tables._batch_edges(con, body, pa.table(db.SelectStream(
        con, pair_tables._BATCH_LINES)))
    coded = dense and not odd
    for name in ("side", "how"):
        assert pa.types.is_dictionary(got.schema.field(name).type) == coded
    if coded:
        assert got.column("side").chunk(0).dictionary.to_pylist() == ["bench", "npu"]
        got = got.cast(want.schema)
    assert got.schema == want.schema
    assert got.column(pair_tables._PAIR).to_pylist() == [1, 0, 0, 1, 0, 1, 0, 1, 1, 0]
    key = [(name, "ascending") for name in got.column_names]
    assert got.sort_by(key).to_pylist() == want.sort_by(key).to_pylist()
    assert got.select(["consumer_seq", "producer_seq"]).to_pylist() == [
        {"consumer_seq": 3, "producer_seq": 0}, {"consumer_seq": 5, "producer_seq": 2},
        {"consumer_seq": None, "producer_seq": None}, {"consumer_seq": 3, "producer_seq": None},
        *([{"consumer_seq": None, "producer_seq": None}] * 2 if odd else
          [{"consumer_seq": 0, "producer_seq": 1}, {"consumer_seq": 0, "producer_seq": 2}]),
        {"consumer_seq": 6, "producer_seq": 1},
        {"consumer_seq": 6, "producer_seq": 0}, {"consumer_seq": None, "producer_seq": 6},
        {"consumer_seq": None, "producer_seq": 5}]


def test_a_batchs_edge_sides_are_the_historys_enum():
    """The sides' dictionary a batch hands over (_EDGE_SIDES) is blame_edges.side's ENUM in a
    new history, value for value and in its order: the driver's INSERT keeps each value."""
    import duckdb

    from msq import db

    con = duckdb.connect()
    db.run_schema(con, "history/schema")
    (values,) = con.execute("SELECT data_type FROM duckdb_columns() WHERE table_name = "
                            "'blame_edges' AND column_name = 'side'").fetchone()
    assert values == "ENUM(" + ", ".join(f"'{v}'" for v in pair_tables._EDGE_SIDES) + ")"


def test_sparse_row_numbers_are_no_table():
    import numpy as np

    low, table = pair_tables._first_lines(np.array([5, 5, 7]), np.array([9, 4, 1]))
    assert low == 5 and table.tolist() == [4, pair_tables._NO_LINE, 1]  # each row's least
    far = np.array([0, 10 * pair_tables._DENSE_SLACK])
    assert pair_tables._first_lines(far, np.array([0, 1])) is None


def ops_database(lines: str, tensors: str, ops: str) -> Any:
    """compare_rows, tensors and ops with the columns hist_row_ops.sql reads (VALUES rows)."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE compare_rows (out_seq BIGINT, npu_row BIGINT, bench_row BIGINT)")
    con.execute("CREATE TABLE tensors (side VARCHAR, row_seq BIGINT, op_seq INTEGER)")
    con.execute("CREATE TABLE ops (side VARCHAR, op_seq INTEGER, op_name VARCHAR)")
    for table, values in (("compare_rows", lines), ("tensors", tensors), ("ops", ops)):
        if values:
            con.execute(f"INSERT INTO {table} VALUES {values}")
    return con


def lines_of(con: Any) -> pa.Table:
    from msq import db

    return pa.table(db.SelectStream(con, pair_tables._BATCH_LINES))


def sql_row_ops(con: Any, seqs: list[int | None]) -> list[str | None]:
    """The op names hist_row_ops.sql gives rows of these out_seqs, joined as the result rows'
    SELECT joins them (hist_source_<mode>.sql: LEFT JOIN hist_row_ops USING (out_seq))."""
    from msq import db

    con.execute(f"CREATE OR REPLACE VIEW hist_row_ops AS "
                f"{db.sql_file('history/record/hist_row_ops.sql').body}")
    con.execute("CREATE OR REPLACE TABLE wanted AS SELECT unnest(?::BIGINT[]) AS out_seq, "
                "generate_subscripts(?::BIGINT[], 1) AS i", [seqs, seqs])
    return [name for name, in con.execute(
        "SELECT o.op_name FROM wanted LEFT JOIN hist_row_ops o USING (out_seq) ORDER BY i"
    ).fetchall()]


@pytest.mark.parametrize("batch_rows", [2, 131_072])
def test_a_batchs_rows_ops_are_the_history_selects(batch_rows, monkeypatch):
    """_batch_row_ops gives each output line the op hist_row_ops.sql joins it: its NPU row's
    op, else its bench row's; NULL where a line, row or op is missing or NULL, and for a row of
    a side neither npu nor bench (though its numbers are an NPU row's)."""
    from msq import db

    monkeypatch.setattr(db, "ARROW_BATCH_ROWS", batch_rows)  # many chunks
    con = ops_database(
        "(10, 0, 0), (11, 1, NULL), (12, NULL, 1), (13, NULL, NULL), (14, 2, 3), (15, 3, 2),"
        " (16, 9, 2), (17, NULL, 4), (NULL, 0, 0), (18, 4, NULL), (20, 5, 5)",
        "('npu', 0, 0), ('bench', 0, 0), ('npu', 1, 1), ('bench', 1, 1), ('npu', 2, 1),"
        " ('bench', 2, 2), ('bench', 3, 0), ('npu', 3, NULL), ('other', 4, 0),"
        " ('bench', 4, 7), (NULL, 5, 0), ('npu', NULL, 0), ('npu', 5, 2)",
        "('npu', 0, 'n0'), ('npu', 1, 'n1'), ('bench', 0, 'b0'), ('bench', 1, 'b1'),"
        " ('bench', 2, NULL), ('other', 2, 'x2'), ('npu', NULL, 'nn'), (NULL, 2, 'z2')")
    seqs = [14, 10, None, 11, 12, 13, 15, 16, 17, 18, 19, 20, 10, -3]
    lookup = pair_tables._batch_row_ops(con, lines_of(con))
    assert lookup is not None
    got = lookup(pa.chunked_array([pa.array(seqs, pa.int64())]))
    want = sql_row_ops(con, seqs)
    assert got.to_pylist() == want
    assert want == ["n1", "n0", None, "n1", "b1", None, None, None, None, None, None, None,
                    "n0", None]
    assert got.type == pa.string()


@pytest.mark.parametrize(("lines", "tensors", "ops"), [
    ("(0, 0, NULL), (0, 1, NULL)", "('npu', 0, 0), ('npu', 1, 0)", "('npu', 0, 'a')"),
    ("(0, 0, NULL)", "('npu', 0, 0), ('npu', 0, 1)", "('npu', 0, 'a'), ('npu', 1, 'b')"),
    ("(0, 0, NULL)", "('npu', 0, 0)", "('npu', 0, 'a'), ('npu', 0, 'b')"),
    ("(0, 0, NULL), (1000000, 1, NULL)", "('npu', 0, 0)", "('npu', 0, 'a')"),
    ("(0, 0, NULL)", "('npu', 0, 0), ('npu', 1000000, 0)", "('npu', 0, 'a')"),
    ("(0, 0, NULL), (1, 1152921504606846976, NULL)", "('npu', 0, 0)", "('npu', 0, 'a')"),
], ids=["line twice", "row twice", "op twice", "sparse lines", "sparse rows", "beyond keys"])
def test_rows_ops_a_join_would_repeat_or_too_sparse_are_the_sqls(lines, tensors, ops,
                                                                 monkeypatch):
    """Where an out_seq, a side's row or op is there twice (the SQL's joins give a row more
    than one op: more rows) or the numbers are too sparse for tables, _batch_row_ops leaves
    them to the SQL."""
    monkeypatch.setattr(pair_tables, "_DENSE_SLACK", 1000)
    con = ops_database(lines, tensors, ops)
    assert pair_tables._batch_row_ops(con, lines_of(con)) is None
    # the same row on both sides, or of another side, is no row twice
    con = ops_database("(0, 0, 0)", "('npu', 0, 0), ('bench', 0, 0), ('x', 0, 0)",
                       "('npu', 0, 'a'), ('bench', 0, 'b'), ('x', 0, 'c')")
    assert pair_tables._batch_row_ops(con, lines_of(con)) is not None


def test_no_rows_no_ops():
    con = ops_database("(0, 0, NULL)", "", "")
    lookup = pair_tables._batch_row_ops(con, lines_of(con))
    assert lookup is not None
    assert lookup(pa.chunked_array([pa.array([0, 1], pa.int64())])).to_pylist() == [None, None]
    con = ops_database("", "", "")
    lookup = pair_tables._batch_row_ops(con, lines_of(con))
    assert lookup is not None
    assert lookup(pa.chunked_array([pa.array([0], pa.int64())])).to_pylist() == [None]


def test_a_sides_columns_are_nulled_as_their_case_nulls_them():
    """A batch's result rows select each side's name, dtype and shape as they are and NULL them
    where the recorder's CASE does (a row of the other side alone, or of no kind), by their
    validity bitmaps (msq.pair_tables._unsided, _sided): the same rows as the CASEs give, in
    DuckDB's chunks, whatever the kinds (a kind of the other side's length that is not it)
    and NULLs."""
    import duckdb

    from msq import db

    con = duckdb.connect()
    con.execute("""
      CREATE TABLE r AS SELECT range AS out_seq,
        CASE range % 10 WHEN 0 THEN 'npu_only' WHEN 1 THEN 'bench_only' WHEN 2 THEN NULL
                        WHEN 3 THEN 'npu_onlX' WHEN 4 THEN 'bench_onlX' ELSE 'matched' END AS kind,
        CASE WHEN range % 7 <> 0 THEN 'npu' || range END AS "NPU Name",
        CASE WHEN range % 11 <> 0 THEN 'bench' || range END AS "Bench Name",
        'f' || (range % 3) AS "NPU Dtype", CASE WHEN range % 2 = 0 THEN 'g' END AS "Bench Dtype",
        '[' || range || ']' AS "NPU Tensor Shape", '[]' AS "Bench Tensor Shape"
      FROM range(5000)""")
    body = db.sql_file("history/record/hist_rows_statistics.sql").body
    cases = [line.strip().rstrip(",") for line in body.splitlines() if "CASE WHEN kind <>" in line]
    assert len(cases) == 6
    select = f"SELECT out_seq, kind, {', '.join(cases)} FROM r"
    unsided, sided = pair_tables._unsided(select)
    assert len(sided) == 6 and "CASE" not in unsided
    # in chunks as DuckDB's stream gives them (each its own buffers), and a slice of one (an
    # offset into its buffers: nulled by a copy)
    parts = [pa.table(db.SelectStream(con, f"{unsided} WHERE out_seq BETWEEN {lo} AND {hi}"))
             for lo, hi in ((0, 1999), (2000, 3499), (3500, 4999))]
    chunks = pa.concat_tables([parts[0], parts[1], parts[2].slice(7)])
    got = pair_tables._sided(chunks, sided)
    assert got.column("npu_name").num_chunks == 3
    assert got.to_pylist() == con.sql(f"{select} WHERE out_seq NOT BETWEEN 3500 AND 3506"
                                      ).to_arrow_table().to_pylist()
    # a SELECT without those CASEs is left as it is
    assert pair_tables._unsided("SELECT 1 AS npu_name") == ("SELECT 1 AS npu_name", [])


def test_a_sides_columns_are_nulled_alike_by_a_kind_sent_as_an_enum():
    """A batch's kinds come as an ENUM (a dictionary: msq.pair_tables.CODED_HISTORY): each
    side's columns are NULLed by the kind's codes as by its texts (a NULL kind, chunks, an
    offset slice, a dictionary without the other side's kind)."""
    kinds = ["npu_only", "bench_only", None, "matched", "matched", "npu_only", "matched"] * 300
    names = [f"n{i}" if i % 5 else None for i in range(len(kinds))]
    plain = pa.table({"kind": kinds, "npu_name": names, "bench_name": names})
    coded = plain.set_column(0, "kind", pa.array(kinds).dictionary_encode())
    sided = ["npu_name", "bench_name"]
    for a, b in ((plain, coded), (plain.slice(5), coded.slice(5)),
                 (pa.concat_tables([plain.slice(0, 700), plain.slice(700)]),
                  pa.concat_tables([coded.slice(0, 700), coded.slice(700)]))):
        want = pair_tables._sided(a, sided)
        got = pair_tables._sided(b, sided)
        assert got.drop_columns(["kind"]).equals(want.drop_columns(["kind"]))
        assert 0 < want.column("npu_name").null_count != want.column("bench_name").null_count
    matched = pa.array(["matched", None, "matched"]).dictionary_encode()
    assert pair_tables._kept(matched, "npu_only").tolist() == [True, False, True]


def test_a_rows_bench_side_is_sent_only_where_it_differs_from_its_npu_side():
    """A pool worker sends a result row's bench name and shape NULL, their bytes not sent, where
    both equal the row's NPU name and shape (msq.pair_tables.bench_once; recorder.BENCH_TWINS),
    and says so in BENCH_SAME; a row whose sides differ in either, or where one is NULL, is sent
    as it is, and its dtypes always. Chunk by chunk, a slice of one included."""
    import pyarrow.compute as pc

    from msq.history.recorder import BENCH_SAME

    n = 3000
    npu = [f"Functional.op.{i}.forward.output.0" if i % 13 else None for i in range(n)]
    bench = [None if i % 17 == 0 else f"other.{i}" if i % 5 == 0 else npu[i] for i in range(n)]
    dtype = ["torch.float32"] * n
    shape = [f"[{i % 9}, 4]" for i in range(n)]
    table = pa.table({
        "out_seq": pa.array(range(n), pa.int64()), "npu_name": npu, "bench_name": bench,
        "npu_dtype": dtype, "bench_dtype": ["torch.int8" if i % 7 == 0 else d
                                            for i, d in enumerate(dtype)],
        "npu_shape": shape, "bench_shape": ["[]" if i % 11 == 0 else s
                                            for i, s in enumerate(shape)]})
    table = pa.concat_tables([table.slice(0, 1000), table.slice(1000, 1500),
                              table.slice(2500)])  # three chunks, the last an offset slice
    sent = pair_tables.bench_once(table)
    same = [b == a and bs == as_ and a is not None
            for a, b, as_, bs in zip(npu, bench, shape, table.column("bench_shape").to_pylist())]
    assert 0 < sum(same) < n
    assert sent.column(BENCH_SAME).to_pylist() == same
    for column in ("bench_name", "bench_shape"):
        want = [None if s else v for s, v in zip(same, table.column(column).to_pylist())]
        assert sent.column(column).to_pylist() == want
        assert sent.column(column).num_chunks == 3
        # the rows sent NULL have no bytes: each chunk's data its kept rows' alone
        for chunk in sent.column(column).chunks:
            kept = pc.sum(pc.binary_length(chunk)).as_py() or 0
            assert kept <= len(chunk.buffers()[2]) <= kept + 64
    assert sent.drop_columns(["bench_name", "bench_shape", BENCH_SAME]).equals(
        table.drop_columns(["bench_name", "bench_shape"]))
    # sent once only; rows without the six columns as they are
    assert pair_tables.bench_once(sent) is sent
    assert pair_tables.bench_once(table.drop_columns(["bench_shape"])).column_names == \
        [c for c in table.column_names if c != "bench_shape"]


@pytest.mark.parametrize("order", ["runs", "scattered"])
def test_blame_names_are_left_out_where_every_row_has_its_output_rows(order):
    """A pair's blame rows go without their names where every row's are those of its output
    row (msq.pair_tables.blame_names_once), told by runs of rows in chunks of each table (a
    sliced one included), their NULLs, lengths and bytes compared, or row by row where they
    come in too many runs: one name changed, one NULL more, or a name of another length keeps
    them."""
    import numpy as np

    from msq.history.recorder import BLAME_NAMES

    n = 5000
    ops = [f"Functional.op.{i // 3}.forward" for i in range(n)]
    npus = [None if i % 97 == 0 else f"Functional.op.{i // 3}.forward.output.{i % 3}"
            for i in range(n)]
    seqs = np.arange(n)
    if order == "runs":  # the output rows' last ones first, blame's in order
        seqs = np.concatenate([seqs[4000:], seqs[:4000]])
    else:
        seqs = np.random.default_rng(1).permutation(n)
    result = pa.table({"out_seq": pa.array(seqs, pa.int64()),
                       "op_name": [ops[s] for s in seqs], "npu_name": [npus[s] for s in seqs],
                       "kind": ["matched"] * n})
    result = pa.concat_tables([result.slice(0, 1200), result.slice(1200, 2500),
                               result.slice(3700)])
    keep = [s for s in range(n) if s % 1000 != 7]  # output rows without a blame row
    blame = pa.table({"out_seq": pa.array(keep, pa.int64()), "op_seq": pa.array(keep),
                      "op_name": [ops[s] for s in keep], "npu_name": [npus[s] for s in keep]})
    blame = pa.concat_tables([blame.slice(0, 3000), blame.slice(3000)])
    sent = pair_tables.blame_names_once(blame, result)
    # thousands of runs: told row by row (a small batch's blame rows), the same
    assert sent.column_names == ["out_seq", "op_seq"]
    at = blame.schema.get_field_index("npu_name")
    for changed in (["x" if i == 4321 else v for i, v in enumerate(blame.column(at).to_pylist())],
                    [None if i == 10 else v for i, v in enumerate(blame.column(at).to_pylist())],
                    [v + "." if i == 4000 and v else v
                     for i, v in enumerate(blame.column(at).to_pylist())]):
        other = blame.set_column(at, "npu_name", pa.array(changed, pa.string()))
        assert pair_tables.blame_names_once(other, result).column_names == blame.column_names
    assert all(c in blame.column_names for c in BLAME_NAMES)
