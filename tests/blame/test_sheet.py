"""Blame's sheet of the workbook reads the local rows of ``blame_rows`` straight (not through
the view ``blame``, which ranks them and joins the ranks back to every row): the same rows,
columns, types and values as the view's local rows give."""

from __future__ import annotations

from pathlib import Path

from msq.blame.export import SHEET_COLUMNS, _sheet_cell, sheet_query
from tests.blame.test_links import s
from tests.blame.util import blame_con
from tests.dumps import fwd, write_dump


def test_the_sheet_has_the_blame_views_local_rows_and_ranks(tmp_path: Path) -> None:
    bench = {"Torch.a.0.forward": fwd(s(1), out=s(2)), "Torch.b.0.forward": fwd(s(2), out=s(4)),
             "Torch.c.0.forward": fwd(s(7), out=s(2)), "Torch.d.0.forward": fwd(s(3), out=s(3)),
             "Torch.e.0.forward": fwd(s(5), out=s(2))}
    # a.0 goes slightly wrong, b.0 amplifies it; c.0 and e.0 go equally wrong from equal inputs
    # (a tie of output_err: op order decides, and an infinite amplification: the text "inf");
    # d.0 is clean
    npu = {"Torch.a.0.forward": fwd(s(1), out=s(2.001)),
           "Torch.b.0.forward": fwd(s(2.001), out=s(400)),
           "Torch.c.0.forward": fwd(s(7), out=s(2.5)), "Torch.d.0.forward": fwd(s(3), out=s(3)),
           "Torch.e.0.forward": fwd(s(5), out=s(2.5))}
    con = blame_con(write_dump(tmp_path / "npu", npu), write_dump(tmp_path / "bench", bench))
    cols = ", ".join(_sheet_cell(c) for c in SHEET_COLUMNS)
    via_view = con.execute(f"SELECT blame_rank - 1 AS out_seq, * FROM (SELECT {cols} FROM blame "
                           f"WHERE verdict = 'local') ORDER BY out_seq")
    want = (via_view.description, via_view.fetchall())
    direct = con.execute(f"SELECT * FROM ({sheet_query()}) ORDER BY out_seq")
    got = (direct.description, direct.fetchall())
    assert [r[3] for r in want[1]] == [
        "Torch.b.0.forward.output.0", "Torch.c.0.forward.output.0", "Torch.e.0.forward.output.0",
        "Torch.a.0.forward.output.0"]
    assert got == want
    # the types too (a workbook's cells are rendered by them)
    assert (con.execute(f"DESCRIBE {sheet_query()}").fetchall()
            == con.execute(f"DESCRIBE SELECT blame_rank - 1 AS out_seq, * FROM (SELECT {cols} "
                           f"FROM blame WHERE verdict = 'local')").fetchall())
