"""Pairs compared as one batch (msq.pipeline.compute_batch, a pool worker's
msq.pair_tables.compute_pairs_shared) give each pair exactly what its own compare gives.

The batch's pairs share one set of tables, their op_seq and row_seq running on from pair to pair,
each op and row marked with its pair: what relates rows by name or order must stay within a pair.
The pairs here collide on purpose: the same dumps twice with one statistic changed, a bench side
that lacks an op the other pairs' bench sides have (its unmatched reason must not find theirs),
and another model's pair with the very same names. Each pair's files (every byte of the workbook,
CSV and advisor), history rows (result, blame rows and edges), summary and blame must equal those
of the pair compared alone.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import random
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from msq import distributed, pair_tables
from msq.blame.run import BlameRun
from msq.config import Options
from msq.distributed import PairJob, batches
from msq.pair_tables import PairFailure, PairTables, WorkerDatabase
from tests.dumps import bwd, fwd, t, write_dump

OPS = ("Functional.linear", "Functional.relu", "Tensor.__add__", "Functional.layer_norm",
       "Torch.matmul", "Functional.dropout")


def model(seed: int, ops: int = 40) -> dict[str, Any]:
    """A dump's data: ``ops`` forward entries (and a backward one for every third), their
    statistics drawn from ``seed``; the same names for every seed."""
    rng = random.Random(seed)

    def stat() -> dict[str, Any]:
        mx = rng.uniform(0.5, 4.0)
        return t(mx=mx, mn=-rng.uniform(0.5, 4.0), mean=rng.uniform(-0.2, 0.2),
                 norm=rng.uniform(1.0, 9.0))

    data: dict[str, Any] = {}
    for i in range(ops):
        api = OPS[i % len(OPS)]
        call = i // len(OPS)
        data[f"{api}.{call}.forward"] = fwd(stat(), stat(), out=stat())
        if i % 3 == 0:
            data[f"{api}.{call}.backward"] = bwd([stat()], [stat(), stat()])
    return data


def noisy(data: dict[str, Any], seed: int, scale: float) -> dict[str, Any]:
    """The same dump with every statistic moved by up to ``scale`` (relative)."""
    rng = random.Random(seed)
    out = copy.deepcopy(data)
    for entry in out.values():
        for args in entry.values():
            for arg in (args if isinstance(args, list) else args.values()):
                for key in ("Max", "Min", "Mean", "Norm"):
                    arg[key] *= 1 + rng.uniform(-scale, scale)
    return out


def pair(root: Path, name: str, npu: dict[str, Any], bench: dict[str, Any]) -> PairJob:
    n = write_dump(root / name / "npu", npu)
    b = write_dump(root / name / "bench", bench)
    return PairJob((n, n.parent / "stack.json"), (b, b.parent / "stack.json"), f"_{name}", name)


@pytest.fixture
def jobs(tmp_path: Path) -> list[PairJob]:
    base = model(1)
    bench = noisy(base, 2, 0.02)
    changed = copy.deepcopy(bench)  # one statistic far off: its row turns red here only
    changed["Functional.relu.0.forward"]["output"][0]["Max"] = 400.0
    lacking = copy.deepcopy(bench)  # an op the other pairs' benches have, missing here
    del lacking["Torch.matmul.1.forward"]
    lacking["Torch.matmul.9.forward"] = fwd(t(), out=t())  # and one only this bench has,
    lacking = {"Functional.gelu.0.forward": fwd(t(), out=t()), **lacking}  # one before all
    other = model(3)  # another model's numbers under the very same names
    return [pair(tmp_path, "same", base, bench), pair(tmp_path, "changed", base, changed),
            pair(tmp_path, "lacking", base, lacking),
            pair(tmp_path, "other", other, noisy(other, 4, 0.3))]


@pytest.fixture
def opts() -> Options:
    # every pair of one run: one blame run id (each pair's own compare would draw its own)
    return Options(workers=1, record=True, formats=("xlsx", "csv"),
                   blame_run=BlameRun("batch-test"))


@pytest.fixture(autouse=True)
def _no_kept_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setattr(pair_tables, "shared_root", lambda: str(shm))
    WorkerDatabase.discard()
    yield
    WorkerDatabase.discard()


def alone(job: PairJob, opts: Options, out: Path) -> PairTables:
    """The pair compared by itself, in a new database."""
    tables = pair_tables.compute_pair(job, opts, out)
    assert isinstance(tables, PairTables)
    return tables


def parts(data: bytes) -> Any:
    """A file's content: a workbook's parts (its zip entries' times are the clock's), a
    text's bytes with their time stamps left out."""
    if data.startswith(b"PK"):
        with zipfile.ZipFile(io.BytesIO(data)) as book:
            return {name: book.read(name) for name in book.namelist()}
    return re.sub(rb"\d{14}", b"", data)


def contents(tables: PairTables) -> dict[str, Any]:
    """Everything a pair hands the driver, comparable: the files by name (time stamps left
    out of names and texts), the history rows as Python values (NaN as text; in any order), the
    summary and blame as their repr."""
    if tables.shared:
        tables.take_shared()
    files = {re.sub(r"_\d{14}", "", name): parts(data)
             for name, data in tables.files if isinstance(data, bytes)}
    assert len(files) == len(tables.files)
    # the rows in any order: their stored order is their plan's (a batch's may differ)
    history = {name: sorted(map(repr, rows.to_pylist())) for name, rows in tables.history.items()}
    return {"files": files, "history": history, "summary": repr(tables.summary),
            "blame": repr(tables.blame), "mode": tables.mode}


