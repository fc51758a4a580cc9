"""The history commands against hostile data and an unlucky environment (issue 17, item 7).

* An op name carrying terminal escape sequences (OSC window title, CSI clear screen, the 8-bit
  CSI U+009B, BEL, CR) is recorded in the history; ``msq runs`` and ``msq sql`` print it with
  the escapes shown as text, never sent to the terminal, as the error printer does. A file
  written with ``-o --format csv|json|parquet`` keeps the text as it is.
* ``--db :memory:`` keeps nothing, and msq does not claim it recorded anything.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.dumps import fwd, t, write_pair
from tests.hostile.helpers import cli

HOSTILE = "Functional.\x1b]0;owned\x07\x1b[2J\x9b31m\rfake.0.forward"
TERMINAL_CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (9, 10)]


def hostile_history(root: Path) -> Path:
    """One compare whose only (red) op carries the escapes: it is the suspect as well."""
    cfg = write_pair(root / "dumps", {HOSTILE: fwd(t(mx=3.0), out=t())},
                     {HOSTILE: fwd(t(), out=t())})
    db = root / "h.duckdb"
    code, text = cli("compare", str(cfg), "-o", str(root / "out"), "--db", str(db), "-q")
    assert code == 0, text
    return db


def controls_in(text: str) -> list[str]:
    return sorted({repr(c) for c in text if c in TERMINAL_CONTROLS})


def test_runs_and_sql_print_escapes_as_text(tmp_path: Path) -> None:
    db = hostile_history(tmp_path)
    printed = {
        "runs": cli("runs", "--db", str(db)),
        "sql table": cli("sql", "SELECT npu_name FROM result_rows", "--db", str(db)),
        "sql csv": cli("sql", "SELECT npu_name FROM result_rows", "--db", str(db),
                       "--format", "csv"),
        "sql json": cli("sql", "SELECT npu_name FROM result_rows", "--db", str(db),
                        "--format", "json"),
    }
    for what, (code, text) in printed.items():
        assert code == 0, text
        assert controls_in(text) == [], f"{what} printed {controls_in(text)} raw: {text!r}"
        # shown, not dropped (JSON writes C0 controls as \u001B itself)
        assert "]0;owned" in text and "[2J" in text and "x9b31m" in text, (what, text)


def test_files_written_with_o_keep_the_text(tmp_path: Path) -> None:
    db = hostile_history(tmp_path)
    query = "SELECT DISTINCT npu_name FROM result_rows ORDER BY 1"
    expected = [f"{HOSTILE}.input.0", f"{HOSTILE}.output.0"]
    for fmt in ("csv", "json", "parquet"):
        dest = tmp_path / f"r.{fmt}"
        code, text = cli("sql", query, "--db", str(db), "--format", fmt, "-o", str(dest))
        assert code == 0, text
        if fmt == "json":
            got = [r["npu_name"] for r in json.loads(dest.read_text(encoding="utf-8"))]
        elif fmt == "parquet":
            got = pq.read_table(dest).column("npu_name").to_pylist()
        else:  # bytes: a text read would turn the CR into a line break
            got = [line.strip('"') for line in dest.read_bytes().decode().split("\n")[1:-1]]
        assert got == expected, fmt


def small_pair(root: Path) -> Path:
    return write_pair(root / "dumps", {"Functional.relu.0.forward": fwd(t(), out=t())},
                      {"Functional.relu.0.forward": fwd(t(), out=t())})


def test_db_memory_records_nothing_and_says_so(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = small_pair(tmp_path)
    for flags, env in (((("--db", ":memory:")), None), ((), {"MSQ_DB": ":memory:"})):
        out = tmp_path / "out"
        code, text = cli("compare", str(cfg), "-o", str(out), *flags, env=env)
        assert code == 0, text
        assert "recorded as compare" not in text and "recorded compare" not in text, text
        assert "keeps no history" in text, text
        assert sorted(p.name for p in out.iterdir() if "msq" in p.name) == []
        assert not (tmp_path / ":memory:").exists()


def test_db_names_are_files_not_duckdb_locations(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``md:`` (MotherDuck) and other prefixes DuckDB gives a meaning are plain file names to
    --db: no extension is fetched, the history is a file in the working directory."""
    monkeypatch.chdir(tmp_path)
    cfg = small_pair(tmp_path)
    code, text = cli("compare", str(cfg), "-o", str(tmp_path / "out"), "--db", "md:hist")
    assert code == 0, text
    assert f"recorded as compare 1 in {tmp_path / 'md:hist'}" in text
    assert (tmp_path / "md:hist").is_file()
    code, text = cli("runs", "--db", "md:hist", "--format", "csv")
    assert code == 0 and len(text.splitlines()) == 2, text
