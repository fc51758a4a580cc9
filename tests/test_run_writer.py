"""The driver of a directory compare records a few pairs per transaction (msq/run_writer.py).

Real pairs, computed as a pool worker computes them (msq.pair_tables.compute_pair), written by
the real driver into a real history file: the pairs commit in batches of BATCH_PAIRS, when the
driver is told it waits (``commit``), and at close (an error or a Ctrl-C ends the run through
close: the pairs whose files are published are recorded). A pair that cannot be recorded loses
its files, and the pairs before it in its transaction are recorded without it.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from msq.config import Options
from msq.distributed import PairJob, discover_jobs
from msq.errors import HistoryError
from msq.pair_tables import PairFailure, PairTables, compute_pair
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


def test_close_beside_commits_first_then_checkpoints_in_a_thread(pairs, tmp_path):
    """close(beside=True) commits the held pairs before it returns; the history's checkpoint
    and detach run in a thread until Closing.wait; a second close does nothing."""
    writer = RunWriter(tmp_path, Options(record=True))
    try:
        results = [writer.write(job, tables) for job, tables in pairs]
        closing = writer.close(beside=True)
        assert closing is not None
        assert writer.close() is None  # closed already: nothing more
        closing.wait()
        assert writer.con is not None
        with pytest.raises(duckdb.ConnectionException):  # closed by the thread
            writer.con.execute("SELECT 1")
    finally:
        writer.close()
    assert not (tmp_path / "msq.duckdb.wal").exists()  # checkpointed
    assert history(tmp_path / "msq.duckdb") == [(r.history_id, [str(p) for p in r.files])
                                                for r in results]


def test_a_pair_that_cannot_be_recorded_keeps_the_pairs_before_it(pairs, tmp_path):
    """Its rows do not fit the history (here: blame rows of the wrong shape): DuckDB drops the
    whole transaction, so the pairs before it in the batch are appended again and committed;
    its files are removed, theirs stay."""
    writer = RunWriter(tmp_path, Options(record=True))
    try:
        first = writer.write(*pairs[0])
        second = writer.write(*pairs[1])
        job, good = pairs[0]
        bad = _unrecordable(good, good.files)
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


def _names(path: Path) -> tuple[list[tuple[int, str | None]], list[tuple]]:
    with duckdb.connect(str(path), read_only=True) as con:
        names = con.execute("SELECT name_id, name FROM names ORDER BY name_id").fetchall()
        rows = con.execute("SELECT compare_id, out_seq, kind, op_name, npu_name, bench_name "
                           "FROM result_rows ORDER BY ALL").fetchall()
        # blame's names are keys too (schema version 6): the same keys, the same rows
        rows += con.execute("SELECT compare_id, out_seq, op_id, npu_id FROM blame_data "
                            "ORDER BY ALL").fetchall()
        rows += con.execute("SELECT * EXCLUDE (run_id) FROM blame_rows ORDER BY ALL").fetchall()
        rows += con.execute("SELECT * EXCLUDE (run_id) FROM blame_runs ORDER BY ALL").fetchall()
        # the short texts as keys into terms (schema version 8): the same terms, the same keys
        rows += con.execute("SELECT * FROM terms ORDER BY term_id").fetchall()
        rows += con.execute("SELECT compare_id, out_seq, COLUMNS('_id$') FROM result_data "
                            "ORDER BY ALL").fetchall()
        rows += con.execute("SELECT compare_id, out_seq, COLUMNS('_id$') FROM blame_data "
                            "ORDER BY ALL").fetchall()
        # the lists of texts as keys into texts (schema version 10; result_data's texts_id above)
        rows += con.execute("SELECT * FROM texts ORDER BY texts_id").fetchall()
        # the classes as keys (schema versions 11 and 12: the class_id columns above)
        rows += con.execute("SELECT * FROM result_classes ORDER BY class_id").fetchall()
        rows += con.execute("SELECT * FROM blame_classes ORDER BY class_id").fetchall()
        # blame's reasons as keys (schema version 13: blame_data's reason_id above), its edges'
        # side and how as ENUMs
        rows += con.execute("SELECT * FROM reasons ORDER BY reason_id").fetchall()
        rows += con.execute("SELECT * FROM blame_edges ORDER BY ALL").fetchall()
    return names, rows


def test_names_keyed_as_a_single_card_compare_keys_them(tmp_path):
    """The driver keys result_rows' names in Arrow (msq/history/run_recorder.py, _Names): the
    same keys, in the same order, as single-card compares of the same pairs recorded one after
    the other (the recorder's SQL), with names new in each pair, shared ones, and rows of one
    side only (a NULL name)."""
    import msq
    from tests.dumps import fwd, t, write_dump

    sides = {  # per rank: the NPU's and the bench's ops
        0: (["linear.0", "relu.0", "npu_only.0"], ["linear.0", "relu.0"]),
        1: (["relu.0", "conv.0", "linear.1"], ["bench_only.0", "relu.0", "conv.0", "linear.1"]),
        2: (["gelu.0", "linear.0", "conv.1"], ["gelu.0", "linear.0", "conv.1"]),
    }
    for rank, ops in sides.items():
        for side, names in zip(("npu", "bench"), ops):
            write_dump(tmp_path / side / "step0" / f"rank{rank}",
                       {f"Functional.{n}.forward": fwd(t(), out=t()) for n in names})
    run_db, single_db = tmp_path / "run.duckdb", tmp_path / "single.duckdb"
    msq.compare_distributed(tmp_path / "npu" / "step0", tmp_path / "bench" / "step0",
                            tmp_path / "run", db=run_db, workers=2)
    for rank in sides:
        msq.compare({"npu_path": str(tmp_path / "npu" / "step0" / f"rank{rank}" / "dump.json"),
                     "bench_path": str(tmp_path / "bench" / "step0" / f"rank{rank}" /
                                       "dump.json")},
                    tmp_path / f"single{rank}", db=single_db)
    run, single = _names(run_db), _names(single_db)
    assert run == single
    assert len(run[0]) > 10 and any(r[4] is None for r in run[1]) and any(r[5] is None
                                                                           for r in run[1])
    # lists of texts too (the unmatched rows'), keyed alike
    with duckdb.connect(str(run_db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM texts").fetchall()[0][0] > 1
        assert con.execute("SELECT count(DISTINCT compare_id) FROM result_data "
                           "WHERE texts_id IS NOT NULL").fetchall()[0][0] > 1


@pytest.mark.parametrize("index", [True, False], ids=["hash-table", "arrow"])
def test_names_keys_follow_each_names_first_row(tmp_path, index):
    """_Names keys a pair's new names in the order of each name's first row (op, NPU, bench name
    within a row), each once, after the largest key; known names keep theirs, NULL is 0. Checked
    against the rule written out in Python, over pairs whose new names come first in any column,
    repeat within and across rows, and mix with known ones; with the names held in the C hash
    table (msq/history/_names.c) and with Arrow's lookup alone."""
    from msq.history.run_recorder import _Names

    def reference(known: dict[str, int], rows: list[tuple]) -> tuple[list[tuple], list]:
        added: dict[str, int] = {}
        top = max(known.values(), default=0)
        for _, *names in sorted(rows):
            for name in names:
                if name is not None and name not in known and name not in added:
                    added[name] = top + 1 + len(added)
        keys = {**known, **added}
        keyed = [(seq, *(keys[n] if n is not None else 0 for n in names))
                 for seq, *names in rows]
        return keyed, list(added.items())

    names = _Names.of(pa.array([], pa.string()), pa.array([], pa.int32()), 0, index=index)
    known: dict[str, int] = {}
    pairs = [
        [(2, "b", "c", None), (0, "a", None, "c"), (1, "d", "a", "e")],  # rows out of order
        [(0, "e", "f", "f"), (1, None, "g", "a"), (2, "g", "h", None)],  # known, new, repeats
        [(0, "a", "b", "c"), (1, "c", None, "b")],                       # nothing new
    ]
    for rows in pairs:
        table = pa.table({"out_seq": pa.array([r[0] for r in rows], pa.int64()),
                          "kind": pa.array(["matched"] * len(rows)),
                          **{col: pa.array([r[i + 1] for r in rows], pa.string())
                             for i, col in enumerate(_Names.COLUMNS)}})
        keyed, new = names.key(table)
        want_rows, want_new = reference(known, rows)
        got = list(zip(*(keyed.column(c).to_pylist() for c in ("out_seq", *_Names.KEYS))))
        assert got == want_rows
        assert keyed.column_names == ["out_seq", "kind", *_Names.KEYS]
        assert (list(zip(new.column("name").to_pylist(), new.column("name_id").to_pylist()))
                if new is not None else []) == want_new
        known.update(want_new)
    assert names.top == len(known) == 8


@pytest.mark.parametrize("index", [True, False], ids=["hash-table", "arrow"])
def test_blame_names_take_their_output_rows_keys_and_new_ones_follow_their_first_row(index):
    """_Names.key_blame: a blame row's names that are those of the output row with its out_seq
    take that row's keys; any other name (another name at that out_seq, an out_seq without an
    output row, a via: history schema 13) is looked up, and a new one keyed after the largest in
    the order of its first blame row (op, then NPU name, then via); NULL is 0."""
    from msq.history.run_recorder import _Names

    names = _Names.of(pa.array([], pa.string()), pa.array([], pa.int32()), 0, index=index)
    result = pa.table({"out_seq": pa.array([0, 1, 2], pa.int64()),
                       "op_name": ["a", "a", "b"], "npu_name": ["x", "y", None],
                       "bench_name": ["x", None, "w"]})
    keyed, _ = names.key(result)  # a=1, x=2, y=3, b=4, w=5
    blame = pa.table({"out_seq": pa.array([1, 0, 7, 3, 2], pa.int64()),
                      "op_name": ["a", "a", "q", "b", "b"],
                      "npu_name": ["z", "x", None, "y", "w"],
                      "via": ["x", None, "n", "z", "m"], "verdict": ["clean"] * 5})
    data, new = names.key_blame(blame, result, keyed)
    assert data.column_names == ["out_seq", "verdict", "op_id", "npu_id", "via_id"]
    # z (out_seq 1, NPU), m (out_seq 2, via), q (out_seq 7, op), n (out_seq 7, via): 6 to 9;
    # y, w and the via x are known: 3, 5 and 2
    assert list(zip(*(data.column(c).to_pylist()
                      for c in ("out_seq", "op_id", "npu_id", "via_id")))) == [
        (1, 1, 6, 2), (0, 1, 2, 0), (7, 8, 0, 9), (3, 4, 3, 6), (2, 4, 5, 7)]
    assert new is not None and new.column("name").to_pylist() == ["z", "m", "q", "n"]
    assert new.column("name_id").to_pylist() == [6, 7, 8, 9] and names.top == 9
    # without the output rows every name is looked up: the same keys
    again, none = names.key_blame(blame, None, None)
    assert none is None and again.equals(data)


@pytest.mark.parametrize("index", [True, False], ids=["hash-table", "arrow"])
def test_reasons_keyed_by_the_rule_the_single_card_recorder_follows(index):
    """_Reasons.key (history schema 13): a blame row's reason replaced by ``reason_id`` in its
    place; known reasons keep their keys, a pair's new ones are keyed after the largest in the
    order of their first row (out_seq, not the order the rows come in), each once; NULL is 0.
    Checked against that rule written out in Python, over chunked rows."""
    from msq.history.run_recorder import _Reasons

    reasons = _Reasons.of(pa.array(["known"], pa.string()), pa.array([1], pa.int32()), 1,
                          index=index)
    known = {"known": 1}
    pairs = [
        [(3, "b"), (0, "a"), (1, None), (2, "b"), (4, "known")],
        [(0, "c"), (1, "a"), (2, "c"), (3, None)],
        [(0, "a"), (1, "known")],  # nothing new
    ]
    for rows in pairs:
        half = len(rows) // 2
        table = pa.Table.from_batches([pa.record_batch(
            {"out_seq": pa.array([r[0] for r in part], pa.int64()),
             "reason": pa.array([r[1] for r in part], pa.string()),
             "band": pa.array([0.5] * len(part))}) for part in (rows[:half], rows[half:])])
        added: dict[str, int] = {}
        for _, text in sorted(rows, key=lambda r: r[0]):
            if text is not None and text not in known and text not in added:
                added[text] = len(known) + len(added) + 1
        known.update(added)
        data, new = reasons.key(table)
        assert data.column_names == ["out_seq", "reason_id", "band"]
        assert data.column("reason_id").to_pylist() == [known[t] if t is not None else 0
                                                        for _, t in rows]
        assert (list(zip(new.column("reason").to_pylist(), new.column("reason_id").to_pylist()))
                if new is not None else []) == list(added.items())
    assert reasons.top == len(known) == 4


@pytest.mark.parametrize("index", [True, False], ids=["hash-table", "arrow"])
def test_terms_keyed_by_the_rule_the_single_card_recorder_follows(index):
    """_Terms.key (all of a pair's term columns looked up together): each column replaced in
    its place by ``<column>_id``, its terms' keys: known terms keep theirs, a pair's new terms
    (from any column, repeated within and across columns) are keyed after the largest in
    their sorted byte order, each once; NULL stays NULL. Checked against that rule written out
    in Python over pairs of new, known and mixed terms; with the terms held in the C hash table
    (msq/history/_names.c) and with Arrow's lookup alone."""
    from msq.history.run_recorder import _place_index, _Terms

    def reference(known: list[str], rows: list[tuple]) -> tuple[list[tuple], list[str]]:
        added = sorted({t for row in rows for t in row if t is not None and t not in known},
                       key=lambda t: t.encode())
        keys = {t: i + 1 for i, t in enumerate(known + added)}
        return [tuple(None if t is None else keys[t] for t in row) for row in rows], added

    terms = _Terms.__new__(_Terms)
    terms.terms = pa.array([], pa.string())
    terms.index = _place_index(terms.terms) if index else None
    known: list[str] = []
    columns = ("kind", "verdict", "mark")
    pairs = [
        [("matched", "pass", None), ("npu_only", "unmatched", "red"), ("matched", "b", "a")],
        [("matched", "warning", "yellow"), (None, "pass", "Zed"), ("é", "pass", "a")],
        [("matched", "pass", None), ("npu_only", "warning", "yellow")],  # nothing new
        [(None, None, None)],
    ]
    for rows in pairs:
        table = pa.table({"out_seq": pa.array(range(len(rows)), pa.int64()),
                          **{c: pa.array([r[i] for r in rows], pa.string())
                             for i, c in enumerate(columns)},
                          "reason": pa.array(["x"] * len(rows))})
        keyed, new = terms.key(table, columns)
        want_rows, want_new = reference(known, rows)
        assert keyed.column_names == ["out_seq", "kind_id", "verdict_id", "mark_id", "reason"]
        assert all(keyed.schema.field(f"{c}_id").type == pa.int32() for c in columns)
        assert list(zip(*(keyed.column(f"{c}_id").to_pylist() for c in columns))) == want_rows
        if want_new:
            assert new is not None and new.column("term").to_pylist() == want_new
            assert new.column("term_id").to_pylist() == list(
                range(len(known) + 1, len(known) + 1 + len(want_new)))
        else:
            assert new is None
        known += want_new
    assert terms.terms.to_pylist() == known and len(known) == 11


def test_blame_rows_places_among_their_output_rows():
    """key_blame's first step: each blame row's place among the output rows (_places: by an
    inverse permutation when the out_seqs are 0 .. n-1, else by a lookup; -1 where there is
    none), against the same written out in Python, over out_seqs in order, shuffled, with gaps,
    missing and NULL."""
    import random

    from msq.history.run_recorder import _places

    rng = random.Random(19)
    for case in range(40):
        n = rng.randrange(0, 60)
        seqs = list(range(n)) if case % 4 else rng.sample(range(2 * n + 1), n)  # dense or gaps
        if case % 3 == 0:
            rng.shuffle(seqs)
        blame = [s for s in seqs if rng.random() < 0.9] + [None, 10 ** 6, -1][: case % 4]
        if case % 5 == 0:
            rng.shuffle(blame)
        at = _places(pa.chunked_array([pa.array(blame, pa.int64())]),
                     pa.chunked_array([pa.array(seqs, pa.int64())]))
        want = [seqs.index(b) if b in seqs else -1 for b in blame]
        assert at.tolist() == want


def _unrecordable(good: PairTables, files: list | None = None) -> PairTables:
    """``good`` with blame rows the history cannot take (a column it does not have): the
    driver's write of it fails and drops the open transaction. ``files``: its published files
    (none by default)."""
    bad_rows = dict(good.history)
    bad_rows["blame_rows"] = pa.table({"no_such_column": [1]})
    return PairTables(good.mode, good.framework, good.started, good.summary,
                      good.cross_framework, files or [], bad_rows, good.blame)


def test_texts_keyed_by_the_rule_the_single_card_recorder_follows():
    """_Texts.key: ``texts`` replaced in its place by ``texts_id`` (INTEGER), each list's key:
    known lists keep theirs, a pair's new lists are keyed after the largest in the order of
    their first row (out_seq, not the order the rows come in), each once, a NULL member equal
    to a NULL member and lists of other lengths (an empty one) lists of their own; NULL stays
    NULL; rows in chunks (an empty one among them) keyed as in one. Checked against that rule
    written out in Python."""
    from msq.history.run_recorder import _Texts

    def reference(known: list[tuple], rows: list[tuple]) -> tuple[list[int | None], list]:
        added: list[tuple] = []
        for _, texts in sorted(rows, key=lambda r: r[0]):
            if texts is not None and texts not in known and texts not in added:
                added.append(texts)
        keys = {t: i + 1 for i, t in enumerate(known + added)}
        return [None if t is None else keys[t] for _, t in rows], added

    a, b = ("N/A", None, "nan"), (None, None, None)
    pairs = [
        [(3, a), (1, b), (2, None), (0, ("N/A", "nan", None)), (4, a), (5, ())],
        [(0, b), (1, ("x",)), (2, ("", None)), (3, None), (4, (None, "")), (5, a)],
        [(0, a), (1, None)],  # nothing new
        [(0, None), (1, None)],
        [(9, ("é", "N/A", "nan")), (2, ("é", "N/A", "nan")), (5, ("N/A", "é", "nan"))],
    ]
    for cuts in ((), (2, 2, 4)):
        texts = _Texts.__new__(_Texts)
        texts.keys = {}
        known: list[tuple] = []
        for rows in pairs:
            table = pa.table({"out_seq": pa.array([s for s, _ in rows], pa.int64()),
                              "texts": pa.array([None if t is None else list(t) for _, t in rows],
                                                pa.list_(pa.string())),
                              "reason": pa.array(["x"] * len(rows))})
            keyed, new = texts.key(_chunked(table, *[c for c in cuts if c <= len(rows)]))
            want_rows, want_new = reference(known, rows)
            assert keyed.column_names == ["out_seq", "texts_id", "reason"]
            assert keyed.schema.field("texts_id").type == pa.int32()
            assert keyed.column("texts_id").to_pylist() == want_rows
            if want_new:
                assert new is not None and new.num_rows == len(want_new)
                assert [tuple(t) for t in new.column("texts").to_pylist()] == want_new
                assert new.column("texts_id").to_pylist() == list(
                    range(len(known) + 1, len(known) + 1 + len(want_new)))
            else:
                assert new is None
            known += want_new
        assert len(known) == 9 and {t: k for t, k in texts.keys.items()} == {
            t: i + 1 for i, t in enumerate(known)}
    # a NULL member with bytes behind it (Arrow allows them) is the NULL member of an equal list
    values = pa.StringArray.from_buffers(
        6, pa.py_buffer(np.array([0, 1, 3, 4, 5, 5, 6], np.int32)), pa.py_buffer(b"aXYbab"),
        pa.py_buffer(np.packbits([1, 0, 1, 1, 0, 1], bitorder="little")))
    lists = pa.ListArray.from_arrays(pa.array([0, 3, 6], pa.int32()), values)
    assert lists.to_pylist() == [["a", None, "b"], ["a", None, "b"]]
    texts = _Texts.__new__(_Texts)
    texts.keys = {("a", None, "b"): 4}
    keyed, new = texts.key(pa.table({"out_seq": pa.array([0, 1], pa.int64()), "texts": lists}))
    assert keyed.column("texts_id").to_pylist() == [4, 4] and new is None


def _class_reference(known: list[tuple], rows: list[tuple]) -> tuple[list[int], list]:
    """The rule _Classes.key follows, written out in Python: each row's class's key, and the
    classes new to ``known`` in the order of their first row (out_seq)."""
    added: list[tuple] = []
    for _, cls in sorted(rows, key=lambda r: r[0]):
        if cls not in known and cls not in added:
            added.append(cls)
    keys = {c: i + 1 for i, c in enumerate(known + added)}
    return [keys[c] for _, c in rows], added


def _check_classes(columns: tuple[str, ...], types: dict[str, pa.DataType],
                   pairs: list[list[tuple]], dictionary_columns: tuple[str, ...],
                   classes_made: int) -> None:
    """_Classes.key over ``pairs`` (each a list of (out_seq, class)), against
    :func:`_class_reference`: in one chunk, in chunks (an empty one among them), and with
    ``dictionary_columns`` dictionary-encoded."""
    import pyarrow.compute as pc

    from msq.history.run_recorder import _Classes, _group_rows, _place_index

    for cuts, dictionary, index, group in (
            ((), False, True, True), ((2, 2, 4), False, True, True), ((1, 3), True, True, True),
            ((), False, True, False), ((2, 2, 4), False, True, False),
            ((1, 3), True, True, False), ((2, 2, 4), False, False, False),
            ((1, 3), True, False, False)):
        classes = _Classes.__new__(_Classes)
        classes.table, classes.columns = "classes", columns
        classes.keys, classes.texts = {}, pa.array(["clean", "x"])
        # the rows grouped in one pass in C (msq/history/_names.c), or their texts held in the
        # C hash table, or Arrow's lookup
        classes.group = _group_rows() if group else None
        if group:
            assert classes.group is not None
        classes.index = _place_index(classes.texts) if index else None
        known: list[tuple] = []
        for rows in pairs:
            values = {c: [cls[i] for _, cls in rows] for i, c in enumerate(columns)}
            table = pa.table({"out_seq": pa.array([s for s, _ in rows], pa.int64()),
                              **{c: pa.array(v, types.get(c, pa.string()))
                                 for c, v in values.items()},
                              "reason": pa.array(["x"] * len(rows))})
            table = _chunked(table, *[c for c in cuts if c <= len(rows)])
            if dictionary:  # (as DuckDB sends an ENUM: its dictionary may hold more texts)
                for c in dictionary_columns:
                    at = table.schema.get_field_index(c)
                    table = table.set_column(at, c, pa.chunked_array([
                        pa.DictionaryArray.from_arrays(
                            chunk.indices, pa.concat_arrays([chunk.dictionary,
                                                             pa.array(["unused"])]))
                        for chunk in pc.dictionary_encode(table.column(c)).chunks]))
            keyed, new = classes.key(table)
            want_rows, want_new = _class_reference(known, rows)
            assert keyed.column_names == ["out_seq", "reason", "class_id"]
            assert keyed.schema.field("class_id").type == pa.int32()
            assert keyed.column("class_id").to_pylist() == want_rows
            if want_new:
                assert new is not None and new.column_names == ["class_id", *columns]
                assert [tuple(r[c] for c in columns) for r in new.to_pylist()] == want_new
                assert new.column("class_id").to_pylist() == list(
                    range(len(known) + 1, len(known) + 1 + len(want_new)))
            else:
                assert new is None
            known += want_new
        assert len(known) == classes_made
        assert classes.keys == {c: i + 1 for i, c in enumerate(known)}


def test_blame_classes_keyed_by_the_rule_the_single_card_recorder_follows():
    """_Classes.key: blame's nine class columns replaced by ``class_id`` (INTEGER), each row's
    combination's key: known ones keep theirs, a pair's new ones are keyed after the largest in
    the order of their first row (out_seq, not the order the rows come in), each once, a NULL
    equal to a NULL (and not to an empty text or False); rows in chunks (an empty one among
    them) and columns that come dictionary-encoded (a text no row holds in the dictionary)
    keyed as in one chunk of texts. Checked against that rule written out in Python."""
    from msq.history.recorder import BLAME_CLASS_COLUMNS

    out = ("output", "output", "forward", False, False, "statistics", "dtype float32", "clean",
           None)
    inp = ("input", "linked input", "forward", False, False, "statistics", "dtype float32",
           "inherited", "hash")
    nulls = (None,) * 9
    blank = ("output", "output", "", None, False, "statistics", "dtype float32", None, None)
    pairs = [
        [(3, inp), (1, out), (2, out), (0, blank), (4, inp), (5, nulls)],
        [(0, inp), (1, out[:3] + (True,) + out[4:]), (2, out), (3, nulls),
         (4, out[:8] + ("",))],
        [(0, blank), (1, out)],  # nothing new
        [(9, inp[:7] + ("local", "hash")), (2, inp[:7] + ("local", "hash")), (5, out)],
    ]
    _check_classes(BLAME_CLASS_COLUMNS, {c: pa.bool_() for c in ("is_module", "collective")},
                   pairs, ("io", "verdict", "link"), 7)


def test_result_classes_keyed_by_the_rule_the_single_card_recorder_follows():
    """_Classes.key on result rows' ten class columns (schema version 12), as on blame's: the
    same rule, with a boolean (failing) and an integer (severity: NULL, 0, 2, a negative and a
    large one, a pair whose rows all hold NULL), rows in chunks and texts dictionary-encoded."""
    from msq.history.recorder import RESULT_CLASS_COLUMNS

    ok = ("matched", "torch.float32", "torch.float32", "", "pass", False, "", None, None, 0)
    red = ("matched", "torch.float16", "torch.float32", "Warning", "warning", True,
           "Need double check api accuracy.", "red", "relative error", 2)
    gone = ("npu_only", "torch.float32", None, "N/A", "unmatched", None,
            "No bench data matched", None, None, None)
    nulls = (None,) * 10
    pairs = [
        [(3, red), (1, ok), (2, ok), (0, gone), (4, red), (5, nulls)],
        [(0, red[:9] + (-3,)), (1, ok[:9] + (2 ** 14,)), (2, ok), (3, nulls),
         (4, ok[:5] + (True,) + ok[6:])],
        [(0, gone), (1, ok)],  # nothing new
        [(0, nulls), (1, nulls[:9] + (None,))],  # severity NULL on every row: nothing new
        [(9, red[:4] + ("fail",) + red[5:]), (2, red[:4] + ("fail",) + red[5:]), (5, ok)],
    ]
    _check_classes(RESULT_CLASS_COLUMNS, {"failing": pa.bool_(), "severity": pa.int32()},
                   pairs, ("kind", "verdict", "mark"), 8)


def test_names_of_a_dropped_pair_are_dropped_too(pairs, tmp_path):
    """A pair that cannot be recorded drops its transaction, the names it brought included:
    the next pair's names get the keys they would have had without it."""
    job, good = pairs[0]
    bad = _unrecordable(good)
    (tmp_path / "a").mkdir()
    writer = RunWriter(tmp_path / "a", Options(record=True))
    try:
        with pytest.raises(HistoryError, match="could not record"):
            writer.write(job, bad)
        writer.write(*pairs[1])
    finally:
        writer.close()
    (tmp_path / "b").mkdir()
    alone = RunWriter(tmp_path / "b", Options(record=True))
    try:
        alone.write(*pairs[1])
    finally:
        alone.close()
    assert _names(tmp_path / "a" / "msq.duckdb") == _names(tmp_path / "b" / "msq.duckdb")


def _rows(table: pa.Table) -> pa.Table:
    """A history table's rows, the run id (each compare's own) left out."""
    return table.drop_columns([c for c in ("run_id",) if c in table.column_names])


def _stamped(files: list[tuple[str, bytes]]) -> list[str]:
    """The files' names, their time stamps left out."""
    import re

    return [re.sub(r"_\d{14}", "_<stamp>", name) for name, _ in files]


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_pair_left_in_a_shared_folder_is_the_pair_sent_whole(pairs, tmp_path, monkeypatch):
    """A pool worker leaves its pair's rows in a shared folder and its files in the output
    folder under their temporary names, unpublished (compute_pair_shared); take_shared gives
    the same rows and files back, and the folder and the temporaries are gone."""
    import os

    from msq import pair_tables

    shm, out = tmp_path / "shm", tmp_path / "out"
    shm.mkdir()
    out.mkdir()
    monkeypatch.setattr(pair_tables, "shared_root", lambda: str(shm))
    job, whole = pairs[0]
    opts = Options(workers=1, record=True)
    left = pair_tables.compute_pair_shared(job, opts, out)
    assert isinstance(left, PairTables) and left.shared and not left.history
    assert sorted(p.name for p in Path(left.shared).iterdir()) == sorted(
        f"{t}.arrow" for t in left.shared_tables)
    assert [(data.parent, re.sub(r"~\d+\.", ".", data.name)) for _, data in left.files] == [
        (out, f".{name}.{os.getpid()}.tmp") for name, _ in left.files]  # .<name>~<n>.<pid>.tmp
    assert _temporaries(out) == sorted(p.name for p in out.iterdir())  # nothing published
    folder = left.shared
    left.take_shared()
    assert not Path(folder).exists() and list(out.iterdir()) == []
    assert _stamped(left.files) == _stamped(whole.files)
    assert list(left.history) == list(whole.history)
    assert all(_rows(left.history[t]).equals(_rows(whole.history[t])) for t in whole.history)
    # blame's ENUMs come as Arrow dictionaries (hist_blame_rows.sql), which the driver looks up
    # by their dictionaries alone (run_recorder._Classes); the folder's files keep them so
    blame = left.history["blame_rows"]
    assert blame.num_rows and all(
        pa.types.is_dictionary(blame.schema.field(c).type)
        for c in ("io", "role", "direction", "verdict", "link"))


def test_the_driver_renames_a_shared_pairs_files_into_place(pairs, tmp_path, monkeypatch):
    """take_shared(keep=True), the driver's: the files stay where the worker left them, in the
    output folder under temporary names, until the pair is published; each is then renamed
    into place (the same file: no byte copied), never over another file (a taken name gets
    ``_2``), and no temporary is left; release() then has nothing to do."""
    from msq import pair_tables

    shm, out = tmp_path / "shm", tmp_path / "out"
    shm.mkdir()
    out.mkdir()
    monkeypatch.setattr(pair_tables, "shared_root", lambda: str(shm))
    job, whole = pairs[0]
    left = pair_tables.compute_pair_shared(job, Options(workers=1, record=True), out)
    assert isinstance(left, PairTables)
    folder = Path(left.shared)
    left.take_shared(keep=True)
    assert not folder.exists()
    assert all(isinstance(data, Path) and data.parent == out for _, data in left.files)
    inodes = {name: data.stat().st_ino for name, data in left.files}
    taken = out / left.files[0][0]  # another compare's file under the workbook's name
    taken.write_bytes(b"theirs")
    writer = RunWriter(out, Options(record=True))
    try:
        result = writer.write(job, left)
    finally:
        writer.close()
        left.release()
    assert _temporaries(out) == []
    left.release()  # nothing more
    assert taken.read_bytes() == b"theirs"
    names = [Path(p).name for p in result.files]
    first = left.files[0][0]
    assert names[0] == f"{Path(first).stem}_2{Path(first).suffix}"
    assert [Path(p).stat().st_ino for p in result.files] == list(inodes.values())
    published = {re.sub(r"_\d{14}(_2)?", "", Path(p).name): Path(p).read_bytes()
                 for p in result.files}
    expected = {re.sub(r"_\d{14}", "", name): data for name, data in whole.files}
    assert sorted(published) == sorted(expected)
    for name, data in expected.items():  # a workbook's parts (its zip entries' times differ)
        assert (_parts(published[name]) == _parts(data) if name.endswith(".xlsx")
                else published[name] == data), name


def test_a_shared_pair_not_published_leaves_no_temporary(pairs, tmp_path, monkeypatch):
    """The files a worker left for the driver go when its pair is not published: its rows
    could not be read (the pair fails), or the driver's write of it failed (release)."""
    from msq import distributed, pair_tables

    shm, out = tmp_path / "shm", tmp_path / "out"
    shm.mkdir()
    out.mkdir()
    monkeypatch.setattr(pair_tables, "shared_root", lambda: str(shm))
    job, _ = pairs[0]
    opts = Options(workers=1, record=True)
    left = pair_tables.compute_pair_shared(job, opts, out)
    assert isinstance(left, PairTables) and _temporaries(out)
    (Path(left.shared) / "result_rows.arrow").write_bytes(b"not arrow")
    failed = distributed._taken(job, left)
    assert isinstance(failed, PairFailure) and "could not read" in failed.message
    assert list(out.iterdir()) == [] and list(shm.iterdir()) == []

    left = pair_tables.compute_pair_shared(job, opts, out)
    assert isinstance(left, PairTables) and _temporaries(out)
    left.take_shared(keep=True)
    writer = RunWriter(out, Options(record=True))
    monkeypatch.setattr(writer.history, "append", lambda *a: 1 / 0)
    try:
        with pytest.raises(ZeroDivisionError):
            writer.write(job, left)
    finally:
        writer.close()
        left.release()
    assert [p.name for p in out.iterdir() if not p.name.startswith("msq.duckdb")] == []


def test_a_killed_workers_left_files_are_stale_temporaries(pairs, tmp_path, monkeypatch):
    """What a pool worker left in the output folder for the driver is what the driver removes
    of the workers it killed (msq.db.remove_stale_temporaries), at once."""
    import os

    from msq import pair_tables
    from msq.db import remove_stale_temporaries
    from msq.export.outputs import OUTPUT_NAMES

    shm, out = tmp_path / "shm", tmp_path / "out"
    shm.mkdir()
    out.mkdir()
    monkeypatch.setattr(pair_tables, "shared_root", lambda: str(shm))
    job, _ = pairs[0]
    opts = Options(workers=1, record=True, formats=("xlsx", "csv"), auto_analyze=True)
    left = pair_tables.compute_pair_shared(job, opts, out)
    assert isinstance(left, PairTables)
    assert [re.sub(r"_\d{14}|~\d+(?=\.)", "", n) for n in _temporaries(out)] == [
        f".{name}.{os.getpid()}.tmp" for name in ("advisor_rank0-rank0.txt",
                                                   "blame_rank0-rank0.csv",
                                                   "compare_result_rank0-rank0.csv",
                                                   "compare_result_rank0-rank0.xlsx")]
    assert remove_stale_temporaries(out, OUTPUT_NAMES) == 0  # its worker (this test) lives
    assert remove_stale_temporaries(out, OUTPUT_NAMES, dead={os.getpid()}) == 4
    assert list(out.iterdir()) == []


def _parts(data: bytes) -> dict[str, bytes]:
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist() if not n.startswith("docProps")}


