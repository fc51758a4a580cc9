"""A batch of pairs' blame summaries (msq.blame.summary.summarize_batch) hold their rows as Arrow
tables (PackedRows.of_table): each pair's reads back as its own compare's summary does, and the
run's blame (msq.blame.ranks) reads the tables as it reads the dicts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from msq import pair_tables
from msq.blame.ranks import RankBlame, _arrow_parts, _rows_table, combine
from msq.blame.run import BlameRun
from msq.blame.summary import ROW_FIELDS, BlameSummary, PackedRows
from msq.config import Options
from msq.pair_tables import PairTables
from tests.blame.test_links import s
from tests.dumps import fwd
from tests.test_batch import _no_kept_database, alone, model, noisy, pair  # noqa: F401


def collective_dump(a_out: float, reduced: float, b_out: float) -> dict[str, Any]:
    return {
        "Torch.a.0.forward": fwd(s(1), out=s(a_out)),
        "Distributed.all_reduce.0.forward": fwd(s(a_out), out=s(reduced)),
        "Torch.b.0.forward": fwd(s(reduced), out=s(b_out)),
    }


@pytest.fixture
def opts() -> Options:
    return Options(workers=1, record=True, formats=("xlsx",), blame_run=BlameRun("batch-test"))


@pytest.fixture
def jobs(tmp_path: Path) -> list[Any]:
    """Pairs with local sources (a model's noisy statistics; one far off) and collectives."""
    base = model(11)
    far = noisy(base, 12, 0.05)
    far["Functional.relu.0.forward"]["output"][0]["Max"] = 400.0
    # several local sources, the worst not the first in execution order
    spread = copy.deepcopy(base)
    for name, factor in (("Functional.linear.0.forward", 1.5), ("Torch.matmul.1.forward", 40.0),
                         ("Functional.dropout.2.forward", 3.0)):
        spread[name]["output"][0]["Max"] *= factor
    reduced = {**collective_dump(2, 5.5, 9.9), **copy.deepcopy(base)}
    return [pair(tmp_path, "noisy", base, noisy(base, 13, 0.3)),
            pair(tmp_path, "far", base, far), pair(tmp_path, "spread", base, spread),
            pair(tmp_path, "reduced", reduced, {**collective_dump(2, 5, 9), **base}),
            pair(tmp_path, "wrong", collective_dump(3.3, 5.5, 9.9), collective_dump(3, 5, 9))]


def test_a_batchs_summaries_are_each_pairs_own_as_tables(jobs, opts, tmp_path, monkeypatch):
    outs = pair_tables._batch_shared(jobs, opts, tmp_path)
    batch, own = [], []
    for job, out in zip(jobs, outs, strict=True):
        assert isinstance(out, PairTables), job.title
        want = alone(job, opts, tmp_path).blame
        got = out.blame
        assert got is not None and want is not None
        # the batch's rows are Arrow tables (no dict made in the worker); a compare's are dicts
        assert isinstance(got.sources, PackedRows) and got.sources.table() is not None
        assert isinstance(got.collectives, PackedRows) and got.collectives.table() is not None
        assert isinstance(want.sources, PackedRows) and want.sources.table() is None
        # the same rows, values, types and order as its own compare's, read either way
        assert repr(got) == repr(want), job.title
        assert repr(got.first_and_worst()) == repr(want.first_and_worst()), job.title
        assert repr(got.sources[:2]) == repr(want.sources[:2])
        assert repr(got.sources[-1:]) == repr(want.sources[-1:])
        assert repr(got.sources[::2]) == repr(want.sources[::2])
        if len(want.sources):
            assert repr(got.sources[-1]) == repr(want.sources[-1])
        batch.append(RankBlame(len(batch), 0, got))
        own.append(RankBlame(len(own), 0, want))
    assert any(len(p.summary.sources) for p in batch)
    first, worst = batch[2].summary.first_and_worst()  # "spread"
    assert first is not None and worst is not None and first["op_seq"] < worst["op_seq"]
    assert any(len(p.summary.collectives) for p in batch)
    # the run's table of the batch's Arrow is the one of the dicts (names, types, values)
    table = _rows_table(batch, "r")
    assert table.num_rows and table.equals(_rows_table(own, "r"), check_metadata=True)
    # (every column typed: combine reads the table in place, not stored first)
    assert not any(pa.types.is_null(column.type) for column in table.schema)
    run, want_run = combine(batch, "r"), combine(own, "r")
    assert repr(run.sources) == repr(want_run.sources) and run.counts == want_run.counts
    assert repr(run.first) == repr(want_run.first) and run.n_sources == want_run.n_sources
    # the run's local rows kept in no order: the worst and the top ones by blame_rank
    for order in (1, -1):
        kept = combine(batch, "r")
        kept._rows = kept._rows.sort_by([("blame_rank", "ascending" if order > 0 else
                                          "descending")])
        top, worst = kept.top(3), kept.worst
        every, beyond = kept.top(kept.n_sources), kept.top(kept.n_sources + 1)
        assert len(kept.sources) == kept.n_sources > 3
        assert repr(every) == repr(beyond) == repr(kept.sources)
        assert [s["blame_rank"] for s in kept.sources] == list(range(1, kept.n_sources + 1))
        assert repr(top) == repr(kept.sources[:3]) and repr(worst) == repr(kept.sources[0])
        assert repr(kept.sources) == repr(run.sources) and kept.top(3) == top
    # the rows read in place (a typed table) or stored in a table first (as a column of
    # Arrow's null type makes combine do): the same run
    monkeypatch.setattr(pa.types, "is_null", lambda kind: True)
    stored = combine(batch, "r")
    assert repr(stored.sources) == repr(run.sources) and stored.counts == run.counts
    assert repr(stored.first) == repr(run.first) and stored.n_sources == run.n_sources


def _summary(sources: list[dict[str, Any]], collectives: list[dict[str, Any]], *,
             arrow: bool) -> BlameSummary:
    def packed(rows: list[dict[str, Any]]) -> PackedRows:
        if not arrow:
            return PackedRows(rows)
        schema = pa.schema([(k, pa.string() if k in _TEXTS else pa.float64() if k in _REALS
                             else pa.bool_() if k in ("is_module", "collective") else pa.int64())
                            for k in ROW_FIELDS])
        return PackedRows.of_table(pa.Table.from_pylist(rows, schema=schema))

    return BlameSummary(sources=packed(sources), collectives=packed(collectives),
                        floor_factor=2.0, amp_limit=4.0)


_TEXTS = ("op_name", "npu_name", "io", "role", "direction", "err_kind", "floor_source", "verdict",
          "reason", "link", "via")
_REALS = ("input_err", "output_err", "floor", "amplification", "band")


def _blame_row(out_seq: int, collective: bool, verdict: str) -> dict[str, Any]:
    texts = {k: f"{k} {out_seq}" for k in _TEXTS} | {"verdict": verdict, "role": "output"}
    return {k: texts[k] if k in _TEXTS else float(out_seq) / 8 if k in _REALS
            else collective if k == "collective" else False if k == "is_module" else out_seq
            for k in ROW_FIELDS}


def test_a_runs_rows_hold_each_row_once_from_tables_as_from_dicts():
    """A row among both its compare's local sources and its collectives is taken once, from the
    Arrow tables as from the dicts (a collective's row is never local today: written by hand);
    the same out_seq in another compare is another row."""
    r = _blame_row
    flagged = [
        # a collective's row among the sources (taken once); another compare's out_seq 1 kept
        ([r(1, True, "local"), r(2, False, "local")], [r(1, True, "local"), r(3, True, "clean")]),
        ([r(2, False, "local")], [r(1, True, "inherited")]),
        ([], [r(7, True, "clean")]),
        ([r(8, False, "local")], []),
    ]
    # collectives' rows not all of collective ops (not so today): every source is looked at
    unflagged = [([r(5, False, "local")], [r(5, False, "local"), r(6, True, "clean")])]
    for cases, want in ((flagged, [(1, 1), (1, 2), (1, 3), (2, 2), (2, 1), (3, 7), (4, 8)]),
                        (flagged + unflagged, [(1, 1), (1, 2), (1, 3), (2, 2), (2, 1), (3, 7),
                                               (4, 8), (5, 5), (5, 6)])):
        tables = []
        for arrow in (False, True):
            parts = [RankBlame(i, 0, _summary(s, c, arrow=arrow))
                     for i, (s, c) in enumerate(cases)]
            table = _rows_table(parts, "r")
            assert list(zip(table.column("compare_id").to_pylist(),
                            table.column("out_seq").to_pylist(), strict=True)) == want
            assert table.column("floor_factor").to_pylist() == [2.0] * len(want)
            tables.append(table)
        assert tables[1].equals(tables[0], check_metadata=True)


def test_a_runs_rows_of_tables_and_dicts_together_are_one_table():
    """A run whose compares' rows are Arrow tables for some and dicts for others (a directory
    run's pairs compared in batches, and a last few compared on their own) reads every compare's
    rows as one Arrow table, the dicts' made tables of the others' types, not every compare's
    through Python objects: the same table as from dicts alone, and the same run (fails where one
    compare of dicts sends the run down the dicts' path)."""
    r = _blame_row
    cases = [([r(1, True, "local"), r(2, False, "local")], [r(1, True, "local"), r(3, True, "clean")]),
             ([r(2, False, "local")], [r(1, True, "inherited")]),
             ([r(4, False, "local"), r(5, False, "local")], []),
             ([], [r(7, True, "clean")])]
    dicts = [RankBlame(i, 0, _summary(s, c, arrow=False)) for i, (s, c) in enumerate(cases)]
    mixed = [RankBlame(i, 0, _summary(s, c, arrow=i % 2 == 0)) for i, (s, c) in enumerate(cases)]
    assert _arrow_parts(dicts, "r") is None  # dicts alone: their types inferred, as before
    assert _arrow_parts(mixed, "r") is not None
    assert _rows_table(mixed, "r").equals(_rows_table(dicts, "r"), check_metadata=True)
    run, want = combine(mixed, "r"), combine(dicts, "r")
    assert repr(run.sources) == repr(want.sources) and run.counts == want.counts
    assert repr(run.first) == repr(want.first) and run.n_sources == want.n_sources
    # a dict whose value does not fit the tables' column: every compare's rows from dicts
    odd = [RankBlame(9, 0, _summary([{**r(9, False, "local"), "out_seq": "nine"}], [],
                                    arrow=False))]
    assert _arrow_parts(mixed + odd, "r") is None


def test_a_runs_local_rows_are_the_views_whole_rows(monkeypatch):
    """combine fetches of the view only what weighing the run gives (a compare's rank, step and
    label, a collective's input error, verdict and reason, the rank) and takes each local row's
    other columns from the rows the view read, by compare and out_seq: the same table (names,
    types, values) as the view's whole local rows, which it fetches where the rows are stored
    first. Among them collectives judged local by the other ranks, and two compares' rows of
    one out_seq (fails with a row taken by its out_seq alone, or the view's stand-in run id)."""
    def collective(out_seq: int) -> dict[str, Any]:
        return {**_blame_row(out_seq, True, "inherited"),
                "op_name": "Distributed.all_reduce.0.forward", "input_err": 0.0,
                "output_err": 1.0, "amplification": None}

    def local(out_seq: int, err: float) -> dict[str, Any]:
        return {**_blame_row(out_seq, False, "local"), "output_err": err}

    cases = [([local(2, 3.0), local(4, 0.5)], [collective(1)]),
             ([local(1, 2.0)], [collective(3)])]
    parts = [RankBlame(i, 0, _summary(s, c, arrow=True)) for i, (s, c) in enumerate(cases)]
    run_id = "0123456789abcdef0123456789abcdef"  # (the view reads a stand-in: the rows' own back)
    run = combine(parts, run_id)
    monkeypatch.setattr(pa.types, "is_null", lambda kind: True)  # stored: the view's whole rows
    whole = combine(parts, run_id)
    assert run._rows.sort_by("blame_rank").equals(whole._rows.sort_by("blame_rank"),
                                                  check_metadata=True)
    assert run._rows.schema == whole._rows.schema
    assert [(x["rank"], x["out_seq"]) for x in run.sources] == [(0, 2), (1, 1), (0, 1), (1, 3),
                                                                (0, 4)]
    weighed = [x for x in run.sources if x["op_name"].startswith("Distributed.")]
    assert len(weighed) == 2 and all(x["verdict"] == "local" and x["reason"].startswith(
        "error enters in the collective") for x in weighed)
    assert run.counts == whole.counts and repr(run.first) == repr(whole.first)
    assert {x["run_id"] for x in run.sources} == {run_id}


def test_packed_tables_read_back_as_given_their_schema_once():
    """PackedRows.table reads a stream's batches with its schema's one object
    (summary._stream_schema, by the schema's IPC message): each table reads back equal to the
    one given, with its NULLs and its metadata, tables of two schemas each as its own, and a
    table of dictionaries as a stream reader reads it."""
    from msq.blame import summary

    first = pa.table({"out_seq": pa.array([0, 1, None], pa.int64()),
                      "npu_name": pa.array(["a", None, "c"])})
    second = pa.table({"out_seq": pa.array([7], pa.int64()), "npu_name": pa.array(["z"])})
    other = first.replace_schema_metadata({"k": "v"})
    coded = pa.table({"io": pa.array(["input", "output", "input"]).dictionary_encode()})
    tables = [first, second, other, coded, first.slice(0, 0)]
    read = [PackedRows.of_table(table).table() for table in tables]
    for given, got in zip(tables, read, strict=True):
        assert got is not None and got.equals(given, check_metadata=True)
    assert read[2].schema.metadata == {b"k": b"v"} and read[0].schema.metadata is None
    # the stream's schema kept by its message: one entry for the two tables of one schema
    messages = pa.ipc.MessageReader.open_stream(PackedRows.of_table(second)._blob)
    key = messages.read_next_message().metadata.to_pybytes()
    assert summary._SCHEMAS[key] is not None
    assert pa.types.is_dictionary(read[3].schema.field("io").type)
