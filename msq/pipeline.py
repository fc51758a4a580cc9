"""The single-card compare pipeline: read, flatten, load, match, measure, rule, export.

Each stage reads and writes DuckDB tables (see docs/architecture.md); this module only sequences
them. ``compare()`` is the public entry point with msprobe's signature.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import dataclasses
import itertools
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import duckdb

from msq import db, interrupts
from msq.blame import BATCH_TEXTS
from msq.blame.export import write_blame_outputs
from msq.blame.run import (
    PendingBlame,
    batch_blame,
    blame_compare,
    blame_on,
    finish_run,
    start_blame,
    start_run,
)
from msq.blame.summary import summarize_batch
from msq.config import Options, SingleInput, input_from_api, options_from_kwargs
from msq.errors import DumpError, InputError, NothingComparedError, UsageError
from msq.export.outputs import MARK_REASON, ensure_output_dir, result_table, write_outputs
from msq.export.xlsx import deflate, renderer
from msq.flatten import (
    C_PADDING,
    CColumn,
    Coded,
    Columns,
    all_text,
    check_stack_c,
    coded_column,
    concat_columns,
    distinct_texts,
    input_buffer,
    reader,
    same_column,
)
from msq.highlight import write_windows
from msq.history import (
    RecordContext,
    Recorder,
    check_target,
    compare_row,
    parse_rank_step,
    start_recording,
)
from msq.jsonio import check_stack, read_padded, read_stack
from msq.loader import SideData, gc_paused, read_sides
from msq.mappings import pair_rows_mapped
from msq.match_compat import write_compat_pairs
from msq.mindspore import hooks as mindspore_hooks
from msq.mindspore.detect import is_cross_framework, resolve_framework
from msq.opening import EarlyDatabase, rules_variant, unused_views
from msq.result import CompareResult, RowRef, sheet_row
from msq.sqlfiles import COMPARE_VIEWS, view_files, view_statement
from msq.tensors_bridge import EarlyMetrics, fill_tensor_metrics

log = logging.getLogger("msq")

MODES = ("statistics", "md5", "tensor")


def detect_mode(npu: SideData, bench: SideData, compat: bool = True) -> str:
    """statistics, md5 or tensor (spec §1.5): md5 is decided by the NPU file alone; the default
    mode refuses an md5 dump against a statistics one, as it refuses statistics against tensor."""
    if npu.task != bench.task:
        raise DumpError(f"the dump tasks differ ({npu.path}: {npu.task}, {bench.path}: {bench.task}); "
                        "compare two dumps taken with the same task")
    if npu.task == "tensor":
        return "tensor"
    if not compat and npu.has_md5 != bench.has_md5:
        md5, stats = (npu, bench) if npu.has_md5 else (bench, npu)
        raise DumpError(f"the summary modes differ ({md5.path}: md5, {stats.path}: statistics); "
                        "compare two dumps taken with the same summary_mode")
    return "md5" if npu.has_md5 else "statistics"


def check_comparable(npu: SideData, bench: SideData, opts: Options) -> None:
    """The default mode's refusals of a compare that could compare nothing: an empty side, or a
    MindSpore dump against a PyTorch one without a mapping (every name would differ)."""
    if opts.is_compat:
        return
    for side in (npu, bench):
        if side.ops.num_rows == 0:
            raise DumpError(f"{side.path}: holds no ops (its \"data\" is empty): nothing to "
                            "compare; dump the step and rank you mean to compare")
    mapped = (opts.api_mapping or opts.cell_mapping or opts.layer_mapping
              or opts.data_mapping is not None)
    if npu.looks_mindspore and not bench.looks_mindspore and not mapped:
        raise InputError(f"these look like MindSpore ({npu.path}) vs PyTorch ({bench.path}) "
                         "dumps, whose op names differ: nothing would be compared; add -am "
                         "(and -cm for cells) to map MindSpore names to PyTorch's")


def load_sides(con: duckdb.DuckDBPyConnection, npu: SideData, bench: SideData) -> None:
    """Bulk-insert both sides' ``ops`` and ``tensors`` rows; names match as displayed until a
    MindSpore mapping rewrites them (a batch of pairs loads with :func:`load_batch`).

    One INSERT of both sides' Arrow batches (concatenated without a copy) scans them on every
    core; one per side, and an UPDATE of match_name, took twice as long. The C reader's columns
    go to DuckDB as an Arrow C stream: pyarrow is not imported for them.

    On one DuckDB thread: the stream is read by one, and a second only added work (stat's 195k
    rows: 0.16 -> 0.11 s CPU, the same wall time; four times as many rows: 0.36 -> 0.22 s). A
    small input's database has one thread already (:func:`small_input`): no SET then.
    """
    with db.threads(con, 0 if small_input(npu, bench) else 1):
        # by name: the readers' columns have no pair (0 by default, a single compare's)
        db.insert_arrow(con, "ops", concat_columns([npu.ops, bench.ops]), by_name=True)
        db.insert_arrow(con, "tensors", concat_columns([npu.rows, bench.rows]),
                        select="*, disp_name AS match_name", by_name=True)


def load_stacks(con: duckdb.DuckDBPyConnection, stack_json: Path | None, stack_mode: bool) -> None:
    """Fill ``stacks``. stack.json is always read and checked, as msprobe reads it (a broken one
    fails every compare), but its texts are only kept for the NPU_Stack_Info column of -s."""
    if stack_json is None:
        return
    if not stack_mode:
        check_stack_json(stack_json)
        return
    with gc_paused():
        stacks = read_stack(stack_json)
    import pyarrow as pa  # -s only

    db.insert_arrow(con, "stacks",
                    pa.table({"op_name": list(stacks), "stack": list(stacks.values())}))


def check_stack_json(stack_json: Path) -> None:
    """Read and check a stack.json whose texts are not kept (no -s)."""
    if C_PADDING is not None:
        buf = read_padded(stack_json, "stack.json", C_PADDING, input_buffer)
        if buf is not None and check_stack_c(buf) is None:
            return  # an object of lists: what check_stack accepts, checked in C
    with gc_paused():
        check_stack(stack_json)


def small_input(npu: SideData, bench: SideData) -> bool:
    """Both sides' rows fit in one DuckDB row group: every query of the compare runs on one
    core (see :func:`compute`), so its database starts with one thread instead of DuckDB's
    worker threads being started, stopped for the per-row stages and restarted for the outputs
    (two ``SET threads``, each waiting for the tasks in flight on a busy machine)."""
    return npu.rows.num_rows + bench.rows.num_rows <= db.DEFAULT_ROW_GROUP_ROWS


def prepare(inp: SingleInput, opts: Options, opened: EarlyDatabase | None = None,
            ) -> tuple[duckdb.DuckDBPyConnection, str, str, SideData, SideData]:
    """Read both dumps, then open the compare's database and build its tables and views
    (``opened``: the database msq.runner began to open meanwhile, with its schema; see
    msq/opening.py).

    Returns:
        The connection, the mode, the NPU side's framework and both sides.
    """
    # read first: the dump readers may fork, which is safe only while no DuckDB connection and
    # its threads exist (msq/procs.py)
    npu, bench = read_sides(inp.npu_json, inp.bench_json, opts.is_compat)
    mode = detect_mode(npu, bench, opts.is_compat)
    check_comparable(npu, bench, opts)
    threads = opts.workers or (1 if small_input(npu, bench) else None)
    con = opened.take(threads) if opened is not None else None
    created: set[str] = set()  # the views created with the database
    if con is None:  # not begun, or it failed: opened here (an error is reported from here)
        con = db.connect(threads=threads)
        db.run_schema(con)
    elif opened is not None:
        created = opened.views
        log.debug("database: opened while msq.pipeline was imported (%d views)", len(created))
    framework = resolve_framework(opts, npu.looks_mindspore)
    api_map = framework == "mindspore" and bool(opts.api_mapping)
    cell_map = framework == "mindspore" and bool(opts.cell_mapping)
    con.execute("INSERT INTO settings VALUES (?, ?, ?, ?, ?, ?, ?)",
                [mode, opts.is_compat, opts.fuzzy_match, opts.stack_mode,
                 is_cross_framework(opts, bench.path, api_map, cell_map), api_map, cell_map])
    load_sides(con, npu, bench)
    load_stacks(con, inp.stack_json, opts.stack_mode)
    # the MindSpore mapping views (sql/compare/match/mindspore/) load only where they can be
    # used; the colour rules are msprobe's under --compat, msq's own by default (rules_variant)
    db.load_views(con, variants=[mode, rules_variant(opts),
                                 *(["mindspore"] if framework == "mindspore" else [])],
                  user_dirs=[Path(opts.sql_dir)] if opts.sql_dir else [],
                  skip=unused_views(opts) | created)
    mindspore_hooks.rename_for_match(con, opts, framework)
    return con, mode, framework, npu, bench


#: ``op_keys`` from the columns both readers give each op (msq/_flatten.c ``op_key``,
#: msq.loader._op_key): the rows the view's aggregate gives (an op without rows has none), while
#: every row's match_name is its disp_name and the key is not made fuzzy. (``pair + 0``: the
#: column as the view's aggregate describes it, without ops.pair's default.)
READER_OP_KEYS = ("SELECT side, op_seq, row_key AS match_key, n_in_rows::BIGINT AS n_in, "
                  "n_out_rows::BIGINT AS n_out, n_rows::BIGINT AS n_rows, pair + 0 AS pair "
                  "FROM ops WHERE n_rows > 0")

#: row_pairs' place of each row among its op's rows of one disp_io, and what replaces it where
#: the readers counted it (tensors.io_k): the same numbers without a window's sort of the rows.
ROW_PAIRS_K = ("row_number() OVER (PARTITION BY side, op_seq, disp_io ORDER BY row_in_op) AS k",
               "io_k AS k")

#: row_pairs' grouped, once it is a scan of tensors (:data:`ROW_PAIRS_K`), read where its three
#: uses read it, not materialised first (DuckDB materialises a CTE read more than once: every
#: row of both sides copied, then scanned three times with the side filtered after the copy):
#: the same rows, ~21 M instructions less of a 6-pair root batch's ~503 M
ROW_PAIRS_INLINED = ("WITH grouped AS (", "WITH grouped AS NOT MATERIALIZED (")


def reader_keys_apply(opts: Options, framework: str) -> bool:
    """op_keys and row_pairs may read the readers' columns (:data:`READER_OP_KEYS`,
    :data:`ROW_PAIRS_K`): no user views (``--sql-dir`` may replace either), no -f (fuzzy keys),
    no MindSpore renaming of the names matched (-am / -cm)."""
    return not opts.sql_dir and not opts.fuzzy_match and not (
        framework == "mindspore" and (opts.api_mapping or opts.cell_mapping))


#: op_candidates' rows test skipped where the readers' struct_keys (ops.struct_key: each row's
#: dtype, shape and md5, in order) are equal: such two ops of one key have rows of equal
#: structure row by row, so its exact test holds without a join of their rows (~half of
#: op_pairs_default's time on a 24,500-row pair). Pairs whose keys differ (or are NULL) and any
#: cross-framework compare (the NPU dtypes are renamed there) are tested row by row as before.
CANDIDATES_KEYED = (
    ("SELECT n.op_seq AS npu_op, b.op_seq AS bench_op, n.n_in, n.n_out\n",
     ("SELECT n.op_seq AS npu_op, b.op_seq AS bench_op, n.n_in, n.n_out,\n"
      "         coalesce(sn.struct_key = sb.struct_key, false)\n"
      "         AND NOT (SELECT cross_framework FROM settings) AS same_struct\n")),
    ("AND n.n_in = b.n_in AND n.n_out = b.n_out AND n.pair = b.pair\n",
     ("AND n.n_in = b.n_in AND n.n_out = b.n_out AND n.pair = b.pair\n"
      "  JOIN ops sn ON sn.side = 'npu' AND sn.op_seq = n.op_seq\n"
      "  JOIN ops sb ON sb.side = 'bench' AND sb.op_seq = b.op_seq\n")),
    ("FROM named p CROSS JOIN settings st",
     "FROM (SELECT * FROM named WHERE NOT same_struct) p CROSS JOIN settings st"),
    ("SELECT npu_op, bench_op\nFROM row_checks\n",
     ("SELECT npu_op, bench_op FROM named WHERE same_struct\nUNION ALL\n"
      "SELECT npu_op, bench_op\nFROM row_checks\n")),
)


def _replaced(origin: str, body: str, edits: tuple[tuple[str, str], ...]) -> str:
    """``body`` with each (text, replacement) made; an error names the file when a text is not
    in it exactly once (the file was rewritten: the edit must follow it)."""
    for text, replacement in edits:
        if body.count(text) != 1:
            raise AssertionError(f"{origin}: {text!r} is no longer in it once")
        body = body.replace(text, replacement)
    return body


#: :data:`CANDIDATES_KEYED`'s op_candidates where the settings are a batch's
#: (:func:`compute_batch`: not compat, not across frameworks): the settings' tests made as they
#: come out, so that DuckDB does not plan them (cross_framework's two subqueries, the MindSpore
#: dtype map and dtype_compatible's compat branch: ~9 ms of the ~26 ms a 4-pair root batch's
#: op_pairs took to plan). The same pairs: each replaced test gives what it gave for those
#: settings, NULLs alike (NOT false, CASE WHEN false ... ELSE x END is x).
CANDIDATES_BATCH = (
    ("\n         AND NOT (SELECT cross_framework FROM settings) AS same_struct\n",
     " AS same_struct\n"),
    (("JOIN (SELECT * REPLACE (CASE WHEN (SELECT cross_framework FROM settings) THEN "
      "ms_to_torch_dtype(dtype)\n                              ELSE dtype END AS dtype)\n"
      "        FROM tensors) tn"), "JOIN tensors tn"),
    ("dtype_compatible(tn.dtype, tb.dtype, st.compat)",
     "(tn.dtype IS NOT DISTINCT FROM tb.dtype OR float_precision_pair(tn.dtype, tb.dtype))"),
)


#: op_pairs_default.sql's keyed where no side of any pair has two ops of one key
#: (:func:`unique_op_keys`): each op's k is then 1, with no list of its key's ops made and
#: unnested (a GROUP BY of every op by its long key: ~9 ms of a 4-pair root batch's ~50).
KEYED_UNIQUE = (
    ("""  SELECT side, pair, match_key, unnest(ops) AS op_seq, generate_subscripts(ops, 1) AS k
  FROM (SELECT side, pair, match_key, list(op_seq ORDER BY op_seq) AS ops FROM op_keys
        GROUP BY side, pair, match_key)""",
     "  SELECT side, pair, match_key, op_seq, 1 AS k FROM op_keys"),
    # keyed then a scan of op_keys (the readers' ops), read where its three uses read it, not
    # materialised first (~6 M instructions less of a 6-pair root batch's ~262 M)
    ("WITH keyed AS (", "WITH keyed AS NOT MATERIALIZED ("))


#: op_pairs_default.sql's rows with their pair (ops.pair) where they are a batch's
#: (:func:`op_pairs_select`): :func:`place_pairs` reads it
OP_PAIRS_PAIR = ("       npu_op, bench_op, how\n", "       npu_op, bench_op, how, pair\n")


def op_pairs_select(batch: bool = False, unique_keys: bool = False) -> str:
    """sql/compare/match/op_pairs_default.sql over op_candidates.sql's pairs with the readers'
    struct_keys (:data:`CANDIDATES_KEYED`): the same pairs, where op_keys is the readers'
    (:data:`READER_OP_KEYS`). ``batch``: the settings are a batch's (:data:`CANDIDATES_BATCH`)
    and each row has its pair (:data:`OP_PAIRS_PAIR`); ``unique_keys``: no side has two ops of
    one key (:data:`KEYED_UNIQUE`)."""
    cands = db.sql_file("compare/match/op_candidates.sql")
    pairs = db.sql_file("compare/match/op_pairs_default.sql")
    keyed = _replaced(cands.origin, cands.body,
                      CANDIDATES_KEYED + CANDIDATES_BATCH if batch else CANDIDATES_KEYED)
    return _replaced(pairs.origin, pairs.body, (
        ("SEMI JOIN op_candidates c", f"SEMI JOIN ({keyed}\n) c"),
        *((OP_PAIRS_PAIR,) if batch else ()),
        *(KEYED_UNIQUE if unique_keys else ())))


def unique_op_keys(pairs: list[BatchPair]) -> bool:
    """Whether no side of any pair has two ops with rows of one row_key (op_keys' match_key:
    msq/_flatten.c distinct_texts over each side's keys; the C reader's columns only, a side of
    one record batch). A key is its op's rows' names, each made of its op's own name: the
    40,000 ops with rows of a 4-pair root batch have 40,000 keys."""
    for part in pairs:
        for ops in (part.npu.ops, part.bench.ops):
            if not isinstance(ops, Columns) or len(ops.batches) != 1:
                return False
            cols = {c[0]: c for c in ops.batches[0]}
            if not distinct_texts(cols["row_key"], cols["n_rows"]):
                return False
    return True


#: row_pairs' rows with each row's ``is_input``: its disp_io (the NPU row's, the bench row's
#: where it has none) is 'input', as msq.highlight.write_windows reads it from tensors
#: (:func:`rows_and_windows`)
ROW_PAIRS_IS_INPUT = ("       ord, npu_row, bench_row, kind,\n",
                      "       ord, npu_row, bench_row, kind, disp_io = 'input' AS is_input,\n")


def row_pairs_select(is_input: bool = False) -> str:
    """sql/compare/match/row_pairs.sql reading ``tensors.io_k`` for its window (see
    :data:`ROW_PAIRS_K`; its CTE then not materialised, :data:`ROW_PAIRS_INLINED`), with each
    row's is_input (:data:`ROW_PAIRS_IS_INPUT`) if asked; an error names the file when the
    window is no longer written so."""
    file = db.sql_file("compare/match/row_pairs.sql")
    return _replaced(file.origin, file.body, (ROW_PAIRS_K, ROW_PAIRS_INLINED,
                                              *((ROW_PAIRS_IS_INPUT,) if is_input else ())))


#: The batch's tables that hold a pair column of their own (a batch's alone: a single compare's
#: has none, so each pair's view leaves it out, :func:`pair_views`): :func:`place_pairs` groups
#: its rows by it, not by a CASE of the pairs' op ranges on every row
BATCH_PAIR_COLUMNS = ("op_pairs",)


def batch_op_pairs(con: duckdb.DuckDBPyConnection, unique_keys: bool) -> None:
    """A batch's ``op_pairs`` (:func:`op_pairs_select`), each row with its pair
    (:data:`BATCH_PAIR_COLUMNS`); ``unique_keys``: :func:`unique_op_keys`."""
    con.execute("ALTER TABLE op_pairs ADD COLUMN pair INTEGER; INSERT INTO op_pairs BY NAME "
                + op_pairs_select(batch=True, unique_keys=unique_keys))


def rows_and_windows(con: duckdb.DuckDBPyConnection) -> None:
    """``compare_rows`` (:func:`row_pairs_select`) and the default mode's ``hl_windows``
    (msq.highlight.write_windows) from one row_pairs: its rows stored with their is_input for
    the moment, the windows copied from them, the column dropped. The same rows as the windows'
    two joins of compare_rows with tensors (each row's disp_io looked up again on each side by
    row_seq: ~20 % of a 4-pair root batch's match)."""
    con.execute("ALTER TABLE compare_rows ADD COLUMN is_input BOOLEAN; "
                f"INSERT INTO compare_rows BY NAME {row_pairs_select(is_input=True)}; "
                "INSERT INTO hl_windows SELECT out_seq, ord, is_input FROM compare_rows; "
                "ALTER TABLE compare_rows DROP COLUMN is_input")


def pair_rows(con: duckdb.DuckDBPyConnection, inp: SingleInput, opts: Options, framework: str,
              output_dir: Path, suffix: str) -> None:
    """Fill ``op_pairs`` and ``compare_rows``: by a MindSpore mapping (-lm, a user -am YAML), by
    a data mapping (-dm), else by name (1.1.0's streaming walk in compat mode).

    Where they apply (:func:`reader_keys_apply`), op_keys and row_pairs read the keys both
    readers give (ops.row_key, tensors.io_k) instead of sorting the rows (an ordered string_agg
    per op, a window over every row: ~12 and ~9 ms of a 24,500-row pair; the same rows)."""
    if mindspore_hooks.pair_rows(con, inp, opts, framework, output_dir, suffix):
        return
    if opts.data_mapping is not None:
        pair_rows_mapped(con, opts.data_mapping, opts.is_compat)
        return
    fast = reader_keys_apply(opts, framework)
    # both op_candidates and the default pairing read op_keys on each side: one string_agg of
    # every row's name, once (~20 % of the pairing's time on 100k rows)
    db.materialize(con, "op_keys", READER_OP_KEYS if fast else None)
    if opts.is_compat:
        write_compat_pairs(con)
    else:
        con.execute("INSERT INTO op_pairs "
                    + (op_pairs_select() if fast else "SELECT * FROM op_pairs_default"))
    con.execute("INSERT INTO compare_rows "
                + (row_pairs_select() if fast else "SELECT * FROM row_pairs"))


class _Clock:
    """Logs how long each stage took (visible with -vv)."""

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.last_cpu = time.process_time()

    def lap(self, stage: str) -> None:
        # CPU time (every thread of this process, not the reader processes) beside the wall
        # time: on a shared machine the wall time alone says little
        now, cpu = time.perf_counter(), time.process_time()
        log.debug("stage %-10s %.2fs (%.2fs CPU)", stage, now - self.last, cpu - self.last_cpu)
        self.last, self.last_cpu = now, cpu


def run_single(inp: SingleInput, output_dir: Path, opts: Options, suffix: str = "",
               early: EarlyMetrics | None = None,
               opened: EarlyDatabase | None = None) -> CompareResult:
    """Compare one NPU dump with one bench dump and write the outputs into ``output_dir``.

    ``early``: tensor metrics the caller already started, and will cancel (msq.runner starts
    them before the heavy imports); else they start, and are cancelled, here. ``opened``: the
    compare's database, begun by msq.runner (see :func:`prepare`).
    """
    # a Ctrl-C held since the previous compare of this run completed stops this one now
    interrupts.unsettle()
    if early is not None:  # the caller started it, and cancels it
        return _run_single(inp, output_dir, opts, suffix, early, opened)
    # tensors are most of a real-data compare: start on the same-named files while the dumps
    # are read and matched (a statistics dump has no tensor directory: nothing starts)
    try:
        with interrupts.deferred():  # a Ctrl-C while the pool starts stops it once it is held
            early = EarlyMetrics.start(inp, opts)
        return _run_single(inp, output_dir, opts, suffix, early, opened)
    finally:
        if early is not None:
            early.cancel()  # a no-op once its rows were taken; stops the pool after an error


def _run_single(inp: SingleInput, output_dir: Path, opts: Options, suffix: str,
                early: EarlyMetrics | None, opened: EarlyDatabase | None) -> CompareResult:
    started = time.time()
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(started))
    clock = _Clock()
    recorders: list[Recorder] = []

    def record(con: duckdb.DuckDBPyConnection, mode: str, rows: int) -> None:
        # the rows are matched: the recorder prepares the history (attach, schema, views)
        # while the result and blame are computed, and records once they exist
        recorders.append(start_recording(con, mode, opts.db, output_dir, rows))

    def result_ready(con: duckdb.DuckDBPyConnection, mode: str, rows: int) -> None:
        for started_recorder in recorders:  # its rows go in while blame may still run
            started_recorder.result_ready()

    try:
        con, mode, framework, result = compute(
            inp, opts, output_dir, suffix, early, clock,
            on_match=record if opts.record else None,
            on_result=result_ready if opts.record else None, opened=opened)
    except BaseException:
        for started_recorder in recorders:
            started_recorder.abort()
        raise
    result.stamp = stamp
    recorder = recorders[0] if recorders else None
    try:
        if recorder is not None:
            recorder.tables_complete()
        if result.rows == 0:
            log.warning("Can`t match any op: no rows to compare; no workbook written")
        else:
            write_outputs(con, mode, output_dir, opts, suffix, stamp, result,
                          report_writer(con, mode, opts, result))
            if result.blame is not None:
                write_blame_outputs(con, output_dir, opts, suffix, stamp, result)
            clock.lap("outputs")
        if recorder is not None:  # the compares row names the outputs: only now is it complete
            ctx = RecordContext(inp, opts, result, output_dir, started, framework)
            result.history_id = recorder.finish(compare_row(ctx, con))
            result.history_db = Path(os.path.abspath(recorder.path))
            clock.lap("history")
        else:
            interrupts.settle()  # the outputs are complete: so is this compare
    except BaseException:
        if recorder is not None:
            recorder.abort()
        raise
    result.seconds = time.time() - started
    return result