@pytest.mark.parametrize("formats", [("xlsx", "csv"), ("xlsx",)])
def test_each_pair_of_a_batch_is_its_own_compare(jobs, opts, tmp_path, monkeypatch, formats):
    from msq import pipeline
    from msq.export import outputs, xlsx

    opts = dataclasses.replace(opts, formats=formats)
    # a pair's views: made for its CSV, never for its workbook alone (its sheets are slices of
    # the batch's rows, their types the batch queries')
    made: list[int] = []
    pair_views = pipeline.pair_views
    monkeypatch.setattr(pipeline, "pair_views", lambda con, mode, place, types: (
        made.append(place.pair), pair_views(con, mode, place, types))[1])
    # the batch's summaries read the failing rows and the rows' names from stat_result: the
    # same as the statistics mode's failing_rows and result view give
    read: list[tuple[Any, Any]] = []
    batch_results = pipeline.batch_results

    def results(con: Any, *args: Any) -> Any:
        read.extend([sorted(con.execute(f"SELECT {c} FROM {v}").fetchall()) for v in views]
                    for c, views in (("*", ("failing_rows", f"({pipeline.BATCH_FAILING_ROWS})")),
                                     ('out_seq, "NPU Name"', ("result_statistics",
                                                              "stat_result"))))
        return batch_results(con, *args)

    monkeypatch.setattr(pipeline, "batch_results", results)
    # the catalog asked and restored after a pair whose views were made (a workbook-only
    # pair's are not: nothing of it to undo, pair_tables._PairViews)
    ended: list[str] = []

    def counted(name: str) -> Any:
        called = getattr(pipeline, name)
        return lambda *a: (ended.append(name), called(*a))[1]

    for name in ("batch_catalog", "end_batch_pair"):
        monkeypatch.setattr(pipeline, name, counted(name))
    asked: list[str] = []  # the main sheet's rows: fetched once, over the batch (batch_sheets)
    queried = xlsx._c_rows_queried
    monkeypatch.setattr(xlsx, "_c_rows_queried", lambda con, spec, *a, **k: (
        asked.append(spec.query), queried(con, spec, *a, **k))[1])
    facts = outputs._ask_workbook_facts  # what the workbook depends on: asked once a batch
    monkeypatch.setattr(outputs, "_ask_workbook_facts", lambda *a: (asked.append("facts"),
                                                                   facts(*a))[1])
    outs = pair_tables._batch_shared(jobs, opts, tmp_path)  # raises unless batched
    # (stat_result's rows over the batch's tables: a view over stat_rows and the verdicts)
    assert asked.count(pipeline.batch_result_rows("statistics")) == 1
    assert "SELECT * FROM stat_result" not in asked
    # blame's sheet too: once, over batch_blame_rows (blame.export.batch_sheet_query)
    blame = [query for query in asked if "blame_rows" in query]
    assert len(blame) == 1 and "FROM batch_blame_rows" in blame[0], blame
    assert asked.count("facts") == 1
    assert made == (list(range(len(jobs))) if "csv" in formats else []), made
    # (end_batch_pair asks it before its script and after)
    assert ended == ((["batch_catalog"] + ["end_batch_pair", *["batch_catalog"] * 2] * len(jobs))
                     if "csv" in formats else []), ended
    assert len(read) == 2 and all(a == b and a for a, b in read), read
    monkeypatch.undo()
    assert len(outs) == len(jobs)
    batched = [contents(out) for out in outs if isinstance(out, PairTables)]
    assert len(batched) == len(jobs)
    for job, got in zip(jobs, batched, strict=True):
        want = contents(alone(job, opts, tmp_path))
        assert set(got["files"]) == set(want["files"]) and got["files"], job.title
        for name in want["files"]:
            assert got["files"][name] == want["files"][name], (job.title, name)
        assert got["history"] == want["history"], job.title
        assert got == want, job.title
    # blame's sheets differ between pairs, and more than one has rows: a pair given another's
    # slice, ranks or rows would differ from its own compare
    sheets = [got["files"][name]["xl/worksheets/sheet2.xml"] for got in batched
              for name in got["files"] if name.endswith(".xlsx")]
    assert len(sheets) == len(jobs) and len(set(sheets)) >= 3
    assert sum(b"<row r=\"3\"" in sheet for sheet in sheets) >= 2
    # the collisions made a difference: had a pair read another's rows, these would not hold
    summaries = [eval_summary(out) for out in outs]
    assert summaries[0]["red"] != summaries[1]["red"]  # "changed": its far-off Max
    # each pair's first red row is its own (found with its marks' counts, batch_results)
    reds = [summary["first_red"] for summary in summaries if summary["red"]]
    assert len(reds) >= 2 and len(set(map(repr, reds))) >= 2, reds
    assert summaries[2]["unmatched_npu"] > 0 and summaries[2]["unmatched_bench"] > 0
    assert summaries[0]["unmatched_npu"] == summaries[0]["unmatched_bench"] == 0
    reasons = summaries[2]["unmatched_reasons"]
    assert any(why == "call" for _, why in reasons), reasons  # matmul 1 lacks, others have it


def eval_summary(out: PairTables | PairFailure) -> dict[str, Any]:
    assert isinstance(out, PairTables)
    return out.summary


def test_a_sheet_that_cannot_be_a_slice_makes_its_pairs_views(jobs, opts, tmp_path, monkeypatch):
    """Without the C renderer a sheet is rendered by its own query over the pair's views: a
    workbook-only batch (whose views are made on demand) makes them for it, once a pair, and
    each pair is its own compare."""
    from msq import pipeline
    from msq.export import xlsx

    opts = dataclasses.replace(opts, formats=("xlsx",))
    made: list[int] = []
    pair_views = pipeline.pair_views
    monkeypatch.setattr(pipeline, "pair_views", lambda con, mode, place, types: (
        made.append(place.pair), pair_views(con, mode, place, types))[1])
    monkeypatch.setattr(xlsx, "_sheetxml", None)
    ended: list[int] = []  # and undone after each pair (pair_tables._PairViews)
    end_batch_pair = pipeline.end_batch_pair
    monkeypatch.setattr(pipeline, "end_batch_pair", lambda con, before: (
        ended.append(len(made)), end_batch_pair(con, before))[1])
    outs = pair_tables._batch_shared(jobs, opts, tmp_path)  # raises unless batched
    assert made == list(range(len(jobs)))
    assert ended == list(range(1, len(jobs) + 1)), ended
    for job, out in zip(jobs, outs, strict=True):
        assert isinstance(out, PairTables)
        assert contents(out) == contents(alone(job, opts, tmp_path)), job.title


def test_a_kept_database_compares_alone_exactly_after_a_batch(jobs, opts, tmp_path):
    """The worker's kept database is made as new after a batch: a pair compared in it alone
    (as the next task may) gives its own compare's outputs."""
    pair_tables._batch_shared(jobs[:2], opts, tmp_path)
    kept = pair_tables.compute_pair(jobs[2], opts, tmp_path, kept=True)
    assert isinstance(kept, PairTables)
    assert contents(kept) == contents(alone(jobs[2], opts, tmp_path))


