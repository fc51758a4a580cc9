"""Outputs are safe to open and never half-written.

* Text from a dump that starts like a formula (``= + - @`` and the full-width ``＝＋－＠``) in op
  names, str arguments and stack lines is written as text: in the workbook an inline-string cell
  (openpyxl type ``s``, never a formula) with Excel's quote prefix; in CSV a leading ``'`` and every
  cell quoted. msprobe 1.1.0 aborts the whole compare on such text instead.
* Workbook, CSV and Parquet are written under a hidden temporary name and renamed when complete;
  a failure or interruption while writing leaves neither the file nor the temporary.
* An output directory (or history file) that cannot be written is refused before any work.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import resource
import signal
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pytest

import msq
from msq.errors import ExportError
from msq.export import outputs as outputs_mod
from msq.export import xlsx as xlsx_mod
from tests.dumps import fwd, t, write_pair
from tests.hostile.helpers import cli, compare, error_line, good_pair, outputs, sides

FORMULA_NAMES = ["=HYPERLINK(\"http://x\",\"y\").0.forward", "+Functional.a.0.forward",
                 "-Functional.b.0.forward", "@SUM(A1).0.forward", "＝Functional.c.0.forward",
                 "＋Functional.d.0.forward", "－Functional.e.0.forward", "＠Functional.f.0.forward"]
FORMULA_VALUES = ["=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "＝1+1", "＋1", "－1", "＠x",
                  "\t=1+1", "a;=1+1"]
FORMULA_START = tuple("=+-@＝＋－＠")
CSV_RISKY_START = FORMULA_START + ("\t", "\r")  # some CSV readers strip these, then evaluate


def hostile_pair(root: Path) -> Path:
    """Every formula-like op name, str argument and stack line, on both sides."""
    data: dict[str, Any] = {}
    for name in FORMULA_NAMES:
        data[name] = fwd(t(), out=t(),
                         **{f"k{i}": {"type": "str", "value": v} for i, v in enumerate(FORMULA_VALUES)})
    stack = {name: [f"=cmd|' /C calc'!A0, line {i}", "@SUM(A1)"] for i, name in enumerate(data)}
    return write_pair(root, data, data, stack=stack)


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("compat", [False, True], ids=["default", "compat"])
def test_formula_like_text_is_written_as_text(tmp_path: Path, compat: bool) -> None:
    cfg = hostile_pair(tmp_path)
    out = tmp_path / "out"
    flags = ["-s", "--format", "xlsx,csv"] + (["--compat", "msprobe-1.1"] if compat else [])
    code, text = compare(cfg, out, *flags)
    assert code == 0, text
    book = next(out.glob("compare_result_*.xlsx"))
    # no formula anywhere in the package
    with zipfile.ZipFile(book) as archive:
        sheet = archive.read("xl/worksheets/sheet1.xml").decode()
    assert "<f>" not in sheet and "<f " not in sheet
    ws = openpyxl.load_workbook(book).active
    header = [c.value for c in ws[1]]
    risky = [c for row in ws.iter_rows(min_row=2) for c in row
             if isinstance(c.value, str) and c.value.startswith(FORMULA_START)]
    names = {c.value for c in risky if c.column == 1}
    assert {n.rsplit(".0.forward", 1)[0] for n in names} >= {
        n.rsplit(".0.forward", 1)[0] for n in FORMULA_NAMES}
    values = {c.value for c in risky if header[c.column - 1] == "NPU max"}
    assert values == {v for v in FORMULA_VALUES if v.startswith(FORMULA_START)}
    # (a cell starting with a tab is an inline string too; Excel does not read it as a formula)
    assert {c.data_type for c in risky} == {"s"}
    assert all(c.quotePrefix for c in risky), [c.value for c in risky if not c.quotePrefix]
    stacks = {c.value for row in ws.iter_rows(min_row=2) for c in row
              if header[c.column - 1] == "NPU_Stack_Info" and c.value not in (None, "None")}
    assert stacks and all("=cmd|' /C calc'!A0" in s for s in stacks)
    # CSV: the same cells, prefixed with an apostrophe; every cell quoted
    table = next(out.glob("compare_result_*.csv"))
    raw = table.read_text(encoding="utf-8")
    assert all(line.startswith('"') for line in raw.splitlines() if line)
    assert '"a;=1+1"' in raw
    got = list(csv.reader(raw.splitlines(keepends=True)))
    assert got[0] == [*header, "Mark", "Mark_rules"]
    # every cell quoted, the empty marks of an unmarked row too ("")
    assert re.fullmatch(r'(?:"(?:[^"]|"")*"(?:,"(?:[^"]|"")*")*\r?\n)*', raw)
    for line in got[1:]:
        for cell in line:
            assert not cell.startswith(CSV_RISKY_START) or is_number(cell), cell
    csv_names = {line[0] for line in got[1:]}
    assert {"'" + n for n in names} <= csv_names
    col = header.index("NPU max")
    assert {line[col] for line in got[1:] if line[col].startswith("'")} == \
        {"'" + v for v in FORMULA_VALUES if v.startswith(CSV_RISKY_START)}


def test_negative_numbers_stay_numbers(tmp_path: Path) -> None:
    data = {"Functional.a.0.forward": fwd(t(mx=-0.5, mn=-1.5), out=t())}
    cfg = write_pair(tmp_path, data, data)
    code, text = compare(cfg, tmp_path / "out", "--format", "xlsx,csv")
    assert code == 0, text
    ws = openpyxl.load_workbook(next((tmp_path / "out").glob("*.xlsx"))).active
    header = [c.value for c in ws[1]]
    cell = ws.cell(row=2, column=header.index("NPU min") + 1)
    assert (cell.value, cell.data_type, cell.quotePrefix) == (-1.5, "n", False)
    rows = list(csv.reader((next((tmp_path / "out").glob("compare_result_*.csv")))
                           .open(encoding="utf-8")))
    assert rows[1][header.index("NPU min")] == "-1.5"


# ------------------------------------------------------------------------------ atomic writes


def api_compare(cfg: Path, out: Path, **kw: Any) -> Any:
    doc = json.loads(cfg.read_text())
    return msq.compare({"npu_json_path": doc["npu_path"], "bench_json_path": doc["bench_path"]},
                       out, record=False, **kw)


def test_outputs_appear_only_complete_under_their_name(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Each output is linked to its final name from a hidden temporary in the same folder, after
    it is complete; the link is exclusive, so the final name does not exist yet (a taken name
    gets a suffix: tests/hostile/test_output_collisions.py)."""
    published: list[tuple[str, str, bool, int]] = []
    real = os.link

    def spy(src: Any, dst: Any, **kwargs: Any) -> None:
        published.append((Path(src).name, Path(dst).name, Path(dst).exists(),
                          Path(src).stat().st_size))
        if str(dst).endswith(".xlsx"):
            zipfile.ZipFile(src).testzip()  # a whole zip, central directory included
        real(src, dst, **kwargs)

    monkeypatch.setattr(os, "link", spy)
    result = api_compare(good_pair(tmp_path), tmp_path / "out", formats="xlsx,csv,parquet")
    # blame's run file (result.blame_json) is published the same way as the compare's files
    finals = sorted([p.name for p in result.files]
                    + ([result.blame_json.name] if result.blame_json else []))
    assert sorted(dst for _, dst, _, _ in published) == finals
    for src, dst, existed, size in published:
        assert src.startswith(f".{dst}.") and src.endswith(".tmp") and not existed and size > 0
    assert outputs(tmp_path / "out") == finals


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError])
def test_failure_while_writing_the_workbook_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: type[BaseException]) -> None:
    def broken(zf: zipfile.ZipFile, n_sheets: int, **layout: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device") if failure is OSError \
            else KeyboardInterrupt()

    monkeypatch.setattr(xlsx_mod, "_finish_package", broken)
    with pytest.raises(KeyboardInterrupt if failure is KeyboardInterrupt else ExportError) as err:
        api_compare(good_pair(tmp_path), tmp_path / "out")
    if failure is OSError:
        assert str(err.value).endswith(".xlsx: cannot write it (No space left on device); check "
                                       "the free space and permissions of the output directory, "
                                       "or choose another -o")
    assert outputs(tmp_path / "out") == []


@pytest.mark.parametrize("fmt", ["xlsx", "csv", "parquet"])
def test_disk_full_while_writing_is_one_line_and_leaves_nothing(tmp_path: Path, fmt: str) -> None:
    """A real write failure: the process may not write files above 4 KiB (RLIMIT_FSIZE, the
    way a full disk fails a write), so every output of a 200-row compare fails mid-write."""
    data = {f"Functional.op{i}.0.forward": fwd(t(), out=t()) for i in range(100)}
    cfg = write_pair(tmp_path, data, data)
    out = tmp_path / "out"

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # then write() fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 10, 4 << 10))

    proc = subprocess.run([sys.executable, "-m", "msq.cli", "compare", str(cfg), "-o", str(out),
                           "--no-history", "-q", "--format", fmt], capture_output=True, text=True,
                          preexec_fn=small_files, timeout=300, check=False)
    assert proc.returncode == 1, proc.stderr
    line = error_line(proc.stderr)
    assert line.startswith(f"msq: error: {out}/compare_result_") and line.endswith(
        f".{fmt}: cannot write it (File too large); check the free space and permissions of the "
        "output directory, or choose another -o")
    assert outputs(out) == []


def test_failure_while_writing_the_csv_leaves_nothing(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(src: Any, dst: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs_mod.os, "replace", broken)
    with pytest.raises(KeyboardInterrupt):
        api_compare(good_pair(tmp_path), tmp_path / "out", formats="csv")
    assert outputs(tmp_path / "out") == []


# ------------------------------------------------------------------------------ unwritable places


def test_unwritable_output_directory_is_refused_before_reading(tmp_path: Path) -> None:
    """Tests run as root, for whom chmod blocks nothing: use places no one can write. The NPU
    dump is broken too, and the output error comes first: nothing was read."""
    cfg = good_pair(tmp_path)
    sides(cfg)[0].write_text("{")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    cases = {
        blocker / "out": f"{blocker / 'out'}: cannot create the output directory (Not a "
                         "directory); choose another -o",
        Path("/proc/msq-out"): "/proc/msq-out: cannot create the output directory (No such file "
                               "or directory); choose another -o",
        Path("/proc/self"): "/proc/self: output directory is not writable (No such file or "
                            "directory); fix its permissions or choose another -o",
        blocker: f"{blocker}: exists and is not a directory; choose another -o",
        tmp_path / ("o" * 300): f"{tmp_path / ('o' * 300)}: cannot create the output directory "
                                "(File name too long); choose another -o",
    }
    for out, message in cases.items():
        code, text = compare(cfg, out)
        assert (code, error_line(text)) == (1, f"msq: error: {message}")


def test_unusable_history_file_is_refused_before_comparing(tmp_path: Path) -> None:
    cfg = good_pair(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a database")
    out = tmp_path / "out"
    cases = {
        blocker / "h.duckdb": f"{blocker / 'h.duckdb'}: its folder does not exist; create it or "
                              "choose another --db",
        Path("/proc/h.duckdb"): "/proc/h.duckdb: cannot create the history database there (No "
                                "such file or directory); choose another --db, or --no-history",
        blocker: f"{blocker}: exists but is not a DuckDB database; choose another --db",
        tmp_path: f"{tmp_path}: is not a file; choose another --db",
        tmp_path / ("h" * 300): f"{tmp_path / ('h' * 300)}"[:200] + ": cannot use it as the "
        "history database (File name too long); choose another --db, or --no-history",
    }
    for db, message in cases.items():
        code, text = cli("compare", str(cfg), "-o", str(out), "--db", str(db))
        assert (code, error_line(text)) == (1, f"msq: error: {message}")
        assert outputs(out) == []


#: Another process creating a history file: it holds DuckDB's lock on the file, still empty,
#: then its header is there (a whole database put in its place) and the lock goes with it.
_CREATOR = """import fcntl, os, sys, time
import duckdb
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(1.5)
duckdb.connect(path + ".new").close()
os.replace(path + ".new", path)
"""


def test_a_history_file_another_process_is_creating_is_waited_for(tmp_path: Path) -> None:
    """Two msq processes recording into one new file: the second found it empty and locked by
    the first (its header not written yet) and refused it as not a DuckDB database (CI)."""
    cfg = good_pair(tmp_path)
    db = tmp_path / "h.duckdb"
    creator = subprocess.Popen([sys.executable, "-c", _CREATOR, str(db)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert creator.stdout is not None and creator.stdout.readline() == "held\n"
        code, text = cli("compare", str(cfg), "-o", str(tmp_path / "out"), "--db", str(db))
    finally:
        creator.wait(timeout=60)
    assert code == 0, text
    assert "recorded as compare 1" in text


def test_characters_xml_cannot_hold_keep_the_workbook_readable(tmp_path: Path) -> None:
    """Control characters and the non-characters U+FFFE/U+FFFF (valid JSON escapes) become Excel's
    _xHHHH_ escapes; U+FFFF used to make the sheet XML invalid."""
    name = "Functional.a\uffff\ufffe\x01\x1b.0.forward"
    data = {name: fwd(t(), {"type": "str", "value": "x\uffff\x00y"}, out=t())}
    cfg = write_pair(tmp_path, data, data)
    code, text = compare(cfg, tmp_path / "out", "-q")
    assert code == 0, text
    book = openpyxl.load_workbook(next((tmp_path / "out").glob("*.xlsx")))
    got = [(row[0].value, row[14].value) for row in book.active.iter_rows(min_row=2)]
    escaped = "Functional.a_xFFFF__xFFFE__x0001__x001B_.0.forward"
    assert got == [(f"{escaped}.input.0", 1), (f"{escaped}.input.1", "x_xFFFF__x0000_y"),
                   (f"{escaped}.output.0", 1)]


def test_out_of_memory_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory limit (ulimit -v, a cgroup) stopping an allocation: MemoryError was a traceback."""
    import msq.pipeline

    def no_memory(*args: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(msq.pipeline, "read_sides", no_memory)
    code, text = compare(good_pair(tmp_path), tmp_path / "out", "-q")
    assert (code, error_line(text)) == (1, ("msq: error: out of memory; free memory, compare "
                                           "smaller dumps, or use fewer --workers"))
    assert outputs(tmp_path / "out") == []
