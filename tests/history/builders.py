"""Builders shared by the history tests: msprobe statistics dumps of a four-op model, the msq
command, and a process that holds a database's lock.

One model of four forward ops gives 13 output rows per compare. ``RUNS`` says how each NPU run
departs from the bench, per (step, rank).
"""

from __future__ import annotations

import csv
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
from click.testing import CliRunner

import msq
from msq.cli import main

STEPS, RANKS = (0, 1, 2), (0, 1)
MODEL: dict[str, tuple[list[list[int]], list[list[int]]]] = {
    "Functional.linear.0.forward": ([[4, 8], [16, 8], [16]], [[4, 16]]),
    "Functional.relu.0.forward": ([[4, 16]], [[4, 16]]),
    "Functional.linear.1.forward": ([[4, 16], [4, 16], [4]], [[4, 4]]),
    "Functional.mse_loss.0.forward": ([[4, 4], [4, 4]], [[]]),
}
Change = dict[tuple[str, str, int], dict[str, float]]   # (op, io, index) -> {stat: factor}
LINEAR0_OUT = ("Functional.linear.0.forward", "output", 0)
RELU_OUT = ("Functional.relu.0.forward", "output", 0)
LINEAR1_OUT = ("Functional.linear.1.forward", "output", 0)
# How each NPU run departs from the bench, per (step, rank). Both runs also drift linear.1's output
# Mean by 1/256 per step (below the default mode's 1% of the tensor's RMS: no colour). v1: linear.1
# output Max x3 at step1/rank1 (red, Warning) and relu output Max x17/16 at step2/rank0 (yellow: 6%
# of its scale, from equal inputs). v2: the same, but relu x3 (yellow -> red) and linear.0 output
# Max x17/16 at step0/rank1 (pass -> yellow). docs/rules.md has the rules.
RUNS: dict[str, dict[tuple[int, int], Change]] = {
    "v1": {(1, 1): {LINEAR1_OUT: {"Max": 3.0}}, (2, 0): {RELU_OUT: {"Max": 1.0625}}},
    "v2": {(1, 1): {LINEAR1_OUT: {"Max": 3.0}}, (2, 0): {RELU_OUT: {"Max": 3.0}},
           (0, 1): {LINEAR0_OUT: {"Max": 1.0625}}},
}
DRIFT = 1 / 256  # linear.1's output Mean, per step


def tensor(shape: list[int], seed: int) -> dict[str, Any]:
    """One tensor argument in msprobe's statistics format (exact binary fractions)."""
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape,
            "Max": 2.0 + seed / 8, "Min": -1.0 - seed / 16, "Mean": 1.0 + seed / 32,
            "Norm": 4.0 + seed / 4, "requires_grad": False}


def model_dump(step: int, rank: int, change: Change, drift: bool) -> dict[str, Any]:
    """dump.json of one step and rank: ``change`` scales stats, ``drift`` shifts linear.1's Mean."""
    data: dict[str, Any] = {}
    seed = 0
    for op, (inputs, outputs) in MODEL.items():
        entry: dict[str, Any] = {"input_args": [], "input_kwargs": {}, "output": []}
        for io, shapes in (("input", inputs), ("output", outputs)):
            for i, shape in enumerate(shapes):
                arg = tensor(shape, seed + rank)
                seed += 1
                for stat, factor in change.get((op, io, i), {}).items():
                    arg[stat] *= factor
                if drift and (op, io, i) == LINEAR1_OUT:
                    arg["Mean"] += DRIFT * step
                entry["input_args" if io == "input" else "output"].append(arg)
        data[op] = entry
    return {"task": "statistics", "level": "L1", "dump_data_dir": None, "data": data}