@pytest.mark.parametrize("why", ["too little room", "no folder"])
def test_a_pair_goes_through_the_pipe_without_a_shared_folder(pairs, tmp_path, monkeypatch, why):
    """Too little room where the pairs would be left (Docker's 64 MB /dev/shm), or no folder
    there: the pair comes back whole, as before, and nothing is left behind."""
    from msq import pair_tables

    root = tmp_path / "shm"
    if why == "too little room":
        root.mkdir()
        monkeypatch.setattr(pair_tables, "SHARED_MIN_FREE", 1 << 62)
    else:
        root.write_text("")  # a file where the folder should be
    monkeypatch.setattr(pair_tables, "shared_root", lambda: str(root))
    job, whole = pairs[0]
    out = pair_tables.compute_pair_shared(job, Options(workers=1, record=True), tmp_path)
    assert isinstance(out, PairTables) and not out.shared
    assert _stamped(out.files) == _stamped(whole.files)
    assert all(_rows(out.history[t]).equals(_rows(whole.history[t])) for t in whole.history)
    assert not root.is_dir() or list(root.iterdir()) == []


def test_a_full_shared_folder_is_told_from_a_failing_pair(tmp_path):
    """An output that cannot be written for want of room (the exporters' own error, made of
    the system's ENOSPC) sends the pair through the pipe instead (compute_pair_shared); any
    other failure stays the pair's."""
    import errno

    from msq.errors import ExportError
    from msq.export.outputs import _writing
    from msq.pair_tables import out_of_room

    def failing(err: OSError) -> ExportError:
        with pytest.raises(ExportError) as caught, _writing(tmp_path / "x.xlsx"):
            raise err
        return caught.value

    assert out_of_room(failing(OSError(errno.ENOSPC, "No space left on device")))
    assert out_of_room(failing(OSError(errno.EDQUOT, "Disk quota exceeded")))
    assert not out_of_room(failing(OSError(errno.ENOENT, "No such file or directory")))
    assert not out_of_room(failing(OSError(errno.EACCES, "Permission denied")))


