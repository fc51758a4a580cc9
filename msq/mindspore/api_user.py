"""MindSpore user api mapping (``-am FILE.yaml``, spec §3.8.3): validation, mapping rows, pairing.

The YAML is a list of entries ``{ms_api, pt_api, ms_args, pt_args, ms_output, pt_output}``: a
MindSpore API, the PyTorch API it corresponds to, and which input/output positions correspond.
Each position pair becomes one ``mappings`` row of kind ``api_user``
(``Functional.foo.input.1 -> Torch.bar.input.0``, ``ord`` = entry number); the SQL views
``ms_user_api_*`` pair ops and rows from them.

Default mode: an NPU API named in the YAML is paired only through the YAML; the k-th listed NPU
position meets the k-th listed bench position, and NPU arguments the entry does not list stay in
the workbook without a bench counterpart. ``--compat msprobe-1.1`` lets the entry decide only
*whether* two ops match (1.1.0's name and structure test on the listed positions, order ignored)
and then pairs every row positionally, as 1.1.0 does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from msq import db
from msq.errors import DumpError
from msq.mappings import read_yaml
from msq.match_compat import write_compat_pairs

log = logging.getLogger("msq")

KEYS = ("ms_api", "pt_api", "ms_args", "pt_args", "ms_output", "pt_output")
EXAMPLE = ("- ms_api: Functional.abs\n  pt_api: Torch.abs\n  ms_args: [0]\n  pt_args: [0]\n"
           "  ms_output: [0]\n  pt_output: [0]")


@dataclass(frozen=True)
class UserApiEntry:
    """One validated entry of a user api mapping (``number`` counts from 1, as a person would)."""

    number: int
    ms_api: str
    pt_api: str
    ms_args: tuple[int, ...]
    pt_args: tuple[int, ...]
    ms_output: tuple[int, ...]
    pt_output: tuple[int, ...]

    def rows(self) -> list[tuple[str, str]]:
        """(NPU key, bench key) per corresponding position, inputs first."""
        pairs = [(f"{self.ms_api}.input.{m}", f"{self.pt_api}.input.{p}")
                 for m, p in zip(self.ms_args, self.pt_args)]
        pairs += [(f"{self.ms_api}.output.{m}", f"{self.pt_api}.output.{p}")
                  for m, p in zip(self.ms_output, self.pt_output)]
        return pairs


def _positions(where: str, key: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise DumpError(f"{where}: '{key}' must be a list of argument positions (integers from 0), "
                        f"got {value!r}")
    return tuple(value)


def _api_name(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or value.count(".") != 1 or value.startswith(".") \
            or value.endswith("."):
        raise DumpError(f"{where}: '{key}' must be an API name such as Functional.add or "
                        f"Torch.add (prefix.api), got {value!r}")
    return value


def parse_entry(path: Path, number: int, item: Any) -> UserApiEntry | None:
    """Validate one entry; None (with a warning) when 1.1.0 would ignore it too."""
    where = f"{path}: entry {number}"
    if not isinstance(item, dict):
        raise DumpError(f"{where}: expected a mapping with keys {', '.join(KEYS)}, got a "
                        f"{type(item).__name__}; an entry looks like:\n{EXAMPLE}")
    missing = [k for k in KEYS if k not in item]
    if missing:
        raise DumpError(f"{where}: missing {', '.join(missing)}; every entry needs "
                        f"{', '.join(KEYS)}")
    entry = UserApiEntry(number, _api_name(where, "ms_api", item["ms_api"]),
                         _api_name(where, "pt_api", item["pt_api"]),
                         *(_positions(where, k, item[k]) for k in KEYS[2:]))
    name = f"{where} ({entry.ms_api} -> {entry.pt_api})"
    if len(entry.ms_args) != len(entry.pt_args) or len(entry.ms_output) != len(entry.pt_output):
        log.warning("%s: ms_args/pt_args or ms_output/pt_output have different lengths "
                    "(%d/%d, %d/%d); the entry is ignored, as msprobe ignores it",
                    name, len(entry.ms_args), len(entry.pt_args), len(entry.ms_output),
                    len(entry.pt_output))
        return None
    for key in KEYS[2:]:
        values = getattr(entry, key)
        if len(set(values)) != len(values):
            log.warning("%s: '%s' repeats a position (%s); the entry is ignored", name, key,
                        list(values))
            return None
    if not entry.ms_args and not entry.ms_output:
        log.warning("%s: lists no argument and no output; the entry is ignored", name)
        return None
    return entry


def read_user_api_mapping(path: Path) -> list[UserApiEntry]:
    """The usable entries of a user api mapping, first entry per (ms_api, pt_api) only."""
    doc = read_yaml(path, "api mapping YAML")
    if doc is None:
        log.warning("%s: the api mapping YAML is empty; only the built-in table applies", path)
        return []
    if not isinstance(doc, list):
        raise DumpError(f"{path}: a user api mapping must be a YAML list of entries, found a "
                        f"{type(doc).__name__}; an entry looks like:\n{EXAMPLE}")
    entries: list[UserApiEntry] = []
    seen: dict[tuple[str, str], int] = {}
    for number, item in enumerate(doc, start=1):
        entry = parse_entry(path, number, item)
        key = (item["ms_api"], item["pt_api"])
        if key in seen:
            log.warning("%s: entry %d repeats %s -> %s of entry %d; only the first is used",
                        path, number, key[0], key[1], seen[key])
            continue
        seen[key] = number
        if entry is not None:
            entries.append(entry)
    return entries


def load_user_api_mapping(con: duckdb.DuckDBPyConnection, path: Path) -> list[UserApiEntry]:
    """Read, validate and load a ``-am FILE.yaml`` as ``api_user`` mapping rows; warn about names
    the dumps do not have. Returns the loaded entries."""
    entries = read_user_api_mapping(path)
    rows: list[tuple[str, str, int]] = []
    for entry in entries:
        rows += [(n, b, entry.number) for n, b in entry.rows()]
    # ord is the entry number: the views group the positions of one entry by it
    if rows:
        con.executemany("INSERT INTO mappings VALUES ('api_user', ?, ?, ?)", rows)
    warn_unknown_apis(con, path, entries)
    return entries


def warn_unknown_apis(con: duckdb.DuckDBPyConnection, path: Path,
                      entries: list[UserApiEntry]) -> None:
    """One warning per entry whose MindSpore or PyTorch API is not in its dump."""
    apis = {side: {row[0] for row in con.execute(
        "SELECT DISTINCT split_part(op_name, '.', 1) || '.' || split_part(op_name, '.', 2) "
        "FROM ops WHERE side = ? AND n_rows > 0", [side]).fetchall()} for side in ("npu", "bench")}
    for entry in entries:
        for side, api, what in (("npu", entry.ms_api, "NPU (MindSpore)"),
                                ("bench", entry.pt_api, "bench (PyTorch)")):
            if api not in apis[side]:
                log.warning("%s: entry %d (%s -> %s): the %s dump has no %s op; the entry has "
                            "nothing to map", path, entry.number, entry.ms_api, entry.pt_api,
                            what, api)


def has_user_api(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(db.scalar(con, "SELECT count(*) FROM mappings WHERE kind = 'api_user'"))


def pair_rows_user_api(con: duckdb.DuckDBPyConnection, compat: bool) -> None:
    """Fill ``op_pairs`` and ``compare_rows`` when a user api mapping is loaded."""
    if compat:
        # the entries that made at least one candidate pair; then 1.1.0's walk, with the user
        # entries deciding the op pairs they cover
        used = {row[0] for row in con.execute(
            "SELECT DISTINCT entry FROM ms_user_api_compat_candidates WHERE entry IS NOT NULL"
        ).fetchall()}
        write_compat_pairs(con, "ms_user_api_compat_candidates")
        con.execute("INSERT INTO compare_rows SELECT * FROM row_pairs")
    else:
        add_user_pairs(con)
        con.execute("INSERT INTO compare_rows SELECT * FROM ms_row_pairs")
        used = {row[0] for row in con.execute("""
            SELECT DISTINCT e.entry FROM op_pairs p
            JOIN ops n ON n.side = 'npu' AND n.op_seq = p.npu_op
            JOIN ops b ON b.side = 'bench' AND b.op_seq = p.bench_op
            JOIN ms_user_api_args e
              ON e.ms_api = split_part(n.op_name, '.', 1) || '.' || split_part(n.op_name, '.', 2)
             AND e.pt_api = split_part(b.op_name, '.', 1) || '.' || split_part(b.op_name, '.', 2)
            WHERE p.how = 'api_user'""").fetchall()}
    warn_unused_entries(con, used)


def add_user_pairs(con: duckdb.DuckDBPyConnection) -> None:
    """Default mode: the default pairing first, then the user entries pair what it left over.

    Each step is materialized in ``op_pairs`` so that the (possibly costly) default pairing runs
    once; a pair made by an entry is marked ``how = 'api_user'``.
    """
    con.execute("INSERT INTO op_pairs SELECT * FROM op_pairs_default")
    # the user pairs and the reordered pairs are read from op_pairs, which is then rewritten:
    # each is computed into a temporary table first
    con.execute("CREATE TEMP TABLE _user_pairs AS SELECT npu_op, bench_op FROM ms_user_api_pairs")
    try:
        if not db.scalar(con, "SELECT count(*) FROM _user_pairs"):
            return
        con.execute("""UPDATE op_pairs SET bench_op = u.bench_op, how = 'api_user'
                       FROM _user_pairs u WHERE op_pairs.npu_op = u.npu_op""")
        con.execute("""DELETE FROM op_pairs WHERE npu_op IS NULL
                       AND bench_op IN (SELECT bench_op FROM _user_pairs)""")
    finally:
        con.execute("DROP TABLE _user_pairs")
    con.execute("CREATE TEMP TABLE _ordered AS SELECT * FROM ms_op_pairs")
    con.execute("DELETE FROM op_pairs")
    con.execute("INSERT INTO op_pairs SELECT * FROM _ordered")
    con.execute("DROP TABLE _ordered")


def warn_unused_entries(con: duckdb.DuckDBPyConnection, used: set[int]) -> None:
    """Warn about entries whose two APIs are in the dumps but that paired no op."""
    rows = con.execute("""
        WITH e AS (SELECT DISTINCT entry, ms_api, pt_api FROM ms_user_api_args),
        apis AS (SELECT DISTINCT side, split_part(op_name, '.', 1) || '.'
                                       || split_part(op_name, '.', 2) AS api FROM ops)
        SELECT e.entry, e.ms_api, e.pt_api FROM e
        WHERE e.ms_api IN (SELECT api FROM apis WHERE side = 'npu')
          AND e.pt_api IN (SELECT api FROM apis WHERE side = 'bench')
        ORDER BY e.entry""").fetchall()
    for number, ms_api, pt_api in rows:
        if number in used:
            continue
        log.warning("api mapping entry %d (%s -> %s): no %s op paired with a %s op; check the "
                    "positions, the call counts and the shapes/dtypes of the listed arguments",
                    number, ms_api, pt_api, ms_api, pt_api)