def write_json(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def build_roots(base: Path) -> dict[str, Path]:
    """Dump roots bench/, v1/, v2/ (step*/rank*/dump.json) and compare_<label>.json per run."""
    for step in STEPS:
        for rank in RANKS:
            where = f"step{step}/rank{rank}/dump.json"
            write_json(base / "bench" / where, model_dump(step, rank, {}, drift=False))
            for label, run in RUNS.items():
                write_json(base / label / where, model_dump(step, rank, run.get((step, rank), {}),
                                                            drift=True))
    return {label: write_json(base / f"compare_{label}.json",
                              {"npu_path": str(base / label), "bench_path": str(base / "bench")})
            for label in RUNS}


def single_card(base: Path, change: Change | None = None,
                extra: dict[str, Any] | None = None) -> Path:
    """A one-card compare.json (NPU and bench of step0/rank0); ``extra`` adds ops to both sides."""
    npu, bench = model_dump(0, 0, change or {}, drift=False), model_dump(0, 0, {}, drift=False)
    for doc in (npu, bench):
        doc["data"].update(extra or {})
    npu_path = write_json(base / "npu" / "step0" / "rank0" / "dump.json", npu)
    bench_path = write_json(base / "bench" / "step0" / "rank0" / "dump.json", bench)
    return write_json(base / "compare.json",
                      {"npu_path": str(npu_path), "bench_path": str(bench_path)})


def msq_cmd(*args: str, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The real ``msq`` command in a fresh process."""
    return subprocess.run([sys.executable, "-m", "msq.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, check=False)


def sql(db: Path, query: str, *extra: str) -> str:
    """``msq sql`` in-process; returns stdout (asserting exit status 0)."""
    result = CliRunner().invoke(main, ["sql", query, "--db", str(db), *extra])
    assert result.exit_code == 0, result.output + (result.stderr or "")
    return result.stdout


def csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(text.splitlines()))


def run_api(compare_json: Path, out: Path, **kwargs: Any) -> Any:
    doc = json.loads(compare_json.read_text())
    return msq.compare({"npu_json_path": doc["npu_path"], "bench_json_path": doc["bench_path"]},
                       out, formats="csv", auto_analyze=False, **kwargs)


def count(db: Path, query: str = "SELECT count(*) FROM compares") -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute(query).fetchall()[0][0])
    finally:
        con.close()


def blame_as_version_12(con: duckdb.DuckDBPyConnection) -> None:
    """Rewrite a history (open in ``con``) into the layout schema versions 6 to 12 wrote for
    blame's rows: blame_data's reason and via as texts (no ``reasons``), blame_edges' side and
    how as texts, the same rows in recording order, and the view blame_rows reading them
    (sql/history/migrate/v11.sql's). Nothing to do on a file without the table reasons."""
    from msq import db as db_sql

    if not con.execute("SELECT count(*) FROM duckdb_tables() "
                       "WHERE table_name = 'reasons'").fetchall()[0][0]:
        return
    v11 = db_sql.sql_file("history/migrate/v11.sql").text
    start = v11.index("CREATE TABLE blame_data_v11 (")
    con.execute(v11[start:v11.index("\n);", start) + 3].replace("blame_data_v11", "v12_blame"))
    con.execute("INSERT INTO v12_blame BY NAME SELECT d.* EXCLUDE (reason_id, via_id), "
                "rs.reason, v.name AS via FROM blame_data d "
                "JOIN reasons rs ON rs.reason_id = d.reason_id "
                "JOIN names v ON v.name_id = d.via_id ORDER BY d.compare_id, d.out_seq")
    con.execute("CREATE TABLE v12_edges (compare_id BIGINT USING COMPRESSION rle, "
                "side VARCHAR USING COMPRESSION dict_fsst, "
                "consumer_seq BIGINT USING COMPRESSION bitpacking, producer_seq BIGINT, "
                "how VARCHAR USING COMPRESSION dict_fsst, candidates INTEGER)")
    con.execute("INSERT INTO v12_edges SELECT * FROM blame_edges ORDER BY rowid")
    con.execute("DROP VIEW blame_rows")
    con.execute("DROP TABLE blame_data")
    con.execute("DROP TABLE reasons")
    con.execute("DROP TABLE blame_edges")
    con.execute("ALTER TABLE v12_blame RENAME TO blame_data")
    con.execute("ALTER TABLE v12_edges RENAME TO blame_edges")
    con.execute(v11[v11.index("CREATE VIEW blame_rows AS"):])


def as_version_12(db: Path) -> None:
    """Rewrite a history into the layout schema version 12 wrote (:func:`blame_as_version_12`)."""
    con = duckdb.connect(str(db))
    blame_as_version_12(con)
    con.execute("UPDATE meta SET value = '12' WHERE key = 'schema_version'")
    con.close()


def result_as_version_11(con: duckdb.DuckDBPyConnection) -> None:
    """Rewrite a history (open in ``con``) into the layout schema versions 8 to 11 wrote for
    result_data: its kind, npu_dtype, bench_dtype, result, verdict, err_message, mark and
    mark_rules as keys into ``terms`` and failing and severity as columns (no
    ``result_classes``), the same rows in recording order, and the view result_rows reading them
    (sql/history/migrate/v10.sql's). The classes' texts that ``terms`` lacks are added to it
    (after the largest key, in their sorted order, as a version-11 msq added a compare's new
    terms). Nothing to do on a file without the table result_classes. Its blame rows as
    version 12 wrote them first (:func:`blame_as_version_12`)."""
    from msq import db as db_sql
    from msq.history.recorder import RESULT_CLASS_COLUMNS, RESULT_TERMS_8

    blame_as_version_12(con)
    if not con.execute("SELECT count(*) FROM duckdb_tables() "
                       "WHERE table_name = 'result_classes'").fetchall()[0][0]:
        return
    v10 = db_sql.sql_file("history/migrate/v10.sql").text
    texts = tuple(c for c in RESULT_TERMS_8 if c in RESULT_CLASS_COLUMNS)
    con.execute("INSERT INTO terms SELECT (SELECT coalesce(max(term_id), 0) FROM terms) "
                "+ (row_number() OVER (ORDER BY term))::INTEGER, term "
                f"FROM (SELECT DISTINCT unnest([{', '.join(texts)}]) AS term "
                "FROM result_classes) u "
                "WHERE term IS NOT NULL "
                "AND NOT EXISTS (SELECT 1 FROM terms h WHERE h.term = u.term)")
    start = v10.index("CREATE TABLE result_data_v10 (")
    con.execute(v10[start:v10.index("\n);", start) + 3].replace("result_data_v10", "v11_data"))
    ids = ", ".join(f"t_{c}.term_id AS {c}_id" for c in texts)
    joins = " ".join(f"LEFT JOIN terms t_{c} ON t_{c}.term = c.{c}" for c in texts)
    con.execute(f"INSERT INTO v11_data BY NAME SELECT d.* EXCLUDE (class_id), c.failing, "
                f"c.severity, {ids} FROM result_data d JOIN result_classes c "
                f"ON c.class_id = d.class_id {joins} ORDER BY d.compare_id, d.out_seq")
    con.execute("DROP VIEW result_rows")
    con.execute("DROP TABLE result_data")
    con.execute("DROP TABLE result_classes")
    con.execute("ALTER TABLE v11_data RENAME TO result_data")
    start = v10.index("CREATE VIEW result_rows AS")
    end = "JOIN names b ON b.name_id = r.bench_id;"
    con.execute(v10[start:v10.index(end, start) + len(end)])


def as_version_11(db: Path) -> None:
    """Rewrite a history into the layout schema version 11 wrote (:func:`result_as_version_11`)."""
    con = duckdb.connect(str(db))
    result_as_version_11(con)
    con.execute("UPDATE meta SET value = '11' WHERE key = 'schema_version'")
    con.close()


def blame_as_version_10(con: duckdb.DuckDBPyConnection) -> None:
    """Rewrite a history (open in ``con``) into the layout schema versions 8 to 10 wrote for
    blame_data: its io, role, direction, err_kind, floor_source, verdict and link as keys into
    ``terms`` and is_module and collective as columns (no ``blame_classes``), the same rows in
    recording order, and the view blame_rows joining them (sql/history/migrate/v9.sql's). The
    classes' texts that ``terms`` lacks are added to it (after the largest key, in their sorted
    order, as a version-10 msq added a compare's new terms). Nothing to do on a file without the
    table blame_classes. Its result rows as version 11 wrote them first
    (:func:`result_as_version_11`)."""
    from msq import db as db_sql
    from msq.history.recorder import BLAME_TERMS

    result_as_version_11(con)
    if not con.execute("SELECT count(*) FROM duckdb_tables() "
                       "WHERE table_name = 'blame_classes'").fetchall()[0][0]:
        return
    v8 = db_sql.sql_file("history/migrate/v8.sql").text
    v9 = db_sql.sql_file("history/migrate/v9.sql").text
    con.execute("INSERT INTO terms SELECT (SELECT coalesce(max(term_id), 0) FROM terms) "
                "+ (row_number() OVER (ORDER BY term))::INTEGER, term "
                f"FROM (SELECT DISTINCT unnest([{', '.join(BLAME_TERMS)}]) AS term "
                "FROM blame_classes) u "
                "WHERE term IS NOT NULL "
                "AND NOT EXISTS (SELECT 1 FROM terms h WHERE h.term = u.term)")
    start = v8.index("CREATE TABLE blame_data_v8 (")
    con.execute(v8[start:v8.index("\n);", start) + 3].replace("blame_data_v8", "v10_blame"))
    ids = ", ".join(f"t_{c}.term_id AS {c}_id" for c in BLAME_TERMS)
    joins = " ".join(f"LEFT JOIN terms t_{c} ON t_{c}.term = c.{c}" for c in BLAME_TERMS)
    con.execute(f"INSERT INTO v10_blame BY NAME SELECT d.* EXCLUDE (class_id), c.is_module, "
                f"c.collective, {ids} FROM blame_data d JOIN blame_classes c "
                f"ON c.class_id = d.class_id {joins} ORDER BY d.compare_id, d.out_seq")
    con.execute("DROP VIEW blame_rows")
    con.execute("DROP TABLE blame_data")
    con.execute("DROP TABLE blame_classes")
    con.execute("ALTER TABLE v10_blame RENAME TO blame_data")
    con.execute(v9[v9.index("CREATE OR REPLACE VIEW blame_rows AS"):])


def as_version_10(db: Path) -> None:
    """Rewrite a history into the layout schema version 10 wrote (:func:`blame_as_version_10`,
    :func:`result_as_version_11`)."""
    con = duckdb.connect(str(db))
    blame_as_version_10(con)
    con.execute("UPDATE meta SET value = '10' WHERE key = 'schema_version'")
    con.close()


def texts_as_version_9(con: duckdb.DuckDBPyConnection) -> None:
    """Rewrite a history (open in ``con``) into the layout schema versions 5 to 9 wrote for
    result_data's texts: each row's list ``texts`` (no table ``texts``), the same rows in
    recording order, and the view result_rows reading it (sql/history/migrate/v8.sql's).
    Nothing to do on a file without the table texts. Its blame rows as version 10 wrote them
    (:func:`blame_as_version_10`)."""
    from msq import db as db_sql

    blame_as_version_10(con)
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'texts'"
                       ).fetchall()[0][0]:
        return
    v8 = db_sql.sql_file("history/migrate/v8.sql").text
    start = v8.index("CREATE TABLE result_data_v8 (")
    con.execute(v8[start:v8.index("\n);", start) + 3].replace("result_data_v8", "v9_data"))
    con.execute("INSERT INTO v9_data BY NAME SELECT d.* EXCLUDE (texts_id), t.texts "
                "FROM result_data d LEFT JOIN texts t ON t.texts_id = d.texts_id "
                "ORDER BY d.compare_id, d.out_seq")
    con.execute("DROP VIEW result_rows")
    con.execute("DROP TABLE result_data")
    con.execute("DROP TABLE texts")
    con.execute("ALTER TABLE v9_data RENAME TO result_data")
    start = v8.index("CREATE VIEW result_rows AS")
    con.execute(v8[start:v8.index(";", start) + 1])


def as_version_9(db: Path) -> None:
    """Rewrite a history into the layout schema version 9 wrote (:func:`texts_as_version_9`)."""
    con = duckdb.connect(str(db))
    texts_as_version_9(con)
    con.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    con.close()


def terms_as_version_7(con: duckdb.DuckDBPyConnection) -> None:
    """Rewrite a history (open in ``con``) into the layout schema version 7 wrote: result_data's
    and blame_data's short texts as text columns (no ``terms``), the same rows in recording
    order, and the views result_rows and blame_rows reading them (sql/history/migrate/v7.sql's,
    v6.sql's). Nothing to do on a file without terms."""
    from msq import db as db_sql
    from msq.history.recorder import BLAME_TERMS, RESULT_TERMS_8

    texts_as_version_9(con)
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'terms'"
                       ).fetchall()[0][0]:
        return
    v7 = db_sql.sql_file("history/migrate/v7.sql").text
    v6 = db_sql.sql_file("history/migrate/v6.sql").text
    start = v7.index("CREATE TABLE result_data_v7 (")
    con.execute(v7[start:v7.index("\n);", start) + 3].replace("result_data_v7", "v7_data"))
    start = v6.index("CREATE TABLE blame_data (")
    con.execute(v6[start:v6.index("\n);", start) + 3].replace("blame_data", "v7_blame"))
    for table, stored, columns in (("v7_data", "result_data", RESULT_TERMS_8),
                                   ("v7_blame", "blame_data", BLAME_TERMS)):
        texts = ", ".join(f"t.terms[d.{c}_id] AS {c}" for c in columns)
        ids = ", ".join(f"{c}_id" for c in columns)
        con.execute(f"INSERT INTO {table} BY NAME SELECT d.* EXCLUDE ({ids}), {texts} "
                    f"FROM {stored} d, (SELECT list(term ORDER BY term_id) AS terms FROM terms) t "
                    "ORDER BY d.compare_id, d.out_seq")
    con.execute("DROP VIEW result_rows")
    con.execute("DROP VIEW blame_rows")
    con.execute("DROP TABLE result_data")
    con.execute("DROP TABLE blame_data")
    con.execute("DROP TABLE terms")
    con.execute("ALTER TABLE v7_data RENAME TO result_data")
    con.execute("ALTER TABLE v7_blame RENAME TO blame_data")
    con.execute(v7.split("ALTER TABLE result_data_v7 RENAME TO result_data;\n")[1])
    con.execute(v6[v6.index("CREATE VIEW blame_rows AS"):])


def as_version_7(db: Path) -> None:
    """Rewrite a history into the layout schema version 7 wrote (:func:`terms_as_version_7`)."""
    con = duckdb.connect(str(db))
    terms_as_version_7(con)
    con.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    con.close()


def as_version_8(db: Path) -> None:
    """Put back the view ``blame_rows`` of schema version 8 (its short texts read from a list of
    every term, sql/history/migrate/v8.sql's), result_data's lists of texts
    (:func:`texts_as_version_9`) and the version: the rows are stored as version 8 stored them."""
    from msq import db as db_sql

    v8 = db_sql.sql_file("history/migrate/v8.sql").text
    start = v8.index("CREATE VIEW blame_rows AS")
    con = duckdb.connect(str(db))
    texts_as_version_9(con)
    con.execute("DROP VIEW blame_rows")
    con.execute(v8[start:v8.index(";", start) + 1])
    con.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    con.close()


def blame_as_version_5(con: duckdb.DuckDBPyConnection) -> None:
    """Rewrite the blame rows of a history (open in ``con``) into the layout schema versions
    3 to 5 wrote: ``blame_rows`` a table of names (no ``blame_data``, no ``blame_runs``), the
    same rows in recording order (and its result rows as version 7 wrote them)."""
    terms_as_version_7(con)
    con.execute("CREATE TABLE v5_blame AS SELECT * FROM blame_rows ORDER BY compare_id, out_seq")
    con.execute("DROP VIEW blame_rows")
    con.execute("DROP TABLE blame_data")
    con.execute("DROP TABLE blame_runs")
    con.execute("ALTER TABLE v5_blame RENAME TO blame_rows")


def result_as_version_6(con: duckdb.DuckDBPyConnection) -> None:
    """Rewrite the result rows of a history (open in ``con``) into the layout schema versions
    5 and 6 wrote: result_data with its tensor metrics, md5s, npu_stack and data_name as columns
    (no lists tensor_metrics and mode_texts), the same rows in recording order, and the view
    result_rows reading them (sql/history/migrate/v5.sql's)."""
    from msq import db as db_sql

    terms_as_version_7(con)
    v5 = db_sql.sql_file("history/migrate/v5.sql").text
    start = v5.index("CREATE TABLE result_data_v5 (")
    ddl = v5[start:v5.index("\n);", start) + 3]
    con.execute(ddl.replace("result_data_v5", "v6_data"))
    con.execute("INSERT INTO v6_data BY NAME SELECT * EXCLUDE (tensor_metrics, mode_texts), "
                "tensor_metrics[1] AS cosine, tensor_metrics[2] AS max_abs_err, "
                "tensor_metrics[3] AS max_rel_err, tensor_metrics[4] AS one_thousandth_err_ratio, "
                "tensor_metrics[5] AS five_thousandths_err_ratio, mode_texts[1] AS npu_md5, "
                "mode_texts[2] AS bench_md5, mode_texts[3] AS npu_stack, "
                "mode_texts[4] AS data_name FROM result_data ORDER BY compare_id, out_seq")
    con.execute("DROP VIEW result_rows")
    con.execute("DROP TABLE result_data")
    con.execute("ALTER TABLE v6_data RENAME TO result_data")
    con.execute(v5.split("ALTER TABLE result_data_v5 RENAME TO result_data;\n")[1])


def as_version_6(db: Path) -> None:
    """Rewrite a history into the layout schema version 6 wrote (:func:`result_as_version_6`)."""
    con = duckdb.connect(str(db))
    result_as_version_6(con)
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()


def as_version_5(db: Path) -> None:
    """Rewrite a history into the layout schema version 5 wrote (:func:`blame_as_version_5`,
    :func:`result_as_version_6`)."""
    con = duckdb.connect(str(db))
    blame_as_version_5(con)
    result_as_version_6(con)
    con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    con.close()


def as_version_3(db: Path) -> None:
    """Rewrite a history into the layout schema version 3 wrote: ``result_rows`` a table of
    names (no ``names`` dictionary, no ``result_data``), the same rows in recording order, and
    ``blame_rows`` a table (:func:`blame_as_version_5`)."""
    con = duckdb.connect(str(db))
    blame_as_version_5(con)
    con.execute("CREATE TABLE v3_rows AS SELECT * FROM result_rows ORDER BY compare_id, out_seq")
    con.execute("DROP VIEW result_rows")
    con.execute("DROP TABLE result_data")
    con.execute("DROP TABLE names")
    con.execute("ALTER TABLE v3_rows RENAME TO result_rows")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.close()


def set_version(db: Path, version: str) -> None:
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [version])
    con.close()


HOLD_LOCK = """
import sys, select, duckdb
con = duckdb.connect(sys.argv[1])
print("locked", flush=True)
select.select([sys.stdin], [], [], 20)   # until told to let go (a line on stdin), at most 20 s
con.close()
"""


class LockHolder(logging.Handler):
    """A process holding the database's write lock until msq logs that it is waiting for it."""

    def __init__(self, db: Path) -> None:
        super().__init__(logging.INFO)
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(db)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"
        self.waiting: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "waiting up to" in message and not self.waiting:
            self.waiting.append(message)
            self.let_go()

    def let_go(self) -> None:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.write("go\n")
            self.proc.stdin.close()

    def __enter__(self) -> LockHolder:  # noqa: PYI034 (typing_extensions is not a dependency)
        logging.getLogger("msq").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("msq").removeHandler(self)
        self.proc.kill()
        self.proc.wait()


def locked_by_another_process(db: Path) -> bool:
    """Whether another process holds the file (a second process cannot open it to write)."""
    probe = subprocess.run([sys.executable, "-c", "import sys, duckdb; duckdb.connect(sys.argv[1])",
                            str(db)], check=False, capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        assert "lock" in probe.stderr, probe.stderr
    return probe.returncode != 0