def _chunked(table: pa.Table, *cuts: int) -> pa.Table:
    """``table`` with every column in chunks cut at ``cuts`` (an empty one among them)."""
    bounds = [0, *cuts, table.num_rows]
    return pa.concat_tables([table.slice(a, b - a) for a, b in itertools.pairwise(bounds)])


@pytest.mark.parametrize("index", [True, False], ids=["hash-table", "arrow"])
def test_lookups_take_columns_of_several_chunks_as_one_array(index):
    """A pair's rows come with their columns in a few chunks (msq.pair_tables.split_rows), which
    the lookups take as the chunks of one array, not copied: _Names.key, key_blame and
    _Terms.key give each a chunked table's rows what they give the same rows in one chunk, new
    names and terms among them, with a name of one chunk equal to another's."""
    from msq.history.run_recorder import _Names, _place_index, _Terms

    def fresh() -> tuple[_Names, _Terms]:
        names = _Names.of(pa.array(["k"]), pa.array([1], pa.int32()), 1, index=index)
        terms = _Terms.__new__(_Terms)
        terms.terms = pa.array(["pass"])
        terms.index = _place_index(terms.terms) if index else None
        return names, terms

    result = pa.table({"out_seq": pa.array(range(6), pa.int64()),
                       "op_name": ["a", "a", "b", "k", None, "c"],
                       "npu_name": ["x", "y", None, "a", "z", "x"],
                       "bench_name": ["x", None, "w", "k", "z", None],
                       "kind": ["matched", "npu_only", "bench_only", "matched", None, "matched"],
                       "verdict": ["pass", "warning", None, "pass", "fail", "warning"]})
    blame = pa.table({"out_seq": pa.array([1, 0, 7, 3, 2, 5], pa.int64()),
                      "op_name": ["a", "a", "q", "k", "b", "c"],
                      "npu_name": ["z", "x", None, "a", "w", "v"],
                      "verdict": ["local", "clean", "clean", None, "local", "clean"]})
    got = []
    for res, bl in ((result, blame), (_chunked(result, 2, 2, 5), _chunked(blame, 1, 4))):
        names, terms = fresh()
        keyed, new = names.key(res)
        data, new_blame = names.key_blame(bl, res, keyed)
        keyed, new_terms = terms.key(keyed, ("kind", "verdict"))
        data, new_blame_terms = terms.key(data, ("verdict",))
        got.append([t.combine_chunks().to_pylist() if t is not None else None
                    for t in (keyed, new, data, new_blame, new_terms, new_blame_terms)])
    assert got[0] == got[1]
    assert got[0][1] is not None and got[0][3] is not None and got[0][4] is not None