def test_a_kept_database_keeps_a_batchs_views_for_the_next_batch(jobs, opts, tmp_path,
                                                                 monkeypatch):
    """The views a batch creates beside the database's own (its mode's, unmatched_reasons) stay
    for the next batch, which creates none of them again (the same statements) and whose pairs
    are their own compares; a view a batch replaced is dropped by the reset (never read by the
    next batch) and created again."""
    import duckdb

    pair_tables._batch_shared(jobs[:2], opts, tmp_path)
    kept = WorkerDatabase.get(opts)
    assert kept is not None
    mode = {"failing_rows", "stat_rows", "stat_result", "result_statistics"}
    views = dict(kept._con.execute(WorkerDatabase._VIEWS).fetchall())
    assert mode <= set(views) and "unmatched_reasons" not in views  # every row matched there
    created: list[str] = []
    execute = duckdb.DuckDBPyConnection.execute

    def noted(con: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(query, str):
            created.extend(re.findall(r'CREATE OR REPLACE VIEW "(\w+)"', query))
        return execute(con, query, *args, **kwargs)

    monkeypatch.setattr(duckdb.DuckDBPyConnection, "execute", noted)
    outs = pair_tables._batch_shared(jobs[1:3], opts, tmp_path)  # raises unless batched
    assert not mode & set(created), created
    assert created.count("unmatched_reasons") == 1  # pair "lacking" has unmatched rows
    created.clear()
    outs += pair_tables._batch_shared(jobs[2:], opts, tmp_path)
    assert not (mode | {"unmatched_reasons"}) & set(created), created
    monkeypatch.undo()
    for job, out in zip([*jobs[1:3], *jobs[2:]], outs, strict=True):
        assert isinstance(out, PairTables)
        assert contents(out) == contents(alone(job, opts, tmp_path)), job.title
    # a view a batch replaced: dropped at the reset, not kept
    con = kept.take(1)
    con.execute("CREATE OR REPLACE VIEW stat_rows AS SELECT 1 AS replaced")
    con.close()
    kept.reset()
    assert "stat_rows" not in dict(kept._con.execute(WorkerDatabase._VIEWS).fetchall())
    again = pair_tables._batch_shared(jobs[2:], opts, tmp_path)
    for job, out in zip(jobs[2:], again, strict=True):
        assert isinstance(out, PairTables)
        assert contents(out) == contents(alone(job, opts, tmp_path)), job.title


def test_a_batch_plans_its_verdicts_without_its_skipped_passes_and_resets_them(
        jobs, opts, tmp_path, monkeypatch):
    """A batch's verdicts are planned without the passes of pipeline.BATCH_PLAN_SKIPS (DuckDB's
    names: it refuses others), its other statements with every pass; the kept database's
    setting (DuckDB's, global) is back after the batch, and after a statement that fails."""
    from msq import db, pipeline

    skips = pipeline.BATCH_PLAN_SKIPS["verdicts"]
    assert skips
    seen: dict[str, str] = {}
    materialize = db.materialize

    def noted(con: Any, view: str, select: str | None = None) -> None:
        seen[view] = db.scalar(con, "SELECT current_setting('disabled_optimizers')")
        materialize(con, view, select)

    monkeypatch.setattr(pipeline.db, "materialize", noted)
    outs = pair_tables._batch_shared(jobs[:2], opts, tmp_path)  # raises unless batched
    assert all(isinstance(out, PairTables) for out in outs)
    assert seen["verdicts"] == ",".join(skips), seen
    assert all(setting == "" for view, setting in seen.items() if view != "verdicts"), seen
    kept = WorkerDatabase.get(opts)
    assert kept is not None
    con = kept.take(1)
    try:
        assert db.scalar(con, "SELECT current_setting('disabled_optimizers')") == ""
        with pytest.raises(RuntimeError, match="failed"), \
                pipeline.planned_without(con, skips):
            assert db.scalar(con, "SELECT current_setting('disabled_optimizers')") != ""
            raise RuntimeError("failed")
        assert db.scalar(con, "SELECT current_setting('disabled_optimizers')") == ""
    finally:
        con.close()


def test_a_batchs_verdicts_are_its_rows_that_may_say_something(jobs, opts, tmp_path):
    """A statistics batch stores the verdicts of its rows that may say something (a rule, dtypes
    that differ, an unmatched reason), judged for those rows alone (the rows whose error may
    meet a rule, their windows' inputs: msq.pipeline.BATCH_VERDICTS_EDITS), each as the view
    gives it for every row, and among them every row with a reason, a mark or an unmatched
    reason (red, yellow by its inputs' error, unmatched): its readers give the same for a row
    they do not find as for a row of none (the outputs: the test above)."""
    from msq import db, pipeline
    from msq.config import SingleInput

    # an output 5 % off where its inputs are equal: yellow ('error grows'), by its window's
    # inputs' error
    base = model(1)
    base["Functional.relu.0.forward"] = fwd(t(mx=2.0), out=t(mx=2.0, mn=-2.0))
    grown = copy.deepcopy(base)
    grown["Functional.relu.0.forward"]["output"][0]["Max"] = 2.1
    kept = WorkerDatabase.get(opts)
    assert kept is not None
    inps = [SingleInput(job.npu[0], job.bench[0], job.npu[1])
            for job in [*jobs, pair(tmp_path, "grown", base, grown)]]
    con, mode, _ = pipeline.compute_batch(inps, opts, kept)
    assert mode == "statistics"
    stored = con.execute("SELECT * FROM verdicts").fetchall()
    # the view over every row, reading row_error as a single compare's (the columns a batch's
    # row_error leaves out, msq.pipeline.batch_row_error, with them)
    full = pipeline.bound_row_error(mode)
    every = con.execute(f"WITH row_error AS ({full}) SELECT * FROM (\n"
                        + db.sql_file("compare/rules/default/verdicts.sql").body + "\n)").fetchall()
    saying = [row for row in every if row[3] != "" or any(v is not None for v in (row[1], *row[4:]))]
    assert {"red", "yellow"} <= {row[1] for row in saying}
    assert any(row[4] is not None for row in saying)  # an unmatched row
    assert set(saying) <= set(stored) <= set(every)
    assert len(stored) < len(every) == db.scalar(con, "SELECT count(*) FROM compare_rows")


def test_a_batchs_row_error_is_a_single_compares_without_what_verdicts_alone_reads(
        jobs, opts, tmp_path):
    """A statistics batch's row_error holds the columns of a single compare's but those that
    its verdicts read from the tensors rows of the rows it judges (msq.pipeline.VERDICTS_ONLY),
    with the same rows (blame reads it too)."""
    from msq import db, pipeline
    from msq.config import SingleInput

    kept = WorkerDatabase.get(opts)
    assert kept is not None
    inps = [SingleInput(job.npu[0], job.bench[0], job.npu[1]) for job in jobs]
    con, mode, _ = pipeline.compute_batch(inps, opts, kept)
    columns = [name for (name, *_) in con.execute("DESCRIBE row_error").fetchall()]
    full = pipeline.bound_row_error(mode)
    every = [name for (name, *_) in con.execute(f"DESCRIBE {full}").fetchall()]
    assert set(pipeline.VERDICTS_ONLY) <= set(every)
    assert columns == [name for name in every if name not in pipeline.VERDICTS_ONLY]
    listed = ", ".join(db.quote_ident(name) for name in columns)
    assert db.scalar(con, f"SELECT count(*) FROM (SELECT {listed} FROM ({full}) "
                          "EXCEPT ALL SELECT * FROM row_error)") == 0
    assert db.scalar(con, "SELECT count(*) FROM row_error") == \
        db.scalar(con, "SELECT count(*) FROM compare_rows") > 0


def test_a_batchs_stat_result_is_a_view_over_its_stored_rows(jobs, opts, tmp_path):
    """A statistics batch stores stat_judged (msq.pipeline.BATCH_STORED: the rows' cells,
    numbers and names, and their verdicts' reason, warn and unmatched reason) and not
    stat_result, which stays a view over it: its four texts of the kind, the verdict and the
    stack are made by its readers, not stored (its rows: the test of each pair as its own
    compare above, whose single compares store stat_result)."""
    from msq import db, pipeline
    from msq.config import SingleInput

    kept = WorkerDatabase.get(opts)
    assert kept is not None
    inps = [SingleInput(job.npu[0], job.bench[0], job.npu[1]) for job in jobs]
    con, _, _ = pipeline.compute_batch(inps, opts, kept)
    kinds = dict(con.execute(
        "SELECT table_name, 'table' FROM duckdb_tables() WHERE database_name = current_database() "
        "UNION ALL SELECT view_name, 'view' FROM duckdb_views() "
        "WHERE database_name = current_database() AND NOT internal").fetchall())
    assert (kinds["stat_judged"], kinds["stat_result"]) == ("table", "view")
    stored = {name for (name, *_) in con.execute("DESCRIBE stat_judged").fetchall()}
    texts = {"Result", "Err_message", "Reason", "NPU_Stack_Info"}
    assert not (texts | {"stack", "flagged"}) & stored  # (no -s in a batch: its stack is 'None')
    shown = [name for (name, *_) in con.execute("DESCRIBE stat_result").fetchall()]
    assert texts <= set(shown)
    assert db.scalar(con, "SELECT count(*) FROM stat_result") == \
        db.scalar(con, "SELECT count(*) FROM compare_rows") > 0


def test_a_broken_pair_fails_alone_and_loses_none_of_the_others(jobs, opts, tmp_path):
    """A batch with a broken dump is compared pair by pair: that pair fails with its own
    message, every other pair is its own compare."""
    broken = jobs[1].npu[0]
    broken.write_text(broken.read_text()[:-40])
    outs = pair_tables.compute_pairs_shared(jobs, opts, tmp_path)
    assert [type(out).__name__ for out in outs] == [
        "PairTables", "PairFailure", "PairTables", "PairTables"]
    failed = outs[1]
    assert isinstance(failed, PairFailure) and failed.message.startswith("changed: ")
    for job, out in zip(jobs, outs, strict=True):
        if isinstance(out, PairTables):
            assert contents(out) == contents(alone(job, opts, tmp_path)), job.title


def test_a_batch_failing_after_its_first_pairs_leaves_no_file(jobs, opts, tmp_path,
                                                             monkeypatch):
    """A batch that fails after its first pairs were left for the driver (their rows in shared
    folders, their files in the output folder under temporary names) removes them all; its
    pairs compared one by one then leave each file once, unpublished, and nothing else."""
    import os

    out, shm = tmp_path / "out", tmp_path / "shm"
    out.mkdir()
    done: list[list[str]] = []
    pair = pair_tables._batch_pair_shared

    def third_fails(*args: Any, **kwargs: Any) -> PairTables:
        if len(done) == 2:
            raise RuntimeError("the third pair fails")
        tables = pair(*args, **kwargs)
        done.append([name for name, _ in tables.files])
        return tables

    monkeypatch.setattr(pair_tables, "_batch_pair_shared", third_fails)
    with pytest.raises(RuntimeError, match="third pair"):
        pair_tables._batch_shared(jobs, opts, out)
    assert [len(files) for files in done] == [4, 4]  # workbook, CSV, blame's CSV, advisor
    assert list(out.iterdir()) == [] and list(shm.iterdir()) == []
    outs = pair_tables.compute_pairs_shared(jobs, opts, out)
    assert all(isinstance(o, PairTables) for o in outs)
    left = sorted(str(data) for o in outs for _, data in o.files)
    assert left == sorted(str(p) for p in out.iterdir())
    assert all(Path(p).name.endswith(f".{os.getpid()}.tmp") for p in left)
    for o in outs:
        o.release()
    assert list(out.iterdir()) == []
    for o in outs:
        pair_tables.shutil.rmtree(o.shared, ignore_errors=True)


def test_a_batch_leaves_every_pairs_rows_before_its_first_workbook(jobs, opts, tmp_path,
                                                                   monkeypatch):
    """A batch's history rows are written into its pairs' shared folders as each table is
    made, before its first pair's files are rendered, and let go: the worker does not hold
    them beside the sheets' rows and the renderer's buffers (a worker's peak memory). Each pair
    hands over its folder, its rows those of its own compare."""
    out, shm = tmp_path / "out", tmp_path / "shm"
    out.mkdir()
    seen: list[list[str]] = []
    staged = pair_tables._staged_files

    def looking(*args: Any, **kwargs: Any) -> Any:
        seen.append(sorted(p.stem for p in shm.glob("*/*.arrow")))
        return staged(*args, **kwargs)

    monkeypatch.setattr(pair_tables, "_staged_files", looking)
    outs = pair_tables._batch_shared(jobs, opts, out)
    tables = ["blame_edges", "blame_rows", "blame_runs", "result_rows"]
    assert seen[0] == sorted(tables * len(jobs))
    for job, got in zip(jobs, outs, strict=True):
        assert isinstance(got, PairTables) and got.shared and not got.history
        assert sorted(got.shared_tables) == tables
        assert contents(got) == contents(alone(job, opts, tmp_path)), job.title


def test_a_batch_whose_database_cannot_be_reset_leaves_no_file(jobs, opts, tmp_path,
                                                               monkeypatch):
    """A batch whose kept database cannot be made as new after its pairs raises (its pairs are
    compared one by one then): the files its pairs left for the driver are removed with it."""
    out = tmp_path / "out"
    out.mkdir()

    def broken(self: Any) -> None:
        raise RuntimeError("the catalog is not as new")

    assert pair_tables.WorkerDatabase.get(opts) is not None  # kept, before its reset breaks
    monkeypatch.setattr(pair_tables.WorkerDatabase, "reset", broken)
    with pytest.raises(RuntimeError, match="not as new"):
        pair_tables._batch_shared(jobs[:2], opts, out)
    assert list(out.iterdir()) == []


def test_options_whose_views_are_not_pair_safe_compare_one_by_one(jobs, tmp_path):
    """--compat (msprobe's walk over one pair's rows), -s (stacks by op name) and a reference
    noise run (blame's bands by row name) are not batched: the batch refuses, and
    compute_pairs_shared compares each pair alone."""
    from msq.blame.noise import bands_table
    from msq.pipeline import NotBatchable

    bands = bands_table([(None, None, "Functional.relu.0.forward.output.0", 0.5)])
    for opts in (Options(workers=1, record=False, compat="msprobe-1.1"),
                 Options(workers=1, record=False, stack_mode=True),
                 Options(workers=1, record=False, blame_run=BlameRun("noise", bands, "test"))):
        with pytest.raises(NotBatchable):
            pair_tables._batch_shared(jobs[:2], opts, tmp_path)
        outs = pair_tables.compute_pairs_shared(jobs[:2], opts, tmp_path)
        assert all(isinstance(out, PairTables) for out in outs)
        for job, out in zip(jobs[:2], outs, strict=True):
            assert contents(out) == contents(alone(job, opts, tmp_path)), job.title
#: A module every op of :func:`chain` sits in (its construct.json), recorded after them.
MODULE = "Module.block.Block.forward.0"


def chain(seed: int, ops: int = 24) -> dict[str, Any]:
    """A dump whose ops feed each other: each op's first input is the previous op's output (the
    same statistics: blame links them), its second an external one; a backward entry for every
    third op; and a module (:data:`MODULE`) around them all, from the first input to the last
    output. The same names for every seed."""
    rng = random.Random(seed)

    def stat() -> dict[str, Any]:
        return t(mx=rng.uniform(0.5, 4.0), mn=-rng.uniform(0.5, 4.0),
                 mean=rng.uniform(-0.2, 0.2), norm=rng.uniform(1.0, 9.0))

    data: dict[str, Any] = {}
    x = first = stat()
    for i in range(ops):
        api, call = OPS[i % len(OPS)], i // len(OPS)
        out = stat()
        data[f"{api}.{call}.forward"] = fwd(copy.deepcopy(x), stat(), out=out)
        if i % 3 == 0:
            data[f"{api}.{call}.backward"] = bwd([stat()], [stat(), stat()])
        x = out
    data[MODULE] = fwd(copy.deepcopy(first), out=copy.deepcopy(x))
    return data


def chain_pair(root: Path, name: str, npu: dict[str, Any], bench: dict[str, Any]) -> PairJob:
    """:func:`pair` with both sides' construct.json putting every op inside :data:`MODULE`."""
    job = pair(root, name, npu, bench)
    construct = json.dumps({**{op: MODULE for op in npu if op != MODULE}, MODULE: None})
    for side in (job.npu[0], job.bench[0]):
        side.with_name("construct.json").write_text(construct)
    return job


@pytest.fixture
def linked_jobs(tmp_path: Path) -> list[PairJob]:
    """Pairs whose blame collides: three share the NPU side (every key, name and module of one
    pair is also another's), the second's bench is far off at one op (a large error early in
    the batch), the last is another model under the same names with larger errors."""
    base = chain(5)
    far = noisy(base, 6, 0.01)
    far["Functional.relu.0.forward"]["output"][0]["Max"] = 400.0
    other = chain(7)
    return [chain_pair(tmp_path, "quiet", base, noisy(base, 6, 0.01)),
            chain_pair(tmp_path, "far", base, far),
            chain_pair(tmp_path, "loud", base, noisy(base, 8, 0.2)),
            chain_pair(tmp_path, "other", other, noisy(other, 9, 0.3))]


def blame_of(out: PairTables) -> dict[str, Any]:
    """A pair's blame as the driver gets it: its summary, its history rows, its CSV."""
    got = contents(out)
    return {"blame": got["blame"], "rows": got["history"]["blame_rows"],
            "edges": got["history"]["blame_edges"],
            "csv": {name: data for name, data in got["files"].items()
                    if name.startswith("blame")}}


def test_each_pair_of_a_batch_gets_its_own_blame(linked_jobs, opts, tmp_path):
    """Blame is computed once for the batch (msq.blame.run.batch_blame): each pair's blame rows,
    edges, summary and blame CSV are those of its own compare, though its keys, op names and
    module nesting are all another pair's too."""
    outs = pair_tables._batch_shared(linked_jobs, opts, tmp_path)
    for job, out in zip(linked_jobs, outs, strict=True):
        assert isinstance(out, PairTables), job.title
        want = alone(job, opts, tmp_path)
        assert want.blame.linked > 0 and want.blame.counts, job.title  # links, verdicts
        assert blame_of(out) == blame_of(want), job.title
        assert contents(out) == contents(want), job.title


#: Each of blame's relations within a pair, taken out of its view (file, text, without it): the
#: key windows and joins of blame_edges (the pair is in every key), the ``prior`` window of
#: blame_ops, its backward-to-forward and module name joins.
PAIR_MUTATIONS = {
    "keys": ("blame_keys", ", pair) END AS", ") END AS"),
    "prior": ("blame_ops", "PARTITION BY o.pair ", ""),
    "forward": ("blame_ops", "f.pair = b.pair\n    AND ", ""),
    "module": ("blame_ops", "n.pair = m.pair AND ", ""),
}


@pytest.mark.parametrize("mutation", sorted(PAIR_MUTATIONS))
def test_blame_without_the_pair_mixes_the_pairs(linked_jobs, opts, tmp_path, monkeypatch,
                                                mutation):
    """The test above fails when blame's views relate rows across pairs: each of the pair's
    conditions taken out (:data:`PAIR_MUTATIONS`; a single compare's blame stays the same, as it
    has one pair) makes some pair's blame another than its own compare's."""
    from msq import sqlfiles

    view, text, without = PAIR_MUTATIONS[mutation]
    key = (sqlfiles.sql_root, "compare/blame")
    files = sqlfiles.sql_files("compare/blame")
    changed = []
    for file in files:
        if file.name == view:
            assert text in file.text, (view, text)
            file = dataclasses.replace(file, text=file.text.replace(text, without))
        changed.append(file)
    monkeypatch.setitem(sqlfiles._SHIPPED, key, tuple(changed))
    WorkerDatabase.discard()  # its views made again, from the changed files
    outs = pair_tables._batch_shared(linked_jobs, opts, tmp_path)
    differ = [job.title for job, out in zip(linked_jobs, outs, strict=True)
              if isinstance(out, PairTables)
              and blame_of(out) != blame_of(alone(job, opts, tmp_path))]
    assert differ, mutation


def test_batches_cut_jobs_in_order(tmp_path):
    """Pool tasks: consecutive pairs, up to seven a task, fewer when the pairs are few; a large
    pair goes alone; each worker's last task half as large (rounded up), so that the workers
    finish close to one another, and no single-pair tasks (each task pays a fixed cost)."""
    small = write_dump(tmp_path / "small", {"Functional.relu.0.forward": fwd(t(), out=t())})
    jobs = [PairJob((small, None), (small, None), f"p{i}", "") for i in range(64)]
    job = jobs[0]
    cut = list(batches(jobs, 2))
    assert [len(b) for b in cut] == [7] * 8 + [4, 4]
    assert [j for b in cut for j in b] == jobs  # every job once, in order
    assert [len(b) for b in batches(jobs, 4)] == [4] * 14 + [2] * 4
    assert [len(b) for b in batches([job] * 16, 2)] == [2] * 7 + [1] * 2
    assert [len(b) for b in batches([job] * 7, 2)] == [1] * 7
    assert [b for bs in batches([job] * 10, 1) for b in bs] == [job] * 10
    missing = PairJob((tmp_path / "none.json", None), (small, None), "", "")
    assert [len(b) for b in batches([job] * 3 + [missing] + [job] * 5, 1)] == \
        [2, 1, 1, 2, 2, 1]


def test_a_batch_holds_at_most_its_bytes_of_dumps(tmp_path, monkeypatch):
    """A batch's pairs are in one worker's database at once: its dump.json bytes together stay
    under BATCH_MAX_BYTES (fewer pairs a task when they are larger), a pair above it alone."""
    small = write_dump(tmp_path / "small", {"Functional.relu.0.forward": fwd(t(), out=t())})
    big = write_dump(tmp_path / "big", {f"Functional.relu.{i}.forward": fwd(t(), out=t())
                                        for i in range(40)})
    pair = 2 * small.stat().st_size
    assert 2 * big.stat().st_size > 5 * pair
    job, large = PairJob((small, None), (small, None), "", ""), PairJob((big, None), (big, None),
                                                                        "", "")
    monkeypatch.setattr(distributed, "BATCH_MAX_BYTES", 5 * pair // 2)  # two pairs, not three
    # tasks of two (what the bytes allow), the last ones half as large
    assert [len(b) for b in batches([job] * 64, 2)] == [2] * 31 + [1, 1]
    cut = list(batches([job] * 3 + [large] + [job] * 4, 1))
    assert [len(b) for b in cut] == [2, 1, 1, 2, 1, 1]
    assert cut[2] == [large]


def test_the_last_tasks_are_cut_from_the_tasks_the_bytes_allow(tmp_path, monkeypatch):
    """Where the bytes allow fewer pairs a task than BATCH_PAIRS (root-8x8-5000: six of its 9.8
    MB pairs in 64 MB), the tail is cut from tasks of that many: its 64 pairs in ten tasks of
    six and two of two, each worker 32 pairs, not 6 x 9, 2, 4, 4 (one worker 34, the other 30:
    it idled at the run's end for four pairs' time)."""
    small = write_dump(tmp_path / "small", {"Functional.relu.0.forward": fwd(t(), out=t())})
    pair = 2 * small.stat().st_size
    job = PairJob((small, None), (small, None), "", "")
    monkeypatch.setattr(distributed, "BATCH_MAX_BYTES", 13 * pair // 2)  # six pairs, not seven
    assert [len(b) for b in batches([job] * 64, 2)] == [6] * 10 + [2, 2]
    # pairs left after whole rounds: one task a worker, none above half a task
    assert [len(b) for b in batches([job] * 70, 2)] == [6] * 10 + [3, 3, 2, 2]
    # none left: each worker's last task half as large, as before
    assert [len(b) for b in batches([job] * 48, 2)] == [6] * 7 + [3, 3]



def retyped(data: dict[str, Any], every: int, dtype: str, shape: list[int] | None = None,
            ) -> dict[str, Any]:
    """``data`` with every ``every``-th float32 tensor of its forward entries given ``dtype``
    (and ``shape``): ops whose structures differ from the other side's, paired or not row by
    row."""
    out = copy.deepcopy(data)
    k = 0
    for name, entry in out.items():
        if not name.endswith(".forward"):
            continue
        for args in entry.values():
            for arg in (args if isinstance(args, list) else args.values()):
                if arg.get("dtype") != "torch.float32":
                    continue
                k += 1
                if k % every == 0:
                    arg["dtype"] = dtype
                    if shape is not None:
                        arg["shape"] = shape
    return out


def with_flags(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with an op of a bool argument and a bool tensor (bool statistics)."""
    return {**data, "Functional.dropout.9.forward": fwd(
        t(), out=t(), training={"type": "bool", "value": True},
        mask=t(dtype="torch.bool", mx=True, mn=False, mean=None, norm=None))}


def test_a_batch_pairs_ops_of_other_dtypes_as_each_pair_alone(tmp_path, opts):
    """Ops whose rows' structures differ are tested row by row in a batch as in a pair's own
    compare (op_candidates' test under a batch's settings, msq.pipeline.CANDIDATES_BATCH): float
    precisions pair, other dtypes and shapes do not (bool statistics among the rows)."""
    base = with_flags(model(5))
    jobs = [pair(tmp_path, "bf16", base, retyped(with_flags(noisy(model(5), 6, 0.01)), 3,
                                                 "torch.bfloat16")),
            pair(tmp_path, "int", base, retyped(base, 4, "torch.int32")),
            pair(tmp_path, "shape", retyped(base, 5, "torch.float16"),
                 retyped(base, 5, "torch.float16", [7])),
            pair(tmp_path, "flags", with_flags(model(7)), base)]
    outs = pair_tables._batch_shared(jobs, opts, tmp_path)  # raises unless batched
    summaries = [eval_summary(out) for out in outs]
    assert summaries[0]["unmatched_npu"] == 0  # bf16 against fp32: paired
    assert summaries[1]["unmatched_npu"] > 0 and summaries[2]["unmatched_npu"] > 0
    for job, out in zip(jobs, outs, strict=True):
        assert isinstance(out, PairTables)
        assert contents(out) == contents(alone(job, opts, tmp_path)), job.title


@pytest.mark.parametrize("uncoded", [False, True])
def test_a_batch_hands_its_rows_kind_verdict_and_result_as_enums(jobs, opts, tmp_path, uncoded,
                                                                  monkeypatch):
    """A batch's result rows hand the driver each row's kind, verdict and result as ENUMs
    (Arrow dictionaries: DuckDB exports a byte a row, not a text; msq.pair_tables.CODED_HISTORY,
    CODED_RESULT), each row's value its own compare's text, which the driver keys by the
    dictionary's entries. A result not among its ENUM's texts (``uncoded``: an ENUM of '' alone
    here, as --compat's or a user's result_statistics may give others) stops the coded SELECT,
    and the rows come with the result's texts."""
    import pyarrow as pa

    if uncoded:
        (text, made), = pair_tables.CODED_RESULT.items()
        made = made.replace(" WHEN 'Warning' THEN 'Warning'::", " WHEN 'x' THEN 'x'::")
        monkeypatch.setattr(pair_tables, "CODED_RESULT", {text: made.replace(
            " WHEN 'N/A' THEN 'N/A'::", " WHEN 'y' THEN 'y'::")})
    outs = pair_tables._batch_shared(jobs, opts, tmp_path)
    assert len(outs) == len(jobs)
    results = set()
    for job, out in zip(jobs, outs, strict=True):
        assert isinstance(out, PairTables)
        out.take_shared()
        rows = out.history["result_rows"]
        want = alone(job, opts, tmp_path)
        want.take_shared()
        theirs = want.history["result_rows"]
        for column in ("kind", "verdict", "result"):
            assert pa.types.is_dictionary(rows.schema.field(column).type) == (
                not uncoded or column != "result"), column
            assert not pa.types.is_dictionary(theirs.schema.field(column).type), column
            # in any order (a batch's plan may differ): by out_seq
            got = dict(zip(rows.column("out_seq").to_pylist(), rows.column(column).to_pylist()))
            assert got == dict(zip(theirs.column("out_seq").to_pylist(),
                                   theirs.column(column).to_pylist())), (job.title, column)
            assert {"matched", "pass", ""} & set(got.values())
        results |= set(rows.column("result").to_pylist())
    assert results == {"", "Warning", "N/A"}  # every text: rows of each (uncoded: stopped)


def batch_history_rows(con: Any, mode: str, parts: list[Any], tmp_path: Path,
                       ) -> list[dict[str, Any]]:
    """Each pair's history rows of a batch by table, as _batch_history_rows leaves them in
    the pairs' folders (read back as the driver reads them)."""
    import pyarrow as pa

    folders = []
    for k in range(len(parts)):
        folder = tmp_path / f"rows{k}"
        folder.mkdir()
        folders.append(str(folder))
    left = pair_tables._batch_history_rows(con, mode, [part.place for part in parts], folders)
    out = []
    for rows in left:
        assert rows is not None
        out.append({table: pa.ipc.open_file(pa.memory_map(f"{rows.folder}/{table}.arrow"))
                    .read_all() for table in rows.tables})
    return out


@pytest.mark.parametrize("formats", [("xlsx", "csv"), ("xlsx",)])
def test_a_batchs_blame_rows_names_are_their_output_rows(linked_jobs, opts, tmp_path, formats):
    """Each blame row's op and NPU name are those of its output row (blame_tensors'
    ``r.npu_row = t.row_seq``: its NPU tensor row and that row's op), the names its result row
    gets in the history: so a batch hands its blame rows over without names, and the driver
    takes them from the output rows (msq.pair_tables._batch_history_rows). A batch whose pairs
    read no view of blame_rows (a workbook alone) stores the names on the rows it reads them of
    alone (msq.blame.compute.NAMED_ROWS: the local rows, the collective ops'); else on every row."""
    from msq import pipeline
    from msq.blame.compute import NAMED_ROWS
    from msq.config import SingleInput

    opts = dataclasses.replace(opts, formats=formats)
    collective = chain(11)  # a collective op among the ops, with an error of its own
    collective["Distributed.all_reduce.0.forward"] = fwd(t(mx=1.0), out=t(mx=1.0))
    far = copy.deepcopy(collective)
    far["Distributed.all_reduce.0.forward"]["output"][0]["Max"] = 3.0
    jobs = [*linked_jobs, chain_pair(tmp_path, "collective", collective, far)]
    kept = WorkerDatabase.get(opts)
    assert kept is not None
    inps = [SingleInput(job.npu[0], job.bench[0], job.npu[1]) for job in jobs]
    con, mode, parts = pipeline.compute_batch(inps, opts, kept)
    # each row's names found through its compared row, as blame_tensors and blame_ops find them
    found = ("SELECT b.out_seq, o.op_name, t.disp_name AS npu_name, "
             f"coalesce({NAMED_ROWS}, false) AS named, b.op_name AS op, b.npu_name AS npu "
             "FROM blame_rows b JOIN compare_rows r USING (out_seq) "
             "JOIN tensors t ON t.side = 'npu' AND t.row_seq = r.npu_row "
             "JOIN ops o ON o.side = 'npu' AND o.op_seq = t.op_seq ORDER BY b.out_seq")
    rows = con.execute(found).fetchall()
    assert len(rows) == con.execute("SELECT count(*) FROM blame_rows").fetchall()[0][0] > 0
    assert {verdict for (verdict,) in con.execute("SELECT verdict FROM blame_rows WHERE "
                                                  "collective OR verdict = 'local'").fetchall()}
    every = "csv" in formats
    for _, op_name, npu_name, named, op, npu in rows:
        assert (op, npu) == ((op_name, npu_name) if every or named else (None, None))
    assert any(named for *_, named, _, _ in rows) and not all(named for *_, named, _, _ in rows)
    # the history's result rows: the same names by out_seq; its blame rows: none
    history = batch_history_rows(con, mode, parts, tmp_path)
    theirs = {}
    for part, tables in zip(parts, history, strict=True):
        assert not {"op_name", "npu_name"} & set(tables["blame_rows"].column_names)
        assert tables["blame_rows"].num_rows
        result = tables["result_rows"].select(["out_seq", "op_name", "npu_name"]).to_pylist()
        theirs.update({part.place.out_range[0] + row["out_seq"]: (row["op_name"], row["npu_name"])
                       for row in result})
    assert all(theirs[out_seq] == (op_name, npu_name) for out_seq, op_name, npu_name, *_ in rows)


def test_a_batchs_workbook_makes_its_result_and_err_message_of_warn(jobs, opts, tmp_path,
                                                                     monkeypatch):
    """A batch's main sheet reads stat_judged's warn (msq.pipeline.STAT_RESULT_WARN) and the
    unmatched rows' Err_message, and its C renderer makes Result and Err_message of them
    (chosen columns, msq.export.outputs.CHOSEN_TEXTS), not of the texts of every row; each
    pair's workbook is still its own compare's (which reads the texts), a warned row's and an
    unmatched row's among them."""
    from msq.export import outputs, xlsx

    opts = dataclasses.replace(opts, formats=("xlsx",))
    kinds: list[dict[str, str]] = []
    rows_of = xlsx._c_rows_of

    def noted(n: int, got: Any, n_columns: int, *args: Any, **kwargs: Any) -> Any:
        rows = rows_of(n, got, n_columns, *args, **kwargs)
        if rows is not None and n_columns == len(outputs.columns_for("statistics", False, False)):
            kinds.append({c: rows.columns[outputs.columns_for("statistics", False, False).index(c)][0]
                          for c in ("Result", "Err_message", "Reason")})
        return rows

    monkeypatch.setattr(xlsx, "_c_rows_of", noted)
    outs = pair_tables._batch_shared(jobs, opts, tmp_path)  # raises unless batched
    monkeypatch.undo()
    assert kinds == [{"Result": "k", "Err_message": "k", "Reason": "t"}], kinds
    texts = set()
    for job, out in zip(jobs, outs, strict=True):
        assert isinstance(out, PairTables)
        got = contents(out)
        assert got["files"] == contents(alone(job, opts, tmp_path))["files"], job.title
        for book in got["files"].values():
            if isinstance(book, dict):
                sheet = book["xl/worksheets/sheet1.xml"]
                texts |= {t for t in (b"Warning", b"N/A", b"Need double check api accuracy.",
                                      b"No bench data matched") if t in sheet}
    assert texts == {b"Warning", b"N/A", b"Need double check api accuracy.",
                     b"No bench data matched"}, texts


def test_a_kept_database_keeps_its_workbooks_shapes_for_the_next_batch(jobs, opts, tmp_path,
                                                                       monkeypatch):
    """The workbook's sheet queries' column types (DESCRIBE) and its catalog facts are asked by
    a kept database's first batch and kept for its next batches of the same mode and tables'
    types (WorkerDatabase.shapes), whose pairs are still their own compares; a new kept
    database, or a batch of other types, asks them again."""
    from msq.export import outputs, xlsx

    opts = dataclasses.replace(opts, formats=("xlsx",))
    asked: list[str] = []
    described = xlsx._described
    monkeypatch.setattr(xlsx, "_described", lambda query: (asked.append("describe"),
                                                           described(query))[1])
    facts = outputs._ask_workbook_facts
    monkeypatch.setattr(outputs, "_ask_workbook_facts", lambda *a: (asked.append("facts"),
                                                                   facts(*a))[1])
    pair_tables._batch_shared(jobs[:2], opts, tmp_path)
    assert sorted(asked) == ["describe", "describe", "facts"], asked  # main and blame sheets
    asked.clear()
    outs = pair_tables._batch_shared(jobs[2:], opts, tmp_path)  # raises unless batched
    assert asked == [], asked
    kept = WorkerDatabase.get(opts)
    assert kept is not None and kept._shapes is not None
    mode, types, shapes = kept._shapes
    assert kept.shapes(mode, dict(types)) is shapes
    assert kept.shapes(mode, {**types, ("batch_x", "y"): "INTEGER"}) is not shapes
    WorkerDatabase.discard()
    pair_tables._batch_shared(jobs[:2], opts, tmp_path)
    assert sorted(asked) == ["describe", "describe", "facts"], asked
    monkeypatch.undo()
    for job, out in zip(jobs[2:], outs, strict=True):
        assert isinstance(out, PairTables)
        assert contents(out)["files"] == contents(alone(job, opts, tmp_path))["files"], job.title


@pytest.mark.parametrize("other", [False, True])
def test_a_batch_stores_its_blame_reasons_and_floor_sources_as_codes(linked_jobs, opts, tmp_path,
                                                                    other):
    """A batch's blame_rows stores each row's reason as its kind (an ENUM blame_reason) and its
    floor source as a blame_floor (msq.blame.compute.batch_rows_select), whose texts its readers
    make (msq.blame.BATCH_TEXTS): each pair's history rows, summary, blame sheet and CSV stay
    those of its own compare. A batch with a dtype that blame_floor lacks (``other``) stores its
    floor sources as texts."""
    from msq import pipeline
    from msq.config import SingleInput

    opts = dataclasses.replace(opts, formats=("xlsx", "csv"))
    jobs = list(linked_jobs)
    if other:
        odd = retyped(chain(5), 2, "torch.float8_e5m2")
        jobs.append(chain_pair(tmp_path, "odd", odd, noisy(odd, 6, 0.01)))
    kept = WorkerDatabase.get(opts)
    assert kept is not None
    con, _, _ = pipeline.compute_batch(
        [SingleInput(job.npu[0], job.bench[0], job.npu[1]) for job in jobs], opts, kept)
    types = dict(con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'blame_rows' "
        "AND database_name = current_database()").fetchall())
    assert types["reason"].startswith("ENUM('explained by its input ', 'within the floor'")
    assert types["floor_source"].startswith("ENUM('dtype float32'") != other
    kinds = {kind for (kind,) in con.execute(
        "SELECT DISTINCT reason::VARCHAR FROM blame_rows").fetchall()}
    assert {"explained by its input ", "produced by ", "error enters here: beyond "} <= kinds
    sources = {s for (s,) in con.execute(
        "SELECT DISTINCT floor_source::VARCHAR FROM blame_rows").fetchall()}
    assert ("dtype float8_e5m2" in sources) == other and "dtype float32" in sources
    WorkerDatabase.discard()
    outs = pair_tables._batch_shared(jobs, opts, tmp_path)
    for job, out in zip(jobs, outs, strict=True):
        assert isinstance(out, PairTables), job.title
        assert contents(out) == contents(alone(job, opts, tmp_path)), job.title