def log_setup(mode: str, opts: Options) -> None:
    """What a compare says of itself at -v: its mode, and which of the optional C parts run
    (built where pip finds a compiler). A batch's pairs say it each (msq.pair_tables)."""
    log.info("compare mode: %s (%s)", mode, "msprobe-1.1 compat" if opts.is_compat else "default")
    log.info("dump reader: %s; workbook rows: %s; deflate: %s", reader(), renderer(), deflate())


def compute(inp: SingleInput, opts: Options, output_dir: Path, suffix: str,
            early: EarlyMetrics | None, clock: _Clock | None = None,
            on_result: Callable[[duckdb.DuckDBPyConnection, str, int], None] | None = None,
            on_match: Callable[[duckdb.DuckDBPyConnection, str, int], None] | None = None,
            opened: EarlyDatabase | None = None,
            ) -> tuple[duckdb.DuckDBPyConnection, str, str, CompareResult]:
    """Every stage up to the result: ``result_<mode>`` and ``marks`` are tables in ``con`` and
    the summary is counted. Nothing is written (but a ``-lm`` mapping file). A single-card
    compare then writes from ``con``; a directory compare's pair ships the tables to the driver
    (msq/pair_tables.py). Returns the compare's connection (the caller closes it), the mode,
    the NPU side's framework and the summary (with its blame: ``blame_rows`` and
    ``blame_edges`` are tables in ``con`` too). ``on_result(con, mode, rows)`` is called once
    ``result_<mode>`` and ``marks`` are tables (before the summary), while blame may still be
    computed;
    ``on_match(con, mode, rows)`` once the rows are matched (``compare_rows``); ``opened``: see
    :func:`prepare`."""
    clock = clock or _Clock()
    con, mode, framework, npu, bench = prepare(inp, opts, opened)
    clock.lap("load")
    log_setup(mode, opts)
    pair_rows(con, inp, opts, framework, output_dir, suffix)
    clock.lap("match")
    if mode == "tensor":
        fill_tensor_metrics(con, npu.tensor_dir, bench.tensor_dir, opts, early)
        clock.lap("metrics")
    write_windows(con, opts.is_compat)
    # the per-row stages run as strands, each on its own cursor and core (_compute_default,
    # materialize_halves, blame): on tables of one DuckDB row group or less, DuckDB's own second
    # thread only added work to each query (~0.4 s CPU of a 100k-row statistics compare,
    # interleaved A/B at load 5-8; bench/README). DuckDB parallelises a scan by row group: a
    # larger compare keeps every thread (on a many-core machine they do real work there).
    rows = int(db.scalar(con, "SELECT count(*) FROM compare_rows"))
    if on_match is not None:
        on_match(con, mode, rows)
    small = rows <= db.DEFAULT_ROW_GROUP_ROWS
    made = opened.views if opened is not None else set()  # views created with the database
    with db.threads(con, 1 if small else 0):
        result = _compute_result(con, mode, inp, opts, clock, on_result, made)
    return con, mode, framework, result