def test_a_transactions_new_names_and_terms_are_inserted_once_at_its_commit(pairs, tmp_path):
    """The names and terms a transaction's pairs bring are held until its commit and inserted
    then, once, in the order of their keys: a pair that fails after two pairs of its
    transaction (which are appended again, keyed again) leaves the same names, terms and rows
    as the two pairs recorded alone."""
    job, good = pairs[0]
    bad = _unrecordable(good)
    (tmp_path / "a").mkdir()
    writer = RunWriter(tmp_path / "a", Options(record=True))
    try:
        writer.write(*pairs[0])
        writer.write(*pairs[1])
        # in the open transaction itself: none of its names and terms inserted yet
        assert writer.con.execute(
            "SELECT (SELECT count(*) FROM msq_history.names WHERE name_id > 0), "
            "(SELECT count(*) FROM msq_history.terms)").fetchall() == [(0, 0)]
        with pytest.raises(HistoryError, match="could not record"):
            writer.write(job, bad)
    finally:
        writer.close()
    (tmp_path / "b").mkdir()
    alone = RunWriter(tmp_path / "b", Options(record=True))
    try:
        alone.write(*pairs[0])
        alone.write(*pairs[1])
    finally:
        alone.close()
    recorded = _names(tmp_path / "a" / "msq.duckdb")
    assert recorded == _names(tmp_path / "b" / "msq.duckdb")
    names, _ = recorded
    assert [key for key, _ in names] == list(range(len(names))) and len(names) > 1


