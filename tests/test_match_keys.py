"""op_candidates' exact test from the readers' struct_keys (msq.pipeline.op_pairs_select).

Two ops whose ops.struct_key (each row's dtype, shape and md5, length-prefixed, in order) are
equal have rows of equal structure, so op_pairs_select skips the join of their rows; every other
pair is tested row by row as op_candidates.sql tests it. The pairs must be op_pairs_default's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from msq import db, loader, pipeline
from msq.config import Options, SingleInput
from msq.sqlfiles import SqlFile
from tests.dumps import fwd, t, write_dump


def _prepared(tmp_path: Path, npu: dict[str, Any], bench: dict[str, Any], *, task: str = "statistics",
              python_reader: bool = False) -> Any:
    inp = SingleInput(write_dump(tmp_path / "npu", npu, task=task),
                      write_dump(tmp_path / "bench", bench, task=task), None)
    saved = loader.C_PADDING
    if python_reader:
        loader.C_PADDING = None
    try:
        con = pipeline.prepare(inp, Options(workers=1, record=False))[0]
    finally:
        loader.C_PADDING = saved
    db.materialize(con, "op_keys", pipeline.READER_OP_KEYS)
    return con


def _same_pairs(con: Any) -> list[Any]:
    keyed = con.execute(f"SELECT * FROM ({pipeline.op_pairs_select()}) ORDER BY ord").fetchall()
    assert keyed == con.execute("SELECT * FROM op_pairs_default ORDER BY ord").fetchall()
    return keyed


# each op: the NPU entry and the bench entry, and whether the two pair
CASES: dict[str, tuple[Any, Any, bool]] = {
    "same": (fwd(t([2, 3])), fwd(t([2, 3])), True),
    "float precision (row by row: loose)": (fwd(t([2], dtype="torch.bfloat16")),
                                            fwd(t([2], dtype="torch.float32")), True),
    "another shape": (fwd(t([2, 3])), fwd(t([3, 2])), False),
    "int against float": (fwd(t([2], dtype="torch.int64")), fwd(t([2], dtype="torch.float32")),
                          False),
    "no dtype on one side (as op_candidates decides)": (fwd(t([2], dtype=None)), fwd(t([2])), True),
    "no dtype on both": (fwd(t([2], dtype=None)), fwd(t([2], dtype=None)), True),
    "a typed value": (fwd({"type": "int", "value": 3}), fwd({"type": "int", "value": 4}), True),
    "a shape text that runs on": (fwd(t([1]), t([12])), fwd(t([11]), t([2])), False),
}


@pytest.mark.parametrize("python_reader", [False, True])
def test_keyed_candidates_pair_as_op_candidates(tmp_path: Path, python_reader: bool) -> None:
    npu = {f"Functional.c{i}.0.forward": case[0] for i, case in enumerate(CASES.values())}
    bench = {f"Functional.c{i}.0.forward": case[1] for i, case in enumerate(CASES.values())}
    con = _prepared(tmp_path, npu, bench, python_reader=python_reader)
    pairs = _same_pairs(con)
    matched = {n for _, n, b, how in pairs if how == "matched"}
    assert matched == {i for i, case in enumerate(CASES.values()) if case[2]}
    # both ways are taken: equal keys without the row test, others through it
    keys = dict(con.execute("SELECT op_seq, struct_key FROM ops WHERE side = 'npu'").fetchall())
    bench_keys = dict(con.execute("SELECT op_seq, struct_key FROM ops WHERE side = 'bench'").fetchall())
    assert keys[0] == bench_keys[0] == "13:torch.float32" + "6:[2, 3]" + "-" + "13:torch.float32" + "6:[2, 3]-"
    assert keys[1] != bench_keys[1]


def test_md5_differences_go_row_by_row(tmp_path: Path) -> None:
    """md5 is part of the key: an md5 compare's exact test sees it, a statistics one's does not."""
    npu = {"Functional.a.0.forward": fwd(t([2], md5="aaa")),
           "Functional.b.0.forward": fwd(t([2], md5="bbb"))}
    bench = {"Functional.a.0.forward": fwd(t([2], md5="aaa")),
             "Functional.b.0.forward": fwd(t([2], md5="ccc"))}
    con = _prepared(tmp_path, npu, bench)
    assert [how for *_, how in _same_pairs(con)] == ["matched", "matched"]


def test_a_key_of_control_characters_and_unicode(tmp_path: Path) -> None:
    """Length prefixes keep keys apart whatever the texts hold; both readers make one key."""
    odd = "f\u00e9:2-\u001f"
    npu = {"Functional.a.0.forward": fwd(t([2], dtype=odd)), "Functional.b.0.forward": fwd(t([2], dtype=odd))}
    bench = {"Functional.a.0.forward": fwd(t([2], dtype=odd)),
             "Functional.b.0.forward": fwd(t([2], dtype="f\u00e9:2-"))}
    for python_reader in (False, True):
        con = _prepared(tmp_path / str(python_reader), npu, bench, python_reader=python_reader)
        assert sorted(how for *_, how in _same_pairs(con)) == \
            ["matched", "unmatched_bench", "unmatched_npu"]
        assert con.execute("SELECT struct_key FROM ops WHERE side = 'npu' AND op_seq = 0"
                           ).fetchone()[0].startswith(f"{len(odd.encode())}:{odd}")


def test_op_pairs_select_names_the_file_it_no_longer_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    real = db.sql_file

    def rewritten(name: str) -> Any:
        file = real(name)
        if name.endswith("op_candidates.sql"):
            return SqlFile(file.name, file.text.replace("FROM named p", "FROM named q"), file.origin)
        return file

    monkeypatch.setattr(db, "sql_file", rewritten)
    with pytest.raises(AssertionError, match="op_candidates.sql"):
        pipeline.op_pairs_select()


def test_both_readers_prefix_every_length_alike(tmp_path: Path) -> None:
    """A field's length prefix, written by hand in C (msq/_flatten.c key_field), is the Python
    reader's for lengths of one to five digits and for an empty text."""
    lengths = [0, 1, 9, 10, 99, 100, 101, 1000, 12345]
    npu = {f"Functional.a{k}.0.forward": fwd(t([2], dtype="x" * n)) for k, n in enumerate(lengths)}
    keys = {}
    for python_reader in (False, True):
        con = _prepared(tmp_path / str(python_reader), npu, npu, python_reader=python_reader)
        keys[python_reader] = con.execute("SELECT side, op_seq, struct_key FROM ops "
                                          "ORDER BY side, op_seq").fetchall()
    assert keys[False] == keys[True]
    got = [key for side, _, key in keys[False] if side == "npu"]
    # each op's input row (the dtype of n bytes), then fwd's output row
    assert got == [f"{n}:{'x' * n}3:[2]-13:torch.float326:[2, 3]-" for n in lengths]
