"""A batch's history rows (msq.pair_tables._batch_result_rows): one SELECT over the batch's rows,
cut into each pair's by out_seq range (msq.pair_tables.split_rows). That each pair's rows are
those of its own compare is tests/test_batch.py's first test; here the cut itself."""

from __future__ import annotations

import pyarrow as pa
import pytest

from msq import pair_tables
from msq.pair_tables import split_rows


def rows(seqs: list[int], kind: pa.DataType | None = None) -> pa.Table:
    return pa.table({"out_seq": pa.array(seqs, kind or pa.int64()),
                     "name": [f"r{s}" for s in seqs],
                     "texts": pa.array([[str(s)] if s % 2 else None for s in seqs],
                                       pa.list_(pa.string()))})


@pytest.mark.parametrize("runs", [64, 0])  # put together from slices; taken
@pytest.mark.parametrize("kind", [pa.int64(), pa.int32()])
def test_each_range_its_rows_in_their_order_numbered_from_its_first(kind, runs, monkeypatch):
    monkeypatch.setattr(pair_tables, "_SLICED_RUNS", runs)
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
        assert part.column("name").num_chunks <= 1


def test_a_range_of_one_run_of_rows_is_the_same_rows_as_taken():
    table = rows(list(range(10)))
    (part,) = split_rows(table, [(3, 6)])
    assert part.to_pylist() == [{"out_seq": s - 3, "name": f"r{s}",
                                 "texts": [str(s)] if s % 2 else None} for s in range(3, 7)]