def _one_row_tables(path: Path) -> list[tuple]:
    """The compares rows (without what differs from run to run: the time taken, the output
    folder and files) and blame_runs rows of the history at ``path``."""
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute("SELECT * EXCLUDE (started_at, seconds, output_dir, files) "
                           "FROM compares ORDER BY compare_id").fetchall()
        rows += con.execute("SELECT * FROM blame_runs ORDER BY compare_id").fetchall()
    return rows


def test_a_transactions_compares_and_blame_runs_rows_are_inserted_at_its_commit(pairs, tmp_path):
    """A pair's compares and blame_runs rows (one each) are held until the transaction's
    commit and inserted then, one statement a table for its pairs, with the compare_ids its
    pairs were given: none is in the open transaction; a pair that fails after two pairs of its
    transaction (appended again, with the same ids) leaves the same rows as the two pairs
    recorded alone, and the next pair takes the next id."""
    job, good = pairs[0]
    bad = _unrecordable(good)
    (tmp_path / "a").mkdir()
    writer = RunWriter(tmp_path / "a", Options(record=True))
    try:
        ids = [writer.write(*pairs[0]).history_id, writer.write(*pairs[1]).history_id]
        assert writer.con.execute(
            "SELECT (SELECT count(*) FROM msq_history.compares), "
            "(SELECT count(*) FROM msq_history.blame_runs)").fetchall() == [(0, 0)]
        with pytest.raises(HistoryError, match="could not record"):
            writer.write(job, bad)
        assert committed(writer) == ids == [1, 2]
        ids.append(writer.write(*pairs[1]).history_id)
    finally:
        writer.close()
    assert ids == [1, 2, 3]
    (tmp_path / "b").mkdir()
    alone = RunWriter(tmp_path / "b", Options(record=True))
    try:
        for pair in (pairs[0], pairs[1], pairs[1]):
            alone.write(*pair)
            alone.commit()  # each pair its own transaction
    finally:
        alone.close()
    recorded = _one_row_tables(tmp_path / "a" / "msq.duckdb")
    assert recorded == _one_row_tables(tmp_path / "b" / "msq.duckdb")
    assert len(recorded) == 6  # three compares, three blame_runs rows


