"""How a local source reads on the console and in the advisor (msq.blame.summary.source_line)."""

from __future__ import annotations

from typing import Any

from msq.blame.summary import source_line


def _source(**fields: Any) -> dict[str, Any]:
    return {"npu_name": "Functional.linear.0.forward.output.0", "out_seq": 3, "role": "output",
            "input_err": 0.001, "output_err": 0.25, "amplification": 250.0, "floor": 1.3e-06,
            "floor_source": "dtype float32", **fields}


def test_an_output_names_its_input_error_output_error_and_amplification() -> None:
    line = source_line(_source(), rank=2)
    assert line == ("rank 2: Functional.linear.0.forward.output.0 (sheet row 5): input error "
                    "0.001 -> output error 0.25 (x250), floor 1.3e-06 (dtype float32)")


def test_an_external_input_says_what_it_is_instead_of_empty_figures() -> None:
    line = source_line(_source(npu_name="Tensor.__add__.0.forward.input.0", out_seq=0,
                               role="external input", input_err=None, amplification=None,
                               output_err=4.77e-05))
    assert line == ("Tensor.__add__.0.forward.input.0 (sheet row 2): external input with error "
                    "4.77e-05, floor 1.3e-06 (dtype float32)")
    assert "-> output error" not in line and "(x-)" not in line


def test_packed_rows_read_back_as_the_rows_given() -> None:
    """A directory compare's pairs hand the driver their summaries packed (PackedRows): every
    way the driver and the run's blame read the rows gives the rows, values and types as given
    (inf, NaN, None, ints, texts), and the packed summary pickles as bytes."""
    import math
    import pickle

    from msq.blame.summary import BlameSummary, PackedRows

    rows = [_source(out_seq=7, op_seq=2, amplification=math.inf),
            _source(out_seq=3, op_seq=1, band=None, output_err=math.nan, reason="ünïcode")]
    packed = PackedRows(rows)
    assert len(packed) == 2 and repr(packed) == repr(rows)  # NaN: equal as any copy is
    assert PackedRows(rows[:1]) == rows[:1] and rows[:1] == PackedRows(rows[:1])
    assert packed[0] == rows[0] and packed[-1]["reason"] == "ünïcode"
    assert packed[:1] == rows[:1] and repr(list(packed)) == repr(rows)
    assert repr([*packed, *PackedRows([])]) == repr(packed + []) == repr([] + packed) == \
        repr(rows)
    assert math.isnan(packed[1]["output_err"]) and packed[0]["amplification"] == math.inf
    assert packed != PackedRows(rows[:1]) and packed != rows[::-1]
    assert type(packed[0]["out_seq"]) is int and packed[1]["band"] is None
    assert packed[0] is not packed[0]  # new dicts on each read: compare rows by out_seq
    summary = BlameSummary(counts={"local": 2}, sources=rows, collectives=rows[1:])
    small = summary.packed()
    assert isinstance(small.sources, PackedRows) and repr(small.sources) == repr(rows)
    assert repr(small.collectives) == repr(rows[1:])
    assert repr(small.first) == repr(summary.first) == repr(rows[1])
    assert repr(small.first_and_worst()) == repr((rows[1], rows[0]))
    assert BlameSummary().first_and_worst() == (None, None)
    assert summary.sources is rows  # packing makes a new summary: the worker's stays as it was
    again = pickle.loads(pickle.dumps(small))
    assert repr(again) == repr(summary)
    assert PackedRows(small.sources)._blob is small.sources._blob  # packed once only
    import pyarrow as pa

    same = [{**row, "band": row.get("band"), "reason": row.get("reason")} for row in rows]
    arrow = BlameSummary(sources=PackedRows.of_table(pa.Table.from_pylist(same)))
    assert repr(arrow.first_and_worst()) == repr((same[1], same[0]))
    assert BlameSummary(sources=PackedRows.of_table(pa.Table.from_pylist(same).slice(0, 0))
                        ).first_and_worst() == (None, None)


def test_packed_rows_of_a_table_read_back_as_its_rows() -> None:
    """A batch's summaries pack their rows as an Arrow table (PackedRows.of_table): read back
    every way (all, one, slices, iteration, pickled) as the table's rows, as dicts of its
    columns; an index out of range raises as a list's; the table itself comes back whole."""
    import math
    import pickle

    import pyarrow as pa
    import pytest

    from msq.blame.summary import PackedRows

    rows = [_source(out_seq=7, op_seq=2, amplification=math.inf, band=1.0, reason="a"),
            _source(out_seq=3, op_seq=1, band=None, output_err=math.nan, reason="ünïcode"),
            _source(out_seq=5, op_seq=1, band=0.5, reason=None)]
    table = pa.Table.from_pylist(rows)
    packed = PackedRows.of_table(table)
    assert len(packed) == 3 and repr(packed) == repr(rows) and repr(list(packed)) == repr(rows)
    back = packed.table()  # (NaN: Table.equals holds it unequal to itself)
    assert back is not None and back.schema == table.schema and back.to_pylist() != rows
    assert repr(back.to_pylist()) == repr(rows)
    assert PackedRows(rows).table() is None
    for index in (0, 1, 2, -1, -3):
        assert repr(packed[index]) == repr(rows[index])
    for cut in (slice(None), slice(1, None), slice(0, 2), slice(None, None, 2),
                slice(None, None, -1), slice(5, 9), slice(-2, None)):
        assert repr(packed[cut]) == repr(rows[cut]), cut
    for index in (3, -4):
        with pytest.raises(IndexError):
            packed[index]
    assert packed[0] is not packed[0] and type(packed[0]["out_seq"]) is int
    again = pickle.loads(pickle.dumps(packed))
    assert isinstance(again, PackedRows) and again.table() is not None
    assert repr(again) == repr(rows) and PackedRows(again)._blob is again._blob
    empty = PackedRows.of_table(table.slice(0, 0))
    assert len(empty) == 0 and list(empty) == [] and empty[:5] == []
    old = PackedRows.__new__(PackedRows)  # a blob pickled before tables (two fields)
    old.__setstate__((pickle.dumps(rows), 3))
    assert old.table() is None and repr(old) == repr(rows)