def _compute_result(con: duckdb.DuckDBPyConnection, mode: str, inp: SingleInput, opts: Options,
                    clock: _Clock,
                    on_result: Callable[[duckdb.DuckDBPyConnection, str, int], None] | None,
                    made: set[str]) -> CompareResult:
    """The result views, the summary and blame (see :func:`compute`; ``made``: the views
    created with the database, blame's among them)."""
    result = new_result(mode, inp)
    result.compat = opts.is_compat
    if opts.is_compat or opts.sql_dir:
        # --compat has neither the per-row error nor verdicts (msprobe's rules); a user's views
        # may read any other, so they are computed one after the other
        views = [] if opts.is_compat else ["row_error", "verdicts"]
        for view in (*views, f"result_{mode}", "marks"):
            if view.startswith("result_") and not opts.sql_dir:
                _materialize_result(con, view)
            else:
                db.materialize(con, view)
            clock.lap(view)
        _summarize_and_hand_on(con, mode, result, clock, on_result)
        # a user's views may read any other: blame runs after them (None under --compat)
        result.blame = blame_compare(con, mode, inp, opts)
        clock.lap("blame")
        return result
    _compute_default(con, mode, inp, opts, result, clock, on_result, made)
    return result


def _summarize_and_hand_on(con: duckdb.DuckDBPyConnection, mode: str, result: CompareResult,
                           clock: _Clock,
                           on_result: Callable[[duckdb.DuckDBPyConnection, str, int], None] | None
                           ) -> None:
    """Hand the result on, then count the summary. The history's recorder starts inserting the
    result's rows here, while blame may still run: in a large compare its record is what the
    compare waits for at its end, and the summary's queries (~0.05 s on 100,000 rows) only read."""
    if on_result is not None:
        on_result(con, mode, int(db.scalar(con, "SELECT count(*) FROM compare_rows")))
    summarize(con, mode, result)
    clock.lap("summary")


#: From this many output rows on, --compat computes its result in two halves on two cores.
HALVES_MIN_ROWS = 20_000