def test_the_driver_keeps_its_blocks_memory(pairs, tmp_path):
    """The driver's DuckDB appends transaction after transaction: its blocks come from
    DuckDB's block allocator, up to its memory limit (run_writer.DRIVER_MEMORY), and pairs are
    recorded as before."""
    writer = RunWriter(tmp_path, Options(record=True))
    try:
        setting = "SELECT current_setting('block_allocator_memory'), current_setting('memory_limit')"
        kept, limit = writer.con.execute(setting).fetchall()[0]
        assert kept == limit == "152.5 MiB"  # 160 MB
        for job, tables in pairs:
            writer.write(job, tables)
        writer.commit()
        assert committed(writer) == list(range(1, len(pairs) + 1))
    finally:
        writer.close()


def test_a_pairs_bench_side_sent_as_its_npu_side_is_recorded_as_sent_whole(pairs, tmp_path):
    """A pool worker sends a result row's bench name and shape only where they differ from its
    NPU side's (msq.pair_tables.bench_once): the driver records the same history as from the
    rows sent whole (without BENCH_SAME, the bench columns compared there), with rows whose
    bench name, dtype or shape differ, new names and terms on the bench side alone, and rows
    of one side."""
    import pyarrow.compute as pc

    from msq.history.recorder import BENCH_SAME, BENCH_TWINS
    from msq.history.run_recorder import RunRecorder
    from msq.pair_tables import bench_once

    def whole(rows: pa.Table, pair: int) -> pa.Table:
        """``rows`` with their bench side filled back, a few rows' bench side changed."""
        same = rows.column(BENCH_SAME)
        rows = rows.drop_columns([BENCH_SAME])
        n = rows.num_rows
        twins = dict(BENCH_TWINS)
        for column in ("bench_name", "bench_dtype", "bench_shape"):
            at = rows.schema.get_field_index(column)
            filled = (pc.if_else(same, rows.column(twins[column]), rows.column(column))
                      if column in twins else rows.column(column)).to_pylist()
            changed = {"bench_name": f"bench.only.{pair}", "bench_dtype": "torch.int4",
                       "bench_shape": f"[{pair}, 7]"}[column]
            offset = ("bench_name", "bench_dtype", "bench_shape").index(column)
            filled = [changed if (i + offset) % 5 == 0 and v is not None else v
                      for i, v in enumerate(filled)]
            rows = rows.set_column(at, column, pa.array(filled, pa.string()))
        assert n == rows.num_rows
        return rows

    recorded = []
    for name, send in (("whole", lambda rows: rows), ("once", bench_once)):
        path = tmp_path / f"{name}.duckdb"
        con = duckdb.connect()
        recorder = RunRecorder(con, path)
        recorder.begin()
        for i, (_, tables) in enumerate(pairs):
            rows = dict(tables.history)
            rows["result_rows"] = send(whole(rows["result_rows"], i))
            assert (BENCH_SAME in rows["result_rows"].column_names) == (name == "once")
            recorder.append(rows, {"npu_path": f"n{i}"})
        recorder.commit()
        recorder.close()
        con.close()
        recorded.append(_names(path))
    assert recorded[0] == recorded[1]
    with duckdb.connect(str(tmp_path / "once.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FILTER (bench_name <> npu_name), "
                           "count(*) FILTER (bench_dtype <> npu_dtype), "
                           "count(*) FILTER (bench_shape <> npu_shape), "
                           "count(*) FILTER (bench_name IS NULL) FROM result_rows"
                           ).fetchall()[0] > (0, 0, 0, 0)


@pytest.mark.parametrize("index", [True, False], ids=["hash-table", "arrow"])
def test_blame_rows_sent_without_names_take_their_output_rows_keys(index):
    """A pool worker leaves the names out of a pair's blame rows where every row's are its
    output row's (msq.pair_tables.blame_names_once): _Names.key_blame then gives each row the
    keys its output row's names got (NULL: 0), the same as from the rows with their names, in
    any order; a row without its output row, or a name not its output row's, keeps the names."""
    from msq.history.recorder import BLAME_NAMES
    from msq.history.run_recorder import _Names
    from msq.pair_tables import blame_names_once

    names = _Names.of(pa.array([], pa.string()), pa.array([], pa.int32()), 0, index=index)
    result = pa.table({"out_seq": pa.array([2, 0, 1, 3], pa.int64()),
                       "op_name": ["b", "a", "a", None], "npu_name": [None, "x", "y", "v"],
                       "bench_name": ["w", "x", None, "v"]})
    keyed, _ = names.key(result)
    blame = pa.table({"out_seq": pa.array([1, 0, 3, 2], pa.int64()),
                      "op_name": ["a", "a", None, "b"], "npu_name": ["y", "x", "v", None],
                      "via": ["x", None, "v", "y"], "verdict": ["clean"] * 4})
    sent = blame_names_once(blame, result)
    assert sent.column_names == ["out_seq", "via", "verdict"]
    whole, new = names.key_blame(blame, result, keyed)
    data, none = names.key_blame(sent, result, keyed)
    assert new is None and none is None and data.equals(whole)
    assert data.column("op_id").to_pylist() == [1, 1, 0, 4]
    assert data.column("via_id").to_pylist() == [2, 0, 6, 3]
    # a name not its output row's, a row without one: sent with the names
    for other in (blame.set_column(2, "npu_name", pa.array(["y", "x", "v", "q"])),
                  blame.set_column(0, "out_seq", pa.array([1, 0, 3, 9], pa.int64()))):
        assert blame_names_once(other, result).column_names == blame.column_names
    assert all(c in blame.column_names for c in BLAME_NAMES)


def test_one_process_stages_two_files_of_one_name(tmp_path):
    """A staged file waits under its temporary name until the driver publishes it: two files of
    one final name staged by one process (two compares of one pair in the same second) are two
    temporaries, each published under its own name, and both a killed process's leftovers."""
    from msq import db

    path = tmp_path / "compare_result_x.xlsx"
    with db.staging() as staged:
        for text in (b"first", b"second"):
            with db.new_file(path) as f:
                f.tmp.write_bytes(text)
    first, second = staged
    assert first.tmp != second.tmp and first.tmp.exists() and second.tmp.exists()
    assert db.final_name(first.tmp) == db.final_name(second.tmp) == path
    assert db.remove_stale_temporaries(tmp_path, ["compare_result"], dead={os.getpid()}) == 2
    with db.staging() as staged:
        for text in (b"first", b"second"):
            with db.new_file(path) as f:
                f.tmp.write_bytes(text)
    published = [db.publish(f.tmp, f.path) for f in staged]
    assert [p.read_bytes() for p in published] == [b"first", b"second"]
    assert published == [path, tmp_path / "compare_result_x_2.xlsx"]
