"""msq.db.SelectStream: a SELECT's Arrow C stream, the same rows as the relation's."""

from __future__ import annotations

from typing import Any

import duckdb

from msq import db
from msq.flatten import arrow_columns

QUERY = ("SELECT i AS out_seq, i::VARCHAR || 'x' AS name, CASE WHEN i % 3 = 0 THEN NULL "
         "ELSE i / 7 END AS value FROM range(300000) t(i)")


class _RelationOnly:
    """A connection without DuckDB 2's ``_submit``: SelectStream falls back to the relation."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def sql(self, text: str) -> Any:
        return self._con.sql(text)


class _OtherSubmit(_RelationOnly):
    """A connection whose ``_submit`` gives something else (another DuckDB's private API)."""

    def _submit(self, *args: Any) -> object:
        return object()


def test_the_stream_scans_as_the_relation_does() -> None:
    con = duckdb.connect()
    other = duckdb.connect()
    try:
        want = con.execute(f"SELECT * FROM ({QUERY}) ORDER BY out_seq").fetchall()
        for source in (con, _RelationOnly(con), _OtherSubmit(con)):
            other.register("streamed", db.SelectStream(source, QUERY))  # type: ignore[arg-type]
            try:
                got = other.execute("SELECT * FROM streamed ORDER BY out_seq").fetchall()
            finally:
                other.unregister("streamed")
            assert got == want
    finally:
        con.close()
        other.close()


def test_arrow_columns_reads_it_as_the_relation() -> None:
    con = duckdb.connect()
    con.execute("SET threads = 1")  # the rows in one order, both times
    try:
        # no NULL number: the bytes under a NULL are undefined (arrow_columns reads them raw)
        query = QUERY.replace("NULL", "-1.5")
        plain = arrow_columns(con.sql(query))
        if plain is None:  # the C helpers are not built: nothing to compare
            return
        assert arrow_columns(db.SelectStream(con, query)) == plain
        assert plain[0] == 300000
    finally:
        con.close()


def test_arrow_columns_counts_nulls_and_keeps_validity_at_any_offset() -> None:
    """Each column's NULL count and validity bits, read from batches whose arrays start at any
    bit of their buffers (pyarrow's slices) and end anywhere in a byte or a 64-bit word, are
    pyarrow's own; a column without NULLs has no validity."""
    import itertools
    import random

    import pyarrow as pa

    rng = random.Random(15)
    n = 1000
    valid = [rng.random() < 0.7 for _ in range(n)]
    sparse = [rng.random() < 0.02 for _ in range(n)]  # a NULL a word at most, many words none
    table = pa.table({
        "x": pa.array([float(i) if v else None for i, v in enumerate(valid)], pa.float64()),
        "s": pa.array([str(i) if v else None for i, v in enumerate(sparse)], pa.string()),
        "full": pa.array(range(n), pa.int64()),
    })
    for start, stop in ((0, n), (1, n), (7, 993), (63, 64), (64, 200), (3, 4), (130, 130),
                        (5, 517)):
        cuts = sorted({start, stop, *rng.sample(range(start, stop + 1), min(3, stop - start))})
        batches = [b for a, z in itertools.pairwise(cuts) for b in table.slice(a, z - a).to_batches()]
        part = table.slice(start, stop - start)
        got = arrow_columns(pa.RecordBatchReader.from_batches(table.schema, batches))
        if got is None:  # the C helpers are not built
            return
        count, columns = got
        assert count == stop - start
        for name in ("x", "s", "full"):
            want = part.column(name).combine_chunks()
            _kind, nulls, validity, _offsets, _data = columns[name]
            assert nulls == want.null_count, (name, start, stop)
            if want.null_count == 0:
                assert validity is None
            else:
                bits = [bool((validity[i >> 3] >> (i & 7)) & 1) for i in range(count)]
                assert bits == [v is not None for v in want.to_pylist()]


def test_a_stream_of_one_batch_is_read_where_duckdb_wrote_it() -> None:
    """A result of one Arrow batch (its rows fewer than the stream's batch_rows) is read in
    place (memoryviews of DuckDB's buffers, msq/_flatten.c in_place_columns), the same bytes a
    column (validity, offsets, data) and NULL counts as the copy of a stream of several
    batches; the buffers outlive the connection and the other columns."""
    import gc

    query = ("SELECT i AS out_seq, CASE WHEN i % 5 = 0 THEN NULL ELSE 'name ' || i END AS name, "
             "CASE WHEN i % 3 = 0 THEN NULL ELSE i / 7 END AS value, i % 2 = 0 AS even, "
             "(i % 200)::UTINYINT AS mark, '' AS empty FROM range(300000) t(i)")
    con = duckdb.connect()
    con.execute("SET threads = 1")  # the rows in one order, both times
    try:
        copied = arrow_columns(db.SelectStream(con, query, 100_000))
        if copied is None:  # the C helpers are not built: nothing to compare
            return
        in_place = arrow_columns(db.SelectStream(con, query, 1 << 20))
    finally:
        con.close()
    assert in_place is not None
    assert isinstance(copied[1]["name"][4], bytes)  # three batches: one buffer a column, copied
    assert isinstance(in_place[1]["name"][4], memoryview)
    assert copied[0] == in_place[0] == 300000
    for name, (kind, nulls, valid, offsets, values) in in_place[1].items():
        want = copied[1][name]
        assert (kind, nulls) == want[:2], name
        assert (valid is None) == (want[2] is None), name
        for got, expected in ((valid, want[2]), (offsets, want[3])):
            assert got is None or bytes(got) == expected, name
        if kind == "g":  # the bytes under a NULL number are undefined: the others compared
            ok = [i % 3 != 0 for i in range(300000)]
            assert [x for x, v in zip(values.cast("d"), ok) if v] == \
                [x for x, v in zip(memoryview(want[4]).cast("d"), ok) if v]
        else:
            assert bytes(values) == want[4], name
    assert in_place[1]["mark"][1] == 0 and in_place[1]["even"][2] is None
    names = in_place[1]["name"][4]  # held alone: the batch's other buffers let go
    del in_place, valid, offsets, values, got, want
    gc.collect()
    assert bytes(names) == copied[1]["name"][4]