def _materialize_result(con: duckdb.DuckDBPyConnection, view: str) -> None:
    """--compat's result: nothing else is left to compute beside it, so its two halves are
    computed at once (db.materialize_halves); a small compare's takes longer to plan than to
    run, once is enough."""
    low, high, count = con.execute(
        "SELECT min(out_seq), max(out_seq), count(*) FROM compare_rows").fetchall()[0]
    if count < HALVES_MIN_ROWS:
        db.materialize(con, view)
        return
    db.materialize_halves(con, view, "out_seq", (int(low) + int(high) + 1) // 2)


#: ``unmatched_reasons`` of a compare whose every row is matched: its columns, no rows.
NO_UNMATCHED_REASONS = ("SELECT out_seq, NULL::VARCHAR AS reason_kind, NULL::VARCHAR AS reason "
                        "FROM compare_rows WHERE false")


def skip_unmatched_reasons(con: duckdb.DuckDBPyConnection, unmatched: bool | None = None) -> bool:
    """When every row is matched, ``unmatched_reasons`` (read by ``verdicts`` alone) is empty:
    it becomes a view of no rows (returns True). Its query's result would be the same, but
    DuckDB takes ~0.1 s to bind it (its CTEs are bound once per reference), whatever the size:
    most of a small compare's ``verdicts`` stage. Not with a user's views (``--sql-dir`` may read
    or replace it). ``unmatched``: whether a row of a kind other than 'matched' is (None: a
    query of compare_rows says)."""
    if unmatched is None:
        unmatched = db.scalar(con, "SELECT count(*) FROM compare_rows WHERE kind <> 'matched'") > 0
    if not unmatched:
        con.execute(f"CREATE OR REPLACE VIEW unmatched_reasons AS {NO_UNMATCHED_REASONS}")
        return True
    return False


#: What sql/compare/rules/unmatched_reasons.sql reads of the compare's settings and -dm mapping
#: (each text as written there), and the query of its value: fixed once the rows are paired.
REASON_SETTINGS = {
    "(SELECT compat FROM s)": "SELECT compat FROM settings",
    "coalesce((SELECT api_mapping OR cell_mapping FROM s), false)":
        "SELECT coalesce(api_mapping OR cell_mapping, false) FROM settings",
    "(SELECT count(*) > 0 FROM mappings WHERE kind = 'data')":
        "SELECT count(*) > 0 FROM mappings WHERE kind = 'data'",
}


def _bound(origin: str, text: str, reads: Mapping[str, str]) -> str:
    """``text`` with every occurrence of each read (a settings read as the file writes it) in
    it replaced by its constant; an error names the file when a read is no longer in it (the
    file was rewritten: the binding must follow it)."""
    for read, value in reads.items():
        if read not in text:
            raise AssertionError(f"{origin}: {read!r} is no longer read there")
        text = text.replace(read, value)
    return text


def bound_reasons(con: duckdb.DuckDBPyConnection) -> db.SqlFile:
    """sql/compare/rules/unmatched_reasons.sql with the compare's settings in its text as
    constants (:data:`REASON_SETTINGS`), for the same rows: each read (eight in the text, more
    as the CTEs holding them are inlined) was a scalar subquery that DuckDB binds and plans as a
    join of its own, ~12 ms of the ~50 ms a 24,500-row pair with five unmatched rows spent on
    the view, most of which is planning (bench/README, "Session 13: stat")."""
    file = db.sql_file("compare/rules/unmatched_reasons.sql")
    values = con.execute("SELECT " + ", ".join(f"({q})" for q in REASON_SETTINGS.values())
                         ).fetchall()[0]
    constants = {read: "CAST(NULL AS BOOLEAN)" if value is None else ("true" if value else "false")
                 for read, value in zip(REASON_SETTINGS, values, strict=True)}
    return dataclasses.replace(file, text=_bound(file.origin, file.text, constants))


def create_unmatched_reasons(con: duckdb.DuckDBPyConnection,
                             opened: BatchDatabase | None = None,
                             unmatched: bool | None = None) -> None:
    """``unmatched_reasons`` for the default mode's verdicts (not created with the other views,
    :func:`unused_views`): the empty stand-in when every row is matched, else the shipped view
    with the compare's settings bound (:func:`bound_reasons`), made a table of its rows;
    ``opened``: a batch's kept database, which keeps the view from one batch to the next
    (:meth:`BatchDatabase.batch_views`); ``unmatched``: :func:`skip_unmatched_reasons`'."""
    if skip_unmatched_reasons(con, unmatched):
        return
    file = bound_reasons(con)
    if opened is None:
        db.create_view(con, file, defer=True, comment=False)
    else:
        opened.batch_views(con, {file.name: view_statement(file, defer=db.can_defer_binding(con))})
    # A table of its few rows before verdicts reads it: read as a view, DuckDB's estimate of its
    # rows (the joins of the unmatched ops' APIs to every op of the other side: millions) made
    # verdicts build its last join's hash table on the ~146,000 rows of a 6-pair batch, not on
    # the ~30 reasons (~76 M instructions); planned without verdicts' passes too (~16 M less).
    # The same rows: the view's query, once (bench/README, "Session 25: unm").
    with planned_without(con, BATCH_PLAN_SKIPS["verdicts"]):
        db.materialize(con, "unmatched_reasons")


#: What sql/compare/rules/row_error.sql reads of the compare's settings (as written there): its
#: mode, fixed once the dumps are read.
ROW_ERROR_MODE = "(SELECT mode FROM settings)"


#: What sql/compare/rules/row_error.sql reads of ``tensor_metrics`` (its join, its columns, as
#: written there) and what stands for them outside tensor mode: the table's columns' types, NULL
#: (the table is filled by the tensor mode's metrics pass alone, msq.tensors_bridge, so any other
#: mode's rows join none of it).
ROW_ERROR_METRICS = {
    "LEFT JOIN tensor_metrics tm ON tm.out_seq = r.out_seq": "",
    "tm.status, tm.sq_diff, tm.npu_sq, tm.bench_sq":
        "NULL::VARCHAR AS status, NULL::DOUBLE AS sq_diff, NULL::DOUBLE AS npu_sq, "
        "NULL::DOUBLE AS bench_sq",
}


def bound_row_error(mode: str) -> str:
    """sql/compare/rules/row_error.sql's SELECT with the compare's mode in its text as a constant
    (each :data:`ROW_ERROR_MODE`), for the same rows, as the default mode materialises it. Each
    read was a scalar subquery joined to every row, and the other modes' branches were kept:
    with the constant, DuckDB drops them as it plans (statistics mode: no md5 read): a 4-pair
    batch's row_error 468 -> 437 M instructions, the parse of its text included (bench/README,
    "Session 21: rows"). Outside tensor mode without its join of ``tensor_metrics`` either
    (:data:`ROW_ERROR_METRICS`: a LEFT join of an empty table, which DuckDB keeps and runs, also
    when a constant condition says it is empty): ~-14 M instructions ("Session 23: rows")."""
    file = db.sql_file("compare/rules/row_error.sql")
    reads = {ROW_ERROR_MODE: "'" + mode.replace("'", "''") + "'"}
    if mode != "tensor":
        reads.update(ROW_ERROR_METRICS)
    return _bound(file.origin, file.body, reads)


#: What sql/compare/reports/statistics/stat_judged.sql reads of the compare's settings (as
#: written there): whether the compare is --compat.
STAT_RESULT_COMPAT = "(SELECT compat FROM settings)"
#: What sql/compare/reports/statistics/stat_result.sql reads its rows from (as written there)
STAT_RESULT_JUDGED = "FROM stat_judged"


def bound_result(mode: str) -> str | None:
    """What the default mode (never --compat: :func:`_compute_result`) materialises its result
    table from: statistics mode's stat_result.sql with --compat written into its text as false
    (each :data:`STAT_RESULT_COMPAT`), for the same rows; with the constant, DuckDB drops the
    --compat branches as it plans and with them stat_rows' Warning flag (``flagged``, then read
    by nothing): a 4-pair batch's stat_result ~-14 M instructions, the parse of its text included
    (bench/README, "Session 23: rows"). Other modes: None (their result view as it is)."""
    if mode != "statistics":
        return None
    file = db.sql_file("compare/reports/statistics/stat_result.sql")
    judged = db.sql_file("compare/reports/statistics/stat_judged.sql")
    return _bound(file.origin, file.body, {STAT_RESULT_JUDGED: "FROM (\n{}\n)".format(
        _bound(judged.origin, judged.body, {STAT_RESULT_COMPAT: "false"}))})


#: What a batch stores of each mode's result table (msq.export.outputs.result_table) where
#: that table is a view over it: statistics' stat_result over stat_judged (stat_rows' cells,
#: numbers and names, with the verdict's reason, warn and unmatched reason). Its texts made of
#: the kind, the verdict and the stack ("Result", "Err_message", "Reason", "NPU_Stack_Info")
#: are made by each reader of the view (a batch's: the history rows and the workbook's rows,
#: each once), not appended to a table of every row (~220 instructions a text) and scanned
#: again: ~-66 M instructions a 6-pair root batch (bench/README, "Session 28: rows").
BATCH_STORED = {"statistics": "stat_judged"}


def batch_stored(mode: str) -> str:
    """What a batch of ``mode`` materialises of its result (:data:`BATCH_STORED`, else the
    result table itself)."""
    return BATCH_STORED.get(mode, result_table(mode))


#: What stat_judged's rows hold of stat_rows' (as sql/compare/reports/statistics/
#: stat_judged.sql writes it), and what a batch stores of them: not --compat's Warning flag
#: (``flagged``, read by nothing in the default mode) nor the stack, 'None' on every row of a
#: batch (never -s: :func:`batchable`), which its stat_result shows as that constant
#: (:data:`STAT_RESULT_STACK`)
STAT_JUDGED_ROWS = ("SELECT s.*,", "SELECT s.* EXCLUDE (flagged, stack),")
#: What stat_result shows as NPU_Stack_Info (as sql/compare/reports/statistics/stat_result.sql
#: writes it), and what a batch's shows
STAT_RESULT_STACK = ('stack AS "NPU_Stack_Info"', "'None' AS \"NPU_Stack_Info\"")


def bound_stat_judged() -> str:
    """What a statistics batch stores of its result (:data:`BATCH_STORED`):
    sql/compare/reports/statistics/stat_judged.sql with --compat written into its text as
    false, as :func:`bound_result` does, without stat_rows' flagged and stack
    (:data:`STAT_JUDGED_ROWS`)."""
    file = db.sql_file("compare/reports/statistics/stat_judged.sql")
    return _bound(file.origin, file.body, {STAT_RESULT_COMPAT: "false",
                                           STAT_JUDGED_ROWS[0]: STAT_JUDGED_ROWS[1]})


#: What stat_result shows after its Err_message (as sql/compare/reports/statistics/
#: stat_result.sql writes it), and what a batch's shows there: also stat_judged's ``warn``, of
#: which (and of the unmatched rows' Err_message) the workbook's C renderer makes Result and
#: Err_message (msq.export.outputs.CHOSEN_TEXTS): DuckDB's CASEs of texts and its Arrow export
#: of two texts a row, empty on most, cost ~25 M instructions of a 7-pair root batch's rows
#: query (bench/README, "Session 29: out")
STAT_RESULT_WARN = ('END AS "Err_message",', 'END AS "Err_message", warn,')


def batch_result() -> str:
    """A statistics batch's stat_result, a view over what the batch stores
    (:func:`bound_stat_judged`): sql/compare/reports/statistics/stat_result.sql with its
    NPU_Stack_Info the constant 'None' (:data:`STAT_RESULT_STACK`) and the column its
    workbook's renderer makes Result and Err_message of (:data:`STAT_RESULT_WARN`)."""
    file = db.sql_file("compare/reports/statistics/stat_result.sql")
    return _bound(file.origin, file.body, {STAT_RESULT_STACK[0]: STAT_RESULT_STACK[1],
                                           STAT_RESULT_WARN[0]: STAT_RESULT_WARN[1]})


def batch_view_file(file: db.SqlFile, mode: str) -> db.SqlFile:
    """A view's file as a batch of ``mode`` creates it: stat_result as :func:`batch_result`
    where it is a view over what the batch stores (:data:`BATCH_STORED`); any other as it is."""
    if file.name == result_table(mode) and mode in BATCH_STORED:
        return dataclasses.replace(file, text=batch_result())
    return file


def batch_result_rows(mode: str) -> str:
    """The SELECT of a batch's result table's rows over its batch tables, after
    :func:`split_batch` (each pair's result table is its slice of them): the workbook's rows of
    the batch (msq.export.outputs.batch_workbook_queries)."""
    if mode not in BATCH_STORED:
        return f"SELECT * FROM batch_{result_table(mode)}"
    file = db.sql_file("compare/reports/statistics/stat_result.sql")
    return "SELECT * FROM (\n{}\n)".format(_bound(
        file.origin, batch_result(), {STAT_RESULT_JUDGED: f"FROM batch_{BATCH_STORED[mode]}"}))


#: The part of each mode's result that reads neither the per-row error nor the verdicts.
_DISPLAY_PART = {"statistics": "stat_rows", "md5": "display_rows", "tensor": "display_rows"}


def _compute_default(con: duckdb.DuckDBPyConnection, mode: str, inp: SingleInput,
                     opts: Options, result: CompareResult, clock: _Clock,
                     on_result: Callable[[duckdb.DuckDBPyConnection, str, int], None] | None,
                     made: set[str]) -> None:
    """The default mode's tables, computed once (read by the summary, the workbook, the advisor
    and the history), on both cores: each query runs on one (a compare's tables are smaller than
    a DuckDB row group), so independent strands run at once:

    * here: ``row_error``, ``verdicts``, then ``result_<mode>`` and ``marks``;
    * beside: the rows' displayed cells (``stat_rows`` / ``display_rows``), which the result
      reads (not on one core, below);
    * blame (msq.blame.run.PendingBlame), from ``row_error`` on;
    * ``on_result`` (the history's recorder) once the result exists, while blame may still run.

    Each view becomes a table in one transaction (db.materialize), so a strand sees a view or
    its table, never neither.

    On one core (``opts.workers == 1``: a pool worker's or a Ray task's pair, the cores already
    filled by the other pairs) the displayed cells are not a strand of their own: they stay a
    view, computed inside ``result_<mode>``'s query, and the rows are written into one table
    instead of two (a 24,500-row pair: ~160 M instructions less, ~3 %; the same rows)."""
    part = _DISPLAY_PART[mode]
    create_unmatched_reasons(con)
    pending: PendingBlame | None = None
    beside: db.Beside[None] | None = None
    try:
        if opts.workers != 1:
            # a thread is started and its handle held, or neither: a Ctrl-C in between would
            # leave the thread running, unstopped, past the exit line (deferred: raised once
            # it is held)
            with interrupts.deferred():
                beside = db.Beside(con, lambda cur: db.materialize(cur, part), "display")
        try:
            db.materialize(con, "row_error", bound_row_error(mode))
            clock.lap("row_error")
            # where the error enters: blame reads row_error, not the views after it, and runs
            # beside them (msq.blame.run.PendingBlame)
            with interrupts.deferred():  # started and held, or neither (see above)
                pending = start_blame(con, mode, inp, opts, made)
            db.materialize(con, "verdicts")
            clock.lap("verdicts")
            if beside is not None:
                beside.result()
                clock.lap(part)
        finally:
            if beside is not None:
                beside.stop()
        # statistics: stat_result, which result_statistics reads (its texts printed for the
        # readers that ask: msq.export.outputs.result_table)
        for view in (result_table(mode), "marks"):
            db.materialize(con, view, bound_result(mode) if view == result_table(mode) else None)
            clock.lap(view)
        _summarize_and_hand_on(con, mode, result, clock, on_result)
        # its tables feed the outputs and the history
        result.blame = pending.result() if pending is not None else \
            blame_compare(con, mode, inp, opts, made)
    except BaseException:
        if pending is not None:
            pending.cancel()
        raise
    clock.lap("blame (wait)")


def report_writer(con: duckdb.DuckDBPyConnection, mode: str, opts: Options,
                  result: CompareResult) -> dict[str, Callable[[Path], None]]:
    """``--format html``: the report is drawn from this compare's connection (msq/report)."""
    if "html" not in opts.formats:
        return {}
    from msq.report import write_compare_report  # lazy: only --format html loads the report

    return {"html": lambda path: write_compare_report(con, mode, path, opts, result)}
def new_result(mode: str, inp: SingleInput) -> CompareResult:
    """An empty result of one compare: its mode, absolute dump paths, rank and step."""
    rank, step = parse_rank_step(Path(inp.npu_json))
    return CompareResult(mode=mode, npu_path=os.path.abspath(inp.npu_json),
                         bench_path=os.path.abspath(inp.bench_json), rank=rank, step=step)


def summarize(con: duckdb.DuckDBPyConnection, mode: str, result: CompareResult) -> None:
    """Counts, the advisor's finding and the first red row, from the materialised views."""
    counts = dict(con.execute("SELECT kind, count(*) FROM compare_rows GROUP BY kind").fetchall())
    marks = dict(con.execute("SELECT mark, count(*) FROM marks GROUP BY mark").fetchall()) \
        if mode != "md5" else {}
    _set_counts(result, counts, marks)
    line, suspect, advice = con.execute(
        "SELECT line, suspect, advice FROM advisor_finding").fetchall()[0]
    _set_finding(result, line, suspect, advice,
                 int(db.scalar(con, "SELECT count(*) FROM failing_rows")))
    if result.red:
        # The default mode says which rule fired with its numbers (verdicts.reason); compat only
        # has the rules' names
        why_sql, verdicts = (f"m.{MARK_REASON}", "") if result.compat else (
            f"coalesce(nullif(v.reason, ''), m.{MARK_REASON})", "LEFT JOIN verdicts v USING (out_seq) ")
        out_seq, name, why = con.execute(
            f'SELECT m.out_seq, r."NPU Name", {why_sql} FROM marks m '
            f"JOIN result_{mode} r USING (out_seq) {verdicts}WHERE m.mark = 'red' "
            "ORDER BY m.out_seq LIMIT 1").fetchall()[0]
        result.first_red = RowRef(int(out_seq), str(name), str(why or ""))
    if result.compat:
        return
    if line != "NA":
        found = con.execute("SELECT reason FROM verdicts WHERE out_seq = ?", [int(line)]).fetchone()
        result.suspect_reason = found[0] if found and found[0] else ""
    _set_unmatched(result, con.execute(
        "SELECT r.kind, v.unmatched_kind, count(*) FROM verdicts v "
        "JOIN compare_rows r USING (out_seq) WHERE v.unmatched_kind IS NOT NULL "
        "GROUP BY ALL ORDER BY ALL").fetchall())


def _set_counts(result: CompareResult, counts: dict[str, int], marks: dict[str, int]) -> None:
    """The result's row counts (rows by kind) and mark counts (rows by mark)."""
    result.rows = sum(counts.values())
    result.matched = counts.get("matched", 0)
    result.unmatched_npu = counts.get("npu_only", 0)
    result.unmatched_bench = counts.get("bench_only", 0)
    result.red, result.yellow = marks.get("red", 0), marks.get("yellow", 0)


def _set_finding(result: CompareResult, line: str, suspect: str, advice: str,
                 failing: int) -> None:
    """The advisor's finding (advisor_finding's row) and the count of failing rows."""
    result.suspect_line, result.suspect, result.advice = line, suspect, advice
    result.suspect_row = None if line == "NA" else sheet_row(int(line))[1]
    result.failing = failing


def _set_unmatched(result: CompareResult, reasons: list[tuple[str, str, int]]) -> None:
    """The unmatched rows by (kind, reason code), in that order; a default-mode compare that
    matched nothing says why."""
    result.unmatched_reasons = {(kind, why): n for kind, why, n in reasons}
    if result.rows and not result.matched:
        result.nothing_compared = nothing_compared_message(result)


#: What to try when no row matched, by the most common reason the rows are unmatched.
_NOTHING_HINTS = {
    "call": "the call counters differ; try -f, which pairs the calls of each API in order",
    "taken": "the call counters differ; try -f, which pairs the calls of each API in order",
    "dtype": "the dtypes differ everywhere: are both dumps of the same model and inputs?",
    "shape": "the shapes differ everywhere: are both dumps of the same model and inputs?",
    "dm_unnamed": "the -dm mapping names none of the NPU rows; check its names",
    "dm_missing": "the bench lacks every name the -dm mapping gives; check its names",
}


def nothing_compared_message(result: CompareResult) -> str:
    """Why a default-mode compare with no matched row is an error, and what to try."""
    worst = max(result.unmatched_reasons.items(), key=lambda kv: kv[1], default=None)
    hint = _NOTHING_HINTS.get(worst[0][1], "") if worst else ""
    return (f"nothing compared: none of the {result.rows} rows has a counterpart "
            f"({result.unmatched_npu} NPU-only, {result.unmatched_bench} bench-only; each row's "
            f"Err_message says why){'; ' + hint if hint else ''}; "
            "check that both dumps are of the same model, step and rank")


def compare(input_param: Mapping[str, Any], output_path: str | os.PathLike[str],
            stack_mode: bool = False, auto_analyze: bool = True, fuzzy_match: bool = False,
            **kwargs: Any) -> CompareResult:
    """Compare two dumps, as ``msprobe.pytorch.compare`` does, and write the workbook and advisor.

    Args:
        input_param: ``npu_json_path``, ``bench_json_path``, ``stack_json_path`` (and optional
            ``is_print_compare_log``), as msprobe's API takes them.
        output_path: output directory (created if missing).
        stack_mode: add the NPU_Stack_Info column.
        auto_analyze: write the advisor file.
        fuzzy_match: match ops without their call counters.
        **kwargs: ``compat="msprobe-1.1"``, ``data_mapping``, ``formats``, ``label``, ``db``,
            ``record``, ``workers``, and the MindSpore mappings.

    Returns:
        A :class:`CompareResult` with counts, the suspect and the written files.

    Raises:
        NothingComparedError: the default mode matched no row (the outputs are written).
    """
    opts = options_from_kwargs(stack_mode, auto_analyze, fuzzy_match, kwargs)
    inp = input_from_api(input_param)
    result = run_compare(inp, Path(output_path), opts)
    if result.nothing_compared:  # not a pass: the caller must not read it as one
        raise NothingComparedError(result.nothing_compared, [result])
    return result


def run_compare(inp: SingleInput, output_dir: Path, opts: Options, suffix: str = "",
                early: EarlyMetrics | None = None,
                opened: EarlyDatabase | None = None) -> CompareResult:
    """Validate the output directory, then compare (``early``, ``opened``: see
    :func:`run_single`)."""
    ensure_output_dir(output_dir)
    if opts.record:
        check_target(opts.db, output_dir)
    if not inp.npu_json.is_file() or not inp.bench_json.is_file():
        raise InputError(f"{inp.npu_json} / {inp.bench_json}: both must be dump.json files")
    start_run(opts, output_dir, _single_card_noise)  # a no-op when msq.runner started it
    result = run_single(inp, output_dir, opts, suffix, early, opened)
    finish_run([result], output_dir, opts, result.stamp or None)
    return result


def _single_card_noise(inp: Any, output_dir: Path, opts: Options) -> list[CompareResult]:
    """A reference noise run given to :func:`compare`: one card (directories are compared by
    msq.runner and msq.distributed, above this module)."""
    if not isinstance(inp, SingleInput):
        raise UsageError("a reference noise run of directories goes with a directory compare "
                         "(msq compare, run_from_compare_json, compare_distributed); compare() "
                         "takes a single-card one")
    return [run_compare(inp, output_dir, opts)]


# --- Batches: several pairs of dumps compared through one set of queries (a pool worker's) ---
#
# A pair's compare costs ~1,300 M instructions whatever its size (DuckDB binding, planning and
# optimising each view's query) beside ~125 k a row: a 24,500-row pair's fixed part is ~30 %
# (bench/README, "Target 5: what batching pairs would save"). A batch loads its pairs into the
# same tables, each pair's op_seq and row_seq running on from the previous pair's (so every
# join on them, and on the out_seq and ord made from them, stays within a pair) and each op and
# row marked with its pair (``ops.pair``, ``tensors.pair``: what relates rows by name or by
# order groups by it too: op_candidates, op_pairs_default, unmatched_reasons, blame's key
# windows, name joins and ``prior`` window). The match, the windows, the per-row error, the
# verdicts, the result, its marks and blame's tables are computed once for the batch
# (:func:`compute_batch`); then each pair in turn (:func:`batch_pair`) sees the batch's tables
# through views of its own rows, numbered as its own compare numbers them, and its summary,
# blame summary, outputs and history rows are made from them as a single compare's are.


@dataclasses.dataclass(frozen=True)
class BatchPlace:
    """Where a pair's rows are in a batch's tables: its number and the offsets added to its
    op_seq and row_seq when loaded (:func:`load_sides`), and those its ord and out_seq have
    (the first of each in the batch's op_pairs and compare_rows; set once the rows are paired)."""

    pair: int
    op_base: int
    row_base: int
    ord_range: tuple[int, int] = (0, -1)   # first and last ord of the pair (inclusive)
    out_range: tuple[int, int] = (0, -1)   # first and last out_seq
    #: its compare rows of a kind other than 'matched' (out_seq, kind), :func:`unmatched_rows`
    others: tuple[tuple[int, str], ...] = ()


@dataclasses.dataclass
class BatchPair:
    """One pair of a batch: its input, both sides read, its place."""

    inp: SingleInput
    npu: SideData
    bench: SideData
    place: BatchPlace


class BatchDatabase(Protocol):
    """The kept database a batch runs in (msq.pair_tables.WorkerDatabase): as
    :class:`msq.opening.EarlyDatabase` (:meth:`take`, :attr:`views`), and it keeps the views a
    batch creates (its mode's, unmatched_reasons) for the next batch (:meth:`batch_views`)."""

    views: set[str]

    def take(self, threads: int | None) -> Any: ...

    def batch_views(self, con: Any, statements: dict[str, str]) -> None: ...


class NotBatchable(Exception):  # a decision, not a failure: the pairs run one by one
    """The pairs cannot share one set of queries (their modes or settings differ, an option
    whose views are not pair-safe): each is compared alone."""


def batchable(opts: Options) -> bool:
    """Whether a batch's options allow comparing pairs at once: the default mode (--compat's
    matching and windows are a walk over one pair's rows), none of the options whose tables
    relate rows by name without the pair (-s's stacks, -dm's and MindSpore's mappings, a
    reference noise run's bands by row name), no -f (op_keys then is the view over the rows),
    no user views (they may read anything)."""
    return (not opts.is_compat and not opts.sql_dir and not opts.fuzzy_match
            and not opts.stack_mode and opts.data_mapping is None and not opts.api_mapping
            and not opts.cell_mapping and not opts.layer_mapping and opts.workers == 1
            and (opts.blame_run is None or opts.blame_run.bands is None))


def read_batch(inps: list[SingleInput], opts: Options) -> tuple[str, list[BatchPair]]:
    """Read every pair's dumps and check them as :func:`prepare` does; returns the batch's mode
    and its pairs with their offsets. Raises the first pair's error (the caller then compares
    each alone), and :class:`NotBatchable` when the pairs cannot share queries."""
    pairs: list[BatchPair] = []
    mode = ""
    op_base = row_base = 0
    for k, inp in enumerate(inps):
        npu, bench = read_sides(inp.npu_json, inp.bench_json, opts.is_compat)
        pair_mode = detect_mode(npu, bench, opts.is_compat)
        check_comparable(npu, bench, opts)
        if inp.stack_json is not None:  # read and checked, as prepare does (no -s)
            check_stack_json(inp.stack_json)
        if pair_mode != "statistics" or (mode and pair_mode != mode):
            raise NotBatchable(f"{inp.npu_json}: a {pair_mode} compare")
        if resolve_framework(opts, npu.looks_mindspore) != "pytorch":
            raise NotBatchable(f"{inp.npu_json}: a MindSpore dump")
        if is_cross_framework(opts, bench.path, False, False):
            raise NotBatchable(f"{inp.bench_json}: across frameworks")
        mode = pair_mode
        pairs.append(BatchPair(inp, npu, bench, BatchPlace(k, op_base, row_base)))
        op_base += max(npu.ops.num_rows, bench.ops.num_rows)
        row_base += max(npu.rows.num_rows, bench.rows.num_rows)
    return mode, pairs


def compute_batch(inps: list[SingleInput], opts: Options, opened: BatchDatabase,
                  ) -> tuple[duckdb.DuckDBPyConnection, str, list[BatchPair]]:
    """Every pair's tables up to the result and its marks, computed at once for the batch (see
    above), blame's tables too, in the kept database ``opened`` (a pool worker's,
    msq.pair_tables.WorkerDatabase);
    then :func:`batch_pair` gives each pair its own. Returns the connection, the mode and the
    pairs with their places."""
    if not batchable(opts):
        raise NotBatchable("these options compare pairs one by one")
    mode, pairs = read_batch(inps, opts)
    con = opened.take(1)
    if con is None:
        raise NotBatchable("no kept database")
    con.execute("INSERT INTO settings VALUES (?, ?, ?, ?, ?, ?, ?)",
                [mode, False, False, False, False, False, False])
    unique = unique_op_keys(pairs)
    load_batch(con, pairs)
    for part in pairs:  # nothing reads them again (~95 MB a worker in a 4-pair root batch)
        part.npu.release()
        part.bench.release()
    # the mode's views, kept by the database from one batch to the next (DuckDB parses each
    # text as it creates the view): shipped views only (no --sql-dir in a batch)
    files, _ = view_files(COMPARE_VIEWS, variants=[mode, rules_variant(opts)],
                          skip=unused_views(opts) | opened.views)
    opened.batch_views(con, {file.name: view_statement(batch_view_file(file, mode),
                                                       defer=db.can_defer_binding(con))
                             for file in files})
    # a view of ops, not a table (BATCH_VIEWS): op_pairs reads it alone (~37 M instructions a
    # 4-pair root batch to store its 40,000 rows, their keys as long texts); the database's own
    # view kept as db.materialize keeps it (renamed back by the kept database's reset)
    keep = "ALTER VIEW op_keys RENAME TO _src_op_keys; " if db.KEEP_SOURCES else ""
    con.execute(f"{keep}CREATE OR REPLACE VIEW op_keys AS {READER_OP_KEYS}")
    # the settings just inserted: not compat, not across frameworks (read_batch)
    batch_op_pairs(con, unique)
    rows_and_windows(con)
    others = unmatched_rows(con)
    create_unmatched_reasons(con, opened, bool(others))
    db.materialize(con, "row_error", batch_row_error(mode))
    for view in ("verdicts", batch_stored(mode), "marks"):
        with planned_without(con, BATCH_PLAN_SKIPS.get(view, ())):
            db.materialize(con, view, batch_select(view, mode))
    # (every row's names where a pair's outputs read its view of blame_rows: its CSV, Parquet,
    # HTML report; its workbook's blame sheet reads the local rows alone)
    if batch_blame(con, mode, [(p.place.pair, p.inp.npu_json, p.inp.bench_json) for p in pairs],
                   opts, opened.views, all_names=pair_reads_views(opts)):
        # read by blame_rows alone: no pair's view of them (a pair reads its own blame_rows
        # and blame_edges, BATCH_TABLES)
        con.execute("DROP TABLE blame_keys; DROP TABLE blame_tensors")
    return con, mode, place_pairs(con, pairs, others)


#: The columns of sql/compare/rules/row_error.sql that verdicts.sql alone reads (the row's
#: statistics, its value's texts, the statistic that set err_stat on each side), which a
#: statistics batch's row_error leaves out (:func:`batch_row_error`) and its verdicts reads
#: from the tensors rows of its judged rows alone (:data:`BATCH_VERDICTS_EDITS`).
VERDICTS_ONLY = ("n_max", "n_min", "b_max", "b_min", "n_max_str", "b_max_str", "n_stat_val",
                 "b_stat_val")


def batch_row_error(mode: str) -> str:
    """A statistics batch's row_error: :func:`bound_row_error`'s rows without the columns
    verdicts alone reads (:data:`VERDICTS_ONLY`; blame reads out_seq, err, err_kind and the
    dtypes). A single compare's verdicts reads them for every row, where row_error has both
    sides' tensors rows joined already (bench/README, "Session 25: rows"); a batch's judges
    ~4 % of its rows (:data:`BATCH_VERDICTS_EDITS`), and storing the eight columns of every
    row cost more than joining the tensors rows again for those few (bench/README,
    "Session 27: rows"). DuckDB drops an unused column of a subquery as it plans: the tensors
    columns are not scanned, the CASEs not made."""
    return (f"SELECT * EXCLUDE ({', '.join(VERDICTS_ONLY)}) FROM (\n{bound_row_error(mode)}\n)")


#: What sql/compare/rules/default/verdicts.sql reads of row_error (as written there): the rows
#: its rules judge, and the worst input error of each window.
VERDICTS_ROWS = ("e AS (  -- row_error carries the row's statistics and dtypes verdicts reads"
                 " (see there)\n"
                 "  SELECT x.*, w.win, coalesce(w.is_input, false) AS is_input\n"
                 "  FROM row_error x\n  LEFT JOIN hl_windows w USING (out_seq)\n),")
VERDICTS_INPUTS = "  WHERE w.is_input AND x.err IS NOT NULL\n  GROUP BY w.win"

#: A batch's judged rows (``e0``, :data:`BATCH_VERDICTS_EDITS`) with the columns of
#: :data:`VERDICTS_ONLY` as sql/compare/rules/row_error.sql makes them, from both sides'
#: tensors rows: the statistic that set err_stat is err_stat's (row_error sets it exactly
#: where it sets n_stat_val and b_stat_val, in statistics mode: a batch's only).
BATCH_VERDICTS_STATS = """e AS (  -- the judged rows' statistics (msq.pipeline.batch_row_error)
  SELECT e0.*, n.max_num AS n_max, n.min_num AS n_min, b.max_num AS b_max, b.min_num AS b_min,
    n.max_str AS n_max_str, b.max_str AS b_max_str,
    CASE e0.err_stat WHEN 'Norm' THEN n.norm_num WHEN 'Mean' THEN n.mean_num
      WHEN 'Max' THEN n.max_num WHEN 'Min' THEN n.min_num END AS n_stat_val,
    CASE e0.err_stat WHEN 'Norm' THEN b.norm_num WHEN 'Mean' THEN b.mean_num
      WHEN 'Max' THEN b.max_num WHEN 'Min' THEN b.min_num END AS b_stat_val
  FROM e0 JOIN compare_rows r USING (out_seq)
  LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
  LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
),"""
#: What it ends with (as written there): its rows' last join.
VERDICTS_FROM = "FROM texts t\nLEFT JOIN unmatched_reasons u USING (out_seq)"

#: A statistics batch's verdicts (the only batches, :func:`read_batch`), as its readers read
#: them: {the text of verdicts.sql: what it becomes}. A batch stores the verdicts of its rows
#: that may say something (a rule, hence a mark; dtypes that differ, hence maybe a precision
#: note; an unmatched reason), ~4 % of a root-8x8-5000 batch's rows, not every row's. Every
#: reader of a batch's verdicts (stat_result's join, which reads the rows with a reason, a mark
#: or an unmatched reason alone; marks; :func:`batch_results`' joins and its count of unmatched
#: kinds) gives the same for a row it does not find as for a row of none (a NULL reason read
#: as ''): their insert was ~60 M instructions of a 6-pair root batch, and each reader scanned
#: and filtered them again. So:
#:
#: * the rows judged are those whose error may meet a rule (``err`` >= the least threshold: an
#:   inf, a NaN too; outside tensor mode no rule reads anything else of a row), whose dtypes
#:   differ or that are unmatched: the rules' CASEs, the windows' join and the texts' projection
#:   ran on every row (~-106 M);
#: * the worst input error only of the windows of those rows that are not inputs (the only
#:   rows whose rule reads it, 'error grows'): ~-12 M;
#: * the rows stored: those with a rule, dtypes that differ or an unmatched reason, a filter on
#:   the columns the reason is made of, after the last join (a filter on verdicts' own columns
#:   is pushed into its last projection's reason, computed twice then: +12 M).
BATCH_VERDICTS_EDITS = {
    VERDICTS_ROWS: "e0 AS (  -- the rows judged\n" + VERDICTS_ROWS.split("\n", 1)[1].replace(
        "\n),", "\n  WHERE x.err >= least(verdict_red_err(), verdict_yellow_err())"
        " OR x.n_dtype_raw IS NOT NULL OR x.unmatched\n),") + "\n" + BATCH_VERDICTS_STATS,
    VERDICTS_INPUTS: VERDICTS_INPUTS.replace(
        "\n", " AND w.win IN (SELECT win FROM e0 WHERE NOT is_input)\n"),
    VERDICTS_FROM: VERDICTS_FROM + "\nWHERE t.rule IS NOT NULL OR t.n_dtype_raw IS NOT NULL"
                   " OR u.out_seq IS NOT NULL"}


def batch_verdicts() -> str:
    """A statistics batch's verdicts: sql/compare/rules/default/verdicts.sql's rows that may say
    something, judged for the rows that may (:data:`BATCH_VERDICTS_EDITS`); result_tensor and
    result_md5, which no batch has, read every row's."""
    file = db.sql_file("compare/rules/default/verdicts.sql")
    return _bound(file.origin, file.body, BATCH_VERDICTS_EDITS)


def batch_select(view: str, mode: str) -> str | None:
    """What :func:`compute_batch` materialises ``view`` from (``select`` of
    :func:`db.materialize`): a statistics batch's verdicts :func:`batch_verdicts` and its
    stat_judged :func:`bound_stat_judged`, another mode's result table :func:`bound_result`'s,
    else None (the view's rows)."""
    if mode == "statistics" and view in ("verdicts", "stat_judged"):
        return batch_verdicts() if view == "verdicts" else bound_stat_judged()
    return bound_result(mode) if view == result_table(mode) else None


#: The optimizer passes a batch's statement is planned without, by the view it materialises
#: (:func:`compute_batch`): passes whose planning costs more than they save in the run.
#: DuckDB plans every statement anew (a prepared statement's EXECUTE, ``executemany`` and the
#: same text again are each bound and optimised again: no plan outlives its run), so a batch
#: pays its statements' planning in full (~740 M instructions of a 4-pair root batch), most of
#: it in verdicts (~170 M, ~120 M of it unmatched_reasons' query read there) and stat_result.
#: verdicts without statistics propagation, common subexpressions and projection pull-up:
#: see bench/README, "Session 22: plan". A pass rewrites a plan into one of the same result:
#: the rows are the same (tests/test_batch.py holds a batch's pairs to their own compares).
BATCH_PLAN_SKIPS: dict[str, tuple[str, ...]] = {
    "verdicts": ("statistics_propagation", "common_subexpressions", "projection_pullup")}


@contextlib.contextmanager
def planned_without(con: duckdb.DuckDBPyConnection, passes: tuple[str, ...]) -> Iterator[None]:
    """The block's statements on ``con`` planned without the optimizer ``passes`` (none: as
    they are). DuckDB's ``disabled_optimizers`` is the database's (global), reset after: a
    batch's connection is a cursor of the worker's kept database, which the setting would
    outlive, and nothing else runs on that database during the batch's statements."""
    if not passes:
        yield
        return
    con.execute(f"SET disabled_optimizers = {db.quote_str(','.join(passes))}")
    try:
        yield
    finally:
        con.execute("RESET disabled_optimizers")


#: What :func:`load_batch` selects of each pair's readers' ops columns.
BATCH_OPS_LOAD = "* REPLACE (op_seq + {op} AS op_seq), {pair} AS pair"

#: tensors' columns a batch's rows may give as another column's values or a constant
#: (:func:`load_batch`): {column: (the readers' column it equals, or None; the text every
#: row has, or None: NULL on every row)}. match_name is the batch's disp_name
#: (:func:`batch_tensors_select`). disp_name, disp_io and data_name are copies or constants the readers
#: make (msq/_flatten.c emit_row); the statistics' kinds and texts are equal by what a dump
#: holds: a tensor's Min is there (a number, a bool) where its Max is, its Norm where its Mean
#: is, and their texts are NULL but for a scalar argument's, its value in all four
#: (msq/_flatten.c stat_cols, typed_row); a batch's dumps have no md5 (one with an md5 is an
#: md5 compare, read_batch: not a batch's). Every side of root-8x8-5000 has them all so. The
#: sources are columns stored (none of these).
DERIVED_ROWS: dict[str, tuple[str | None, str | None]] = {
    "disp_name": ("name", None), "match_name": ("name", None), "disp_io": ("io", None),
    "md5": (None, None), "data_name": (None, "-1"), "min_kind": ("max_kind", None),
    "norm_kind": ("mean_kind", None), "min_str": ("max_str", None),
    "mean_str": ("max_str", None), "norm_str": ("max_str", None)}


def derived_columns(pairs: list[BatchPair]) -> list[str]:
    """The columns of :data:`DERIVED_ROWS` that every side of every pair has equal to its
    source column or text, row for row (their buffers compared: a statistics dump's disp_name is
    its name, disp_io its io in the default mode and data_name "-1", msq/_flatten.c emit_row),
    each on its own; match_name where disp_name is. Only the C reader's columns are looked at
    (a pyarrow table of the Python reader: none)."""
    held = [name for name in DERIVED_ROWS if name != "match_name"]
    for part in pairs:
        for rows in (part.npu.rows, part.bench.rows):
            if not isinstance(rows, Columns):
                return []
            for batch in rows.batches:
                cols = {c[0]: c for c in batch}
                held = [name for name in held if _equal_rows(cols, name, *DERIVED_ROWS[name])]
    # match_name is the batch's disp_name (batch_tensors_select): name where disp_name is
    return [name for name in DERIVED_ROWS
            if name in held or (name == "match_name" and "disp_name" in held)]


def _equal_rows(cols: dict[str, Any], name: str, source: str | None, text: str | None) -> bool:
    """Whether the C reader's column ``name`` (of ``cols``) is its ``source`` column, ``text``,
    or NULL (neither given) on every row."""
    col = cols.get(name)
    if col is None or col[1] != "str":
        return False
    if source is not None:
        src = cols.get(source)
        return src is not None and same_column(col, src)
    if text is None:
        return bool(col[3] == col[2])  # its NULLs: every row
    return all_text(col, text)


def batch_tensors_select(derived: list[str], coded: dict[str, str],
                         by_code: dict[str, str] | None = None) -> tuple[str, str]:
    """:func:`load_batch`'s SELECT of a pair's tensors rows where the ``derived`` columns are
    made by the ``tensors`` view (:func:`tensor_rows`): those of the readers left out,
    match_name made of disp_name where it is not derived; and the REPLACE list of the SELECT
    over every pair's (:func:`_insert_pairs`' ``codes``) that stores the ``coded`` columns as
    their ENUMs (:func:`coded_text`), or by the expression ``by_code`` gives one whose rows
    are handed over as codes (:func:`batch_codes`). The codes' CASEs once over the pairs' UNION
    ALL, not in each pair's SELECT: DuckDB binds and optimises each branch's expressions anew
    (~9 M instructions a pair for these CASEs and their ENUM constants), and a projection over
    the union evaluates the same expressions on the same rows, in the same order."""
    stored = [c for c in derived if c != "match_name"]
    exclude = f"EXCLUDE ({', '.join(stored)}) " if stored else ""
    match = "" if "match_name" in derived else "disp_name AS match_name, "
    by_code = by_code or {}
    codes = ", ".join(f"{by_code.get(c) or coded_text(db.quote_ident(c), enum)} "
                      f"AS {db.quote_ident(c)}"
                      for c, enum in coded.items() if c not in derived)
    select = (f"* {exclude}REPLACE (op_seq + {{op}} AS op_seq, row_seq + {{row}} AS row_seq), "
              f"{match}{{pair}} AS pair")
    return select, codes


#: The values of each ENUM of :data:`CODED_ROWS` and :data:`CODED_DTYPE` that
#: :func:`coded_text` gives as constants, the most common first
ENUM_VALUES = {"row_side": ("npu", "bench"), "row_io": ("input", "output"),
               "stat_kind": ("f", "n", "i", "b", "s"),
               "row_dtype": ("torch.float32", "torch.float16", "torch.bfloat16", "<class 'int'>")}


def coded_text(column: str, enum: str) -> str:
    """A SQL expression: the text ``column`` as its ENUM ``enum``, its common values
    (:data:`ENUM_VALUES`) as constants, compared as texts, any other cast (which fails where
    the ENUM does not hold it). The same values as the cast alone, which DuckDB makes by a hash
    lookup of every text (~120 instructions a value)."""
    whens = " ".join(f"WHEN {db.quote_str(v)} THEN {db.quote_str(v)}::{enum}"
                     for v in ENUM_VALUES[enum])
    return f"CASE {column} {whens} ELSE {column}::{enum} END"


#: The table a batch stores its ``tensors`` rows in (:func:`load_batch`): ``tensors`` is then
#: a view of it, the columns of :data:`DERIVED_ROWS` it holds as copies of others or constants
#: made by the view (:func:`tensor_rows`). Not generated columns of ``tensors`` itself: DuckDB
#: binds and evaluates a table's generated columns again for every 2,048-row chunk it inserts
#: (DataTable::VerifyAppendConstraints, ~65 M instructions a 6-pair root batch), a view's
#: expressions only where a query reads them.
TENSOR_ROWS = "tensor_rows"

#: tensors' texts of few values a batch stores as ENUMs of the schema
#: (sql/compare/schema/00_types.sql) in :data:`TENSOR_ROWS`, the ``tensors`` view giving them
#: back as texts: {column: its ENUM}. The readers write no other value (msq/_flatten.c
#: emit_row, stat_cols); one that were would fail the INSERT, and the batch's pairs would be
#: compared one by one.
CODED_ROWS = {"side": "row_side", "io": "row_io", "disp_io": "row_io", "max_kind": "stat_kind",
              "min_kind": "stat_kind", "mean_kind": "stat_kind", "norm_kind": "stat_kind"}

#: tensors' dtype as an ENUM of the dtypes a statistics dump of PyTorch holds and the readers'
#: own (sql/compare/schema/00_types.sql), where it holds every one of the batch's
#: (:func:`load_batch`)
CODED_DTYPE = {"dtype": "row_dtype"}


#: The columns of :data:`CODED_ROWS` the ``tensors`` view of a batch shows as their ENUMs, not
#: cast back to texts (:func:`tensor_rows`): side and io, which their readers compare with a
#: constant alone (``side = 'npu'``, blame's ``io = 'input'``) or with another side, to join the
#: two sides' rows. Through a text,
#: each such filter was ``CAST(side AS VARCHAR) = 'npu'``, the ENUM cast for every row of the
#: table a scan read (DuckDB casts the column, not the constant) in each join of a side's rows
#: (row_error, the result's rows, blame, the matching); an ENUM compared with a constant is
#: the constant cast once, and the filter is pushed into the scan: ~-116 M instructions a
#: 6-pair root batch (bench/README, "Session 27: rows"); io's ~-14 M more (blame_keys',
#: blame_tensors' and stat_result's scans, "Session 28: rows"). ORDER BY side would sort 'npu'
#: first (the ENUM's order): no reader of a batch's tensors orders by it (io's ENUM is in the
#: texts' order, 'input' before 'output').
ENUM_SHOWN = ("side", "io")


#: tensors' columns (name, type, default) in the schema's order
_TENSORS_COLUMNS = ("SELECT column_name, data_type, column_default FROM duckdb_columns() "
                    "WHERE database_name = current_database() AND schema_name = 'main' "
                    "AND table_name = 'tensors' ORDER BY column_index")


def tensor_rows(con: duckdb.DuckDBPyConnection, columns: list[tuple[str, str, str | None]],
                derived: list[str], coded: dict[str, str], drop: str) -> None:
    """``tensors`` (its ``columns``, :data:`_TENSORS_COLUMNS`) made as a view of a new, empty
    :data:`TENSOR_ROWS` table of its other columns (the schema's names, order, types and
    defaults; those of ``coded`` as its ENUMs), with its ``derived`` columns of
    :data:`DERIVED_ROWS` made by the view: the same columns, types and rows as the table, but
    those of :data:`ENUM_SHOWN` (the ENUM's values are the texts).
    ``drop``: what to drop first (the schema's table, or the view and table made before)."""
    stored, shown = [], []
    for name, type_, default in columns:
        column = db.quote_ident(name)
        if name in derived:
            source, text = DERIVED_ROWS[name]
            made = (db.quote_ident(source) if source is not None
                    else db.quote_str(text) if text is not None else "NULL")
            shown.append(f"{made}::{type_} AS {column}")
        elif name in coded:
            stored.append(f"{column} {coded[name]}")
            shown.append(column if name in ENUM_SHOWN else f"{column}::{type_} AS {column}")
        else:
            stored.append(f"{column} {type_}" + (f" DEFAULT {default}" if default is not None else ""))
            shown.append(column)
    con.execute(f"{drop}; CREATE TABLE {TENSOR_ROWS} ({', '.join(stored)}); "
                f"CREATE VIEW tensors AS SELECT {', '.join(shown)} FROM {TENSOR_ROWS}")


def load_batch(con: duckdb.DuckDBPyConnection, pairs: list[BatchPair]) -> None:
    """Every pair's ``ops`` and ``tensors`` rows (as :func:`load_sides` with each pair's place),
    in one INSERT a table: DuckDB keeps an INSERT's rows as they are in a table still empty,
    but copies them once more into one that has rows (four 24,500-row pairs loaded one by one:
    40, 105, 270 and 110 ms of CPU).

    ``tensors`` is a view of :data:`TENSOR_ROWS` (:func:`tensor_rows`), which the rows go in.
    Where every pair's rows have a column of :data:`DERIVED_ROWS` equal to another column or
    a constant (:func:`derived_columns`: any statistics dump of the C reader, each column on its
    own), it is not stored but made by the view: the same rows and types. DuckDB's append of a
    text (its statistics, its UTF-8 check, the Arrow conversion) costs ~100-240 instructions a
    value, NULL or short: these are 10 of a row's 18 texts. The texts of few values are stored
    as ENUMs (:data:`CODED_ROWS`); the dtypes too where the ENUM holds every one of the batch's
    (:data:`CODED_DTYPE`), else as texts."""
    derived = derived_columns(pairs)
    _insert_pairs(con, "ops", BATCH_OPS_LOAD, "", pairs)
    columns = con.execute(_TENSORS_COLUMNS).fetchall()
    coded = {**CODED_ROWS, **CODED_DTYPE}
    rows, by_code = batch_codes(con, pairs, {c: e for c, e in coded.items() if c not in derived})
    tensor_rows(con, columns, derived, coded, "DROP TABLE tensors")
    try:
        _insert_pairs(con, TENSOR_ROWS, *batch_tensors_select(derived, coded, by_code), pairs,
                      rows)
    except duckdb.ConversionException:  # a dtype the ENUM does not hold: its texts stored
        if any(c in by_code for c in CODED_DTYPE):  # coded: the ENUM holds them (batch_codes)
            raise
        tensor_rows(con, columns, derived, CODED_ROWS,
                    f"DROP VIEW tensors; DROP TABLE {TENSOR_ROWS}")
        _insert_pairs(con, TENSOR_ROWS, *batch_tensors_select(derived, CODED_ROWS, by_code),
                      pairs, rows)


#: Each ENUM's values in :func:`batch_codes`' order (the code of a text its place), read from
#: the schema once a process: :data:`ENUM_VALUES` first, then the others in the ENUM's order
_CODE_VALUES: dict[str, tuple[str, ...]] = {}


def code_values(con: duckdb.DuckDBPyConnection, enum: str) -> tuple[str, ...]:
    """The values of the schema's ENUM ``enum`` numbered for :func:`batch_codes`: its
    common ones (:data:`ENUM_VALUES`) first."""
    if enum not in _CODE_VALUES:
        (held,) = con.execute(f"SELECT enum_range(NULL::{enum})").fetchall()[0]
        first = ENUM_VALUES.get(enum, ())
        _CODE_VALUES[enum] = (*first, *(v for v in held if v not in first))
    return _CODE_VALUES[enum]


def batch_codes(con: duckdb.DuckDBPyConnection, pairs: list[BatchPair], coded: dict[str, str],
                ) -> tuple[list[Any], dict[str, str]]:
    """Each pair's tensors rows as :func:`load_batch` hands them to DuckDB, and the SQL
    expression of each ``coded`` column (its ENUM's) that they hold as one byte a row, its text's
    code (:func:`code_values`; msq.flatten.coded_column), not as texts. DuckDB's import of a text,
    its compare with the common values and their cast (:func:`coded_text`) cost ~120
    instructions a value more than a byte's and its CASE: ~1.4 M values a 6-pair root batch.
    A column is coded where every row of every side of the batch holds one of its ENUM's values
    (or NULL) and both sides of every pair were read in C; else it stays text, as before. The
    codes are the reader's where it gave them (:attr:`msq.flatten.Columns.codes`,
    :func:`reader_codes`), else found in the texts (coded_column)."""
    sides = [concat_columns([part.npu.rows, part.bench.rows]) for part in pairs]
    if not coded or not all(isinstance(rows, Columns) for rows in sides):
        return sides, {}
    kept = dict(coded)  # the columns every batch of every pair's rows holds as codes
    seen = dict.fromkeys(coded, 0)
    nulls = dict.fromkeys(coded, False)
    codes: list[list[dict[str, CColumn]]] = []
    for rows in sides:
        assert isinstance(rows, Columns)
        codes.append([])
        for batch, written in zip(rows.batches, rows.codes, strict=True):
            by_name = {col[0]: col for col in batch}
            made_here: dict[str, CColumn] = {}
            for column, enum in list(kept.items()):
                got = None if column not in by_name else (
                    reader_codes(written[column], by_name[column], code_values(con, enum))
                    if column in written else
                    coded_column(by_name[column], code_values(con, enum)))
                if got is None:
                    del kept[column]
                    continue
                made_here[column] = got[0]
                seen[column] |= got[1]
                nulls[column] = nulls[column] or by_name[column][3] > 0
            codes[-1].append(made_here)
    if not kept:
        return sides, {}
    made: list[Any] = []
    for rows, its in zip(sides, codes, strict=True):
        assert isinstance(rows, Columns)
        made.append(Columns([[its[b][col[0]] if col[0] in kept else col for col in batch]
                             for b, batch in enumerate(rows.batches)]))
    return made, {c: code_case(db.quote_ident(c), enum, code_values(con, enum), seen[c], nulls[c])
                  for c, enum in kept.items()}


def reader_codes(coded: Coded, col: CColumn, values: tuple[str, ...]) -> tuple[CColumn, int] | None:
    """The text column ``col`` as :func:`msq.flatten.coded_column` gives it (a byte a row, the
    place of its text in ``values``, and the places held), made of the codes the C reader wrote
    as it read the column (``coded``, :data:`msq.flatten.Coded`: its own places, mapped to
    ``values``' by a byte table, most often the same places); None where a text some row holds
    is not among ``values``."""
    codes, texts, seen = coded
    table = bytearray(range(256))
    held = 0
    for j, text in enumerate(texts):
        if seen >> j & 1:
            if text not in values:
                return None
            table[j] = values.index(text)
            held |= 1 << table[j]
    n = col[2]
    if codes is None:  # every row values[0] of the reader's
        data: Any = bytes(table[:1]) * n
    elif any(table[j] != j for j in range(len(texts)) if seen >> j & 1):
        data = bytes(memoryview(codes)).translate(table)
    else:
        data = codes
    return (col[0], "u8", n, col[3], col[4], data, None), held


def code_case(column: str, enum: str, values: tuple[str, ...], seen: int, nulls: bool) -> str:
    """A SQL expression: the codes ``column`` (:func:`batch_codes`: a byte, the place of the
    text in ``values``) as the ENUM ``enum``, for the codes of the bit mask ``seen``; NULL
    where the code is. Without NULLs the last code is the CASE's ELSE, one compare fewer;
    a single code without NULLs is a constant."""
    held = [k for k in range(len(values)) if seen >> k & 1]
    if not held:
        return f"NULL::{enum}"
    whens = [f"WHEN {column} = {k} THEN {db.quote_str(values[k])}::{enum}" for k in held]
    if nulls:
        return f"CASE {' '.join(whens)} END"
    last = f"{db.quote_str(values[held[-1]])}::{enum}"
    return f"CASE {' '.join(whens[:-1])} ELSE {last} END" if len(held) > 1 else last


def _insert_pairs(con: duckdb.DuckDBPyConnection, table: str, select: str, codes: str,
                  pairs: list[BatchPair], rows: list[Any] | None = None) -> None:
    """Every pair's rows of ``table`` (``ops``, else the tensors rows: ``rows``, each pair's,
    :func:`batch_codes`) in one INSERT, each pair's through ``select`` (its place's numbers
    formatted in), the UNION ALL of them through ``SELECT * REPLACE (codes)`` where ``codes``
    is not empty."""
    streams: list[str] = []
    try:
        parts = []
        for k, part in enumerate(pairs):
            name = f"_batch_{table}_{part.place.pair}"
            if table == "ops":
                con.register(name, concat_columns([part.npu.ops, part.bench.ops]))
            else:
                con.register(name, rows[k] if rows is not None else
                             concat_columns([part.npu.rows, part.bench.rows]))
            streams.append(name)
            where = select.format(op=part.place.op_base, row=part.place.row_base,
                                  pair=part.place.pair)
            parts.append(f"SELECT {where} FROM {name}")
        union = " UNION ALL ".join(parts)
        con.execute(f"INSERT INTO {table} BY NAME "
                    + (f"SELECT * REPLACE ({codes}) FROM ({union})" if codes else union))
    finally:
        for name in streams:
            con.unregister(name)


def place_pairs(con: duckdb.DuckDBPyConnection, pairs: list[BatchPair],
                others: list[tuple[int, str]]) -> list[BatchPair]:
    """Each pair's first and last ord and out_seq in the batch's op_pairs and compare_rows, and
    its compare rows of ``others`` (:func:`unmatched_rows`). Its ords by one grouped scan of
    op_pairs by their pair (:data:`BATCH_PAIR_COLUMNS`: op_pairs_default.sql numbers them pair
    first, so that no two pairs' ord ranges meet); its out_seqs those of its first and last
    ords' compare rows where each has some (row_pairs.sql numbers the rows in their ords'
    order), else by one grouped scan of compare_rows, a row's pair its ord's range's
    (:func:`msq.db.range_case`: ~21 M instructions of a 7-pair root batch). Not a range join of
    every op pair with the pairs and a join of every compare row with those (~50 M)."""
    ords = {int(k): (int(lo), int(hi)) for k, lo, hi in con.execute(
        "SELECT pair, min(ord), max(ord) FROM op_pairs GROUP BY pair").fetchall()}
    spans = sorted(ords.values())
    if any(low[1] >= high[0] for low, high in itertools.pairwise(spans)):
        raise AssertionError(f"two pairs' ord ranges meet: {ords}")
    ends = {int(o): (int(lo), int(hi)) for o, lo, hi in con.execute(
        "SELECT ord, min(out_seq), max(out_seq) FROM compare_rows WHERE ord IN "
        f"({', '.join(str(o) for span in spans for o in span) or 'NULL'}) "
        "GROUP BY ord").fetchall()}
    if all(lo in ends and hi in ends for lo, hi in spans):
        outs = {k: (ends[lo][0], ends[hi][1]) for k, (lo, hi) in ords.items()}
    else:
        outs = {int(k): (int(lo), int(hi)) for k, lo, hi in con.execute(
            f"SELECT {db.range_case('ord', [(k, *r) for k, r in ords.items()])} AS k, "
            "min(out_seq), max(out_seq) FROM compare_rows GROUP BY ALL").fetchall()
            if k is not None}
    placed = []
    for part in pairs:
        k = part.place.pair
        lo, hi = outs.get(k, (0, -1))
        placed.append(dataclasses.replace(part, place=dataclasses.replace(
            part.place, ord_range=ords.get(k, (0, -1)), out_range=(lo, hi),
            others=tuple(row for row in others if lo <= row[0] <= hi))))
    return placed


#: :func:`unmatched_rows`' query: the compare rows without an NPU row, then those without a
#: bench row, each a test DuckDB makes as it scans (``IS NULL`` of one column), reading the
#: rows' kinds in the few vectors that hold such a row alone
UNMATCHED_ROWS = ("SELECT out_seq, kind FROM compare_rows WHERE npu_row IS NULL UNION ALL "
                  "SELECT out_seq, kind FROM compare_rows "
                  "WHERE bench_row IS NULL AND npu_row IS NOT NULL")


def unmatched_rows(con: duckdb.DuckDBPyConnection) -> list[tuple[int, str]]:
    """A batch's compare rows of a kind other than 'matched' (out_seq, kind), in out_seq order:
    a few dozen of a root batch's ~170,000 rows. What a batch reads of their kinds
    (:func:`skip_unmatched_reasons`; :func:`batch_results`' counts of rows by kind, each pair's
    rows its out_seq range: ~47 M instructions of a 7-pair root batch grouped by pair, and its
    unmatched reasons by kind, a join of compare_rows: ~15 M) from one query. A batch's compare
    rows are row_pairs.sql's, which gives each row a kind, 'matched' to a row with both an NPU
    and a bench row alone (any other lacks one): so the rows lacking one
    (:data:`UNMATCHED_ROWS`) and of another kind, not a test of every row's kind (its text
    read for every row: ~17 M instructions of a 7-pair root batch, ~4 M so)."""
    return sorted((int(out_seq), str(kind)) for out_seq, kind in con.execute(
        UNMATCHED_ROWS).fetchall() if kind != "matched")


#: The batch's tables each pair reads (renamed ``batch_<name>`` by :func:`split_batch`) and
#: what its own view of one (:func:`pair_views`) subtracts from each numbered column to number
#: its rows as the pair's own compare does: "op" (its op_base), "row", "ord", "out"; the rows
#: of a pair are those of its pair number ("pair") or of its out_seq or ord range.
BATCH_TABLES: dict[str, tuple[str, dict[str, str]]] = {
    "ops": ("pair", {"op_seq": "op"}),
    TENSOR_ROWS: ("pair", {"op_seq": "op", "row_seq": "row"}),
    "op_keys": ("pair", {"op_seq": "op"}),
    "op_pairs": ("ord", {"ord": "ord", "npu_op": "op", "bench_op": "op"}),
    "compare_rows": ("out", {"out_seq": "out", "ord": "ord", "npu_row": "row", "bench_row": "row"}),
    "hl_windows": ("out", {"out_seq": "out", "win": "ord"}),
    "row_error": ("out", {"out_seq": "out"}),
    "verdicts": ("out", {"out_seq": "out"}),
    "marks": ("out", {"out_seq": "out"}),
    # blame's (msq.blame.run.batch_blame), when blame is on
    "blame_rows": ("out", {"out_seq": "out", "op_seq": "op"}),
    "blame_edges": ("pair", {"consumer_row": "row", "consumer_op": "op", "producer_row": "row",
                             "producer_op": "op"}),
}


#: The batch's tables of :data:`BATCH_TABLES` that a batch keeps as views of other batch tables
#: (:func:`compute_batch`): not renamed by :func:`split_batch`, so that each pair's is the same
#: view over that pair's own views (op_keys over its ``ops``: numbered as its own compare's).
#: ``tensors`` is such a view too (over :data:`TENSOR_ROWS`, :func:`load_batch`), not one of
#: :data:`BATCH_TABLES`.
BATCH_VIEWS = ("op_keys",)


def batch_tables(mode: str) -> dict[str, tuple[str, dict[str, str]]]:
    """:data:`BATCH_TABLES` and what the batch stores of the mode's result (:func:`batch_stored`:
    statistics' stat_judged, its stat_result a view over it that each pair's reads over its
    own view of it, as op_keys)."""
    return {**BATCH_TABLES, batch_stored(mode): ("out", {"out_seq": "out"})}


#: A batch table's columns' types, by (table, column) (:func:`split_batch`).
ColumnTypes = dict[tuple[str, str], str]


def split_batch(con: duckdb.DuckDBPyConnection, mode: str) -> ColumnTypes:
    """The batch's tables renamed ``batch_<name>`` (blame's where blame ran): their names
    become each pair's views. Returns their columns' types (for :func:`pair_views`)."""
    tables = {name for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND NOT temporary").fetchall()}
    con.execute("; ".join(f"ALTER TABLE {name} RENAME TO batch_{name}"
                          for name in batch_tables(mode)
                          if name in tables
                          or not (name.startswith("blame_") or name in BATCH_VIEWS)))
    return {(t, c): ty for t, c, ty in con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = 'main' "
        "AND starts_with(table_name, 'batch_')").fetchall()}


def pair_views(con: duckdb.DuckDBPyConnection, mode: str, place: BatchPlace,
               types: ColumnTypes) -> None:
    """Each batch table (:func:`batch_tables`) as a view of this pair's rows under its own name,
    numbered as its own compare numbers them (its columns' ``types`` kept), its pair 0. Views,
    not copies: a scan skips the row groups of other pairs, and the rows a query keeps are
    the pair's alone."""
    bases = {"op": place.op_base, "row": place.row_base, "ord": place.ord_range[0],
             "out": place.out_range[0]}
    statements = []
    for name, (rows, columns) in batch_tables(mode).items():
        table = f"batch_{name}"
        if (table, next(iter(columns))) not in types:  # blame's, with blame off
            continue
        moved = [f"({column} - {bases[base]})::{types[(table, column)]} AS {column}"
                 for column, base in columns.items()]
        own = name in BATCH_PAIR_COLUMNS  # a column a single compare's table has not
        if (table, "pair") in types and not own:
            moved.append("0 AS pair")
        if name == "blame_rows":  # its texts, which the batch stores as codes
            moved += [f"{sql} AS {column}" for column, sql in BATCH_TEXTS.items()]
        where = (f"pair = {place.pair}" if rows == "pair" else
                 "{} BETWEEN {} AND {}".format(
                     "out_seq" if rows == "out" else "ord",
                     *(place.out_range if rows == "out" else place.ord_range)))
        statements.append(f"CREATE OR REPLACE VIEW {name} AS SELECT * "
                          f"{'EXCLUDE (pair) ' if own else ''}REPLACE "
                          f"({', '.join(moved)}) FROM {table} WHERE {where}")
    con.execute("; ".join(statements))


def batch_pair(con: duckdb.DuckDBPyConnection, mode: str, part: BatchPair,
               types: ColumnTypes) -> None:
    """One pair of a batch after :func:`split_batch` (``types``: what it returned): its views
    (:func:`pair_views`), from which the caller renders and records the pair as a single
    compare's (its summary and blame's, :func:`batch_results`, are made for the batch at once);
    :func:`end_batch_pair` then undoes what this pair made."""
    pair_views(con, mode, part.place, types)


def pair_reads_views(opts: Options) -> bool:
    """Whether a batch's pair's outputs read its views (:func:`batch_pair`) whatever its
    workbook does: any format but the workbook's (CSV and Parquet copy the pair's result and
    blame views, the HTML report reads its rows). The workbook's sheets are the pair's slices
    of its batch's rows (msq.export.xlsx.batch_sheets), which read none of them: its views are
    then made only if a sheet cannot be such a slice (``batch_sheets``' ``views``; making and
    dropping them took ~43 M instructions of a 24,500-row pair)."""
    return any(fmt != "xlsx" for fmt in opts.formats)


def pair_of(column: str, places: list[BatchPlace]) -> str:
    """A SQL expression: the pair of a batch's row by its out_seq ``column`` (each pair's rows
    are those of its out_seq range, :func:`place_pairs`); NULL outside every range."""
    return db.range_case(column, [(p.pair, *p.out_range) for p in places])


#: A batch's failing rows (a batch is of the statistics mode alone, read_batch): the rows of
#: the mode's failing_rows view (sql/compare/reports/statistics/failing_rows.sql: out_seq and
#: "NPU Name" where "Result" = 'Warning'), read from stat_judged, the table its result view
#: shows those columns of (:data:`BATCH_STORED`): "Result" is 'Warning' where a matched row
#: warns. Through the views DuckDB bound result_statistics' sixteen cells each time: ~18 M
#: instructions a query; through stat_result it made the texts of every row
#: (tests/test_batch.py holds the two equal).
BATCH_FAILING_ROWS = ('SELECT out_seq, "NPU Name" AS name FROM stat_judged '
                      "WHERE kind = 'matched' AND warn")

#: The advisor's finding of every pair of a batch at once: advisor_finding's own SQL
#: (:func:`batch_findings`) over each pair's first failing row (``failing_rows``: one row a pair
#: that has one, which the view's file reads by name), each of its steps by pair: {its text over
#: one compare's failing rows, as written there: what it becomes}. A row's line, suspect and
#: advice are made of that row alone, so each pair's are those of its own compare; a pair of
#: none gets the file's 'NA' row (its ``NOT EXISTS`` then the pairs of none). One statement,
#: not one copy of the file a pair in a UNION ALL: DuckDB bound and optimised each copy (~5 M
#: instructions a pair).
BATCH_FINDING_EDITS = {
    "SELECT out_seq, name FROM failing_rows ORDER BY out_seq LIMIT 1":
        "SELECT pair, out_seq, name FROM failing_rows",
    "AS hit, name, out_seq\n": "AS hit, name, out_seq, pair\n",
    "SELECT\n  CAST(out_seq AS VARCHAR) AS line,":
        "SELECT\n  pair, CAST(out_seq AS VARCHAR) AS line,",
    "SELECT 'NA', 'NA',": "SELECT b.pair, 'NA', 'NA',",
    "\nWHERE NOT EXISTS (SELECT 1 FROM first_row)": "\nFROM passed_pairs b",
}

#: What :func:`batch_findings` runs: its pairs and their first failing rows as lists (one
#: statement whatever their number)
_BATCH_FINDINGS = ("WITH failing_rows AS (SELECT unnest(?::INTEGER[]) AS pair, "
                   "unnest(?::BIGINT[]) AS out_seq, unnest(?::VARCHAR[]) AS name), "
                   "passed_pairs AS (SELECT unnest(?::INTEGER[]) AS pair) "
                   "SELECT * FROM (\n{body}\n)")


def batch_findings(con: duckdb.DuckDBPyConnection, pairs: list[int],
                   first: dict[int, tuple[int, str | None]],
                   ) -> dict[int, tuple[str, str, str]]:
    """The advisor's finding (line, suspect, advice) of each of ``pairs``, each from its first
    failing row ``first[pair]`` (its out_seq in the pair's own numbering, its name) where it has
    one, else the 'NA' one (:data:`BATCH_FINDING_EDITS`: ``passed_pairs``, those of none)."""
    file = db.sql_file("compare/reports/advisor_finding.sql")
    sql = _BATCH_FINDINGS.format(body=_bound(file.origin, file.body, BATCH_FINDING_EDITS))
    have = sorted(first)
    return {int(k): (line, suspect, advice) for k, line, suspect, advice in con.execute(
        sql, [have, [first[k][0] for k in have], [first[k][1] for k in have],
              [k for k in pairs if k not in first]]).fetchall()}


def batch_results(con: duckdb.DuckDBPyConnection, mode: str, pairs: list[BatchPair],
                  opts: Options) -> list[CompareResult]:
    """Each pair's summary (what :func:`summarize` gives its own compare) and blame summary
    (msq.blame.summary.summarize_batch), from the batch's tables before :func:`split_batch`:
    each figure one query for every pair, grouped by pair (a pair's rows are those of its
    out_seq range), not one a pair over its views (~11 queries planned a pair, ~30 ms of a
    24,500-row pair's CPU). In the order of ``pairs``."""
    places = [part.place for part in pairs]
    results: dict[int, CompareResult] = {}
    for part in pairs:
        results[part.place.pair] = result = new_result(mode, part.inp)
        result.compat = False
    of = pair_of("out_seq", places)
    # the row counts _set_counts reads, by pair: its rows are those of its out_seq range (each
    # out_seq once, in its ord's order, BatchPlace), those of a kind other than 'matched' its
    # others (unmatched_rows); "" counts the rows of any other kind (their sum is the pair's
    # rows); none for a pair of no rows
    counts: dict[int, dict[str, int]] = {k: {} for k in results}
    for place in places:
        n = place.out_range[1] - place.out_range[0] + 1
        if n > 0:
            kinds = collections.Counter(kind for _, kind in place.others)
            counts[place.pair].update({
                "matched": n - len(place.others), "npu_only": kinds["npu_only"],
                "bench_only": kinds["bench_only"],
                "": len(place.others) - kinds["npu_only"] - kinds["bench_only"]})
    marks: dict[int, dict[str, int]] = {k: {} for k in results}
    reds: dict[int, int] = {}  # each pair's first red row (its marks' least out_seq)
    if mode != "md5":
        for k, mark, n, first_seq in con.execute(
                f"SELECT {of} AS pair, mark, count(*), min(out_seq) FROM marks "
                "GROUP BY ALL").fetchall():
            marks[k][mark] = n
            if mark == "red":
                reds[k] = int(first_seq)
    for k, result in results.items():
        _set_counts(result, counts[k], marks[k])
    # each pair's first failing row (in out_seq order, as advisor_finding takes it), the count
    # of its failing rows and its verdict's reason
    # (an aggregate a pair, not two windows over its failing rows; out_seq is unique, and
    # arg_min_null keeps a NULL name as the window's row did)
    first: dict[int, tuple[int, str, int, str | None]] = {
        k: (int(out_seq), name, int(n), reason) for k, out_seq, name, n, reason in con.execute(
            "SELECT f.pair, f.out_seq, f.name, f.n, v.reason FROM ("
            "  SELECT pair, min(out_seq) AS out_seq, arg_min_null(name, out_seq) AS name,"
            "    count(*) AS n"
            f"  FROM (SELECT {of} AS pair, out_seq, name FROM ({BATCH_FAILING_ROWS})) "
            "GROUP BY pair"
            ") f LEFT JOIN verdicts v USING (out_seq)").fetchall()}
    base = {p.pair: p.out_range[0] for p in places}
    findings = batch_findings(con, list(results), {
        k: (out_seq - base[k], name) for k, (out_seq, name, _, _) in first.items()})
    for k, result in results.items():
        _, _, n, reason = first.get(k, (0, "", 0, None))
        _set_finding(result, *findings[k], n)
        if result.suspect_line != "NA":
            result.suspect_reason = reason or ""
    if reds:
        # each pair's first red row (its least out_seq among its red marks, found with the
        # marks' counts), then those rows' names and reasons: a look-up of a few out_seqs,
        # not every red mark grouped by pair and joined again (the result table has a row for
        # every compare row, so the first red row has its own)
        pair_at = {out_seq: k for k, out_seq in reds.items()}
        for out_seq, name, why in con.execute(
                f'SELECT m.out_seq, r."NPU Name", '
                f"coalesce(nullif(v.reason, ''), m.{MARK_REASON}) "
                # what the batch stores of its result: its result view's "NPU Name"
                # (BATCH_FAILING_ROWS)
                f"FROM marks m JOIN {batch_stored(mode)} r USING (out_seq) "
                "LEFT JOIN verdicts v USING (out_seq) "
                f"WHERE m.out_seq IN ({', '.join(map(str, sorted(pair_at)))}) "
                "AND m.mark = 'red'").fetchall():
            k = pair_at[int(out_seq)]
            results[k].first_red = RowRef(int(out_seq) - base[k], str(name), str(why or ""))
    # the unmatched rows by pair, kind (their compare rows', unmatched_rows: 'matched' for a row
    # not among them) and reason, in that order (texts by their bytes, as DuckDB orders them);
    # not a join of verdicts with every compare row
    kind_of = {out_seq: kind for place in places for out_seq, kind in place.others}
    firsts = sorted((p.out_range[0], p.pair) for p in places if p.out_range[1] >= p.out_range[0])
    starts = [lo for lo, _ in firsts]
    kinds_by: collections.Counter[tuple[int, str, str]] = collections.Counter()
    for out_seq, why in con.execute("SELECT out_seq, unmatched_kind FROM verdicts "
                                    "WHERE unmatched_kind IS NOT NULL").fetchall():
        k = firsts[bisect.bisect_right(starts, out_seq) - 1][1]
        kinds_by[(k, kind_of.get(out_seq, "matched"), why)] += 1
    reasons: dict[int, list[tuple[str, str, int]]] = {k: [] for k in results}
    for (k, kind, why), n in sorted(kinds_by.items()):
        reasons[k].append((kind, why, n))
    for k, result in results.items():
        _set_unmatched(result, reasons[k])
    if blame_on(opts):
        bands = opts.blame_run is not None and opts.blame_run.bands_wanted
        blames = summarize_batch(con, [(p.pair, *p.out_range, p.op_base) for p in places], bands)
        for part in pairs:
            blames[part.place.pair].rank = parse_rank_step(Path(part.inp.npu_json))[0]
            results[part.place.pair].blame = blames[part.place.pair]
    return [results[part.place.pair] for part in pairs]


#: The schema's tables whose rows are the batch's (its settings; blame's, msq.blame.run.batch_blame).
_BATCH_ROWS = ("settings", "blame_params", "blame_nesting", "blame_bands")

#: The catalog as :func:`end_batch_pair` restores it between the pairs of a batch: each view's
#: ('v') and table's ('t') name, in one plain query (two list aggregates in subqueries cost
#: DuckDB's optimiser ~2x the time: ~2.1 against ~1.3 ms, three calls a pair)
_BATCH_CATALOG = ("SELECT 'v', view_name FROM duckdb_views() "
                  "WHERE database_name = current_database() AND schema_name = 'main' "
                  "AND NOT internal AND NOT temporary "
                  "UNION ALL SELECT 't', table_name FROM duckdb_tables() "
                  "WHERE database_name = current_database() AND schema_name = 'main' "
                  "AND NOT temporary")


def batch_catalog(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[str]]:
    """The views' and the tables' names, each sorted (for :func:`end_batch_pair`)."""
    rows = con.execute(_BATCH_CATALOG).fetchall()
    return (sorted(name for kind, name in rows if kind == "v"),
            sorted(name for kind, name in rows if kind == "t"))


def end_batch_pair(con: duckdb.DuckDBPyConnection, before: tuple[list[str], list[str]]) -> None:
    """Undo what a pair of a batch made (``before``: :func:`batch_catalog` after
    :func:`split_batch`), for the next pair: the tables it made dropped, the views it made
    tables of renamed back (msq.db.KEEP_SOURCES), any rows it put in the schema's tables
    deleted; the batch's own tables, settings and blame's parameters and nesting kept. Raises
    when the catalog is not ``before``'s again (the caller then discards the database and
    compares the pairs one by one)."""
    views, tables = batch_catalog(con)
    unchanged = (views, tables) == before  # the pair made nothing (its views not made at all)
    old_views, old_tables = set(before[0]), set(before[1])
    script = [f"DROP TABLE {db.quote_ident(t)}" for t in tables if t not in old_tables]
    for view in views:
        if view in old_views:
            continue
        name = view[len("_src_"):]
        if view.startswith("_src_") and name in old_views and name not in views:
            script.append(f"ALTER VIEW {db.quote_ident(view)} RENAME TO {db.quote_ident(name)}")
        else:
            script.append(f"DROP VIEW {db.quote_ident(view)}")
    script += [f"DELETE FROM {db.quote_ident(t)}" for t in sorted(old_tables)
               if not t.startswith("batch_") and t not in _BATCH_ROWS]
    con.execute("; ".join(script))
    # (the DELETEs alone, when the catalog was before's already, change no name in it)
    if not unchanged and batch_catalog(con) != before:
        raise RuntimeError("a batch's database differs after a pair from before it")
