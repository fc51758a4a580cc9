"""Two compares into one output folder in the same second keep both their outputs (issue 17,
item 4).

The names carry a timestamp to the second (``compare_result_<stamp>.xlsx``, ``advisor_<stamp>.txt``,
as msprobe names them), so two msq processes started together used to rename their files onto
the same names: one workbook and one advisor were lost, and both history rows named the files
of whichever finished last. Final files are now created exclusively: a taken name gets a
``_2``, ``_3``, ... suffix, and each history row names the files of its own compare.

Real processes, started at the same moment, on two different compares (one red op against
three clean ones), so that every file can be told apart by its content.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.dumps import fwd, t, write_pair
from tests.xlsx_read import rows

MSQ = [sys.executable, "-m", "msq.cli"]


def two_compares(root: Path) -> dict[str, Path]:
    """'red': one op, red (its advisor names a suspect); 'clean': three ops, all clean."""
    red = {"Functional.red.0.forward": fwd(t(mx=3.0), out=t())}
    clean = {f"Functional.clean{i}.0.forward": fwd(t(), out=t()) for i in range(3)}
    return {"red": write_pair(root / "red", red, {"Functional.red.0.forward": fwd(t(), out=t())}),
            "clean": write_pair(root / "clean", clean, clean)}


def run_together(cfgs: dict[str, Path], out: Path, db: Path) -> None:
    # start right after a second boundary: both compares then carry the same stamp
    time.sleep(1 - time.time() % 1 + 0.01)
    procs = [subprocess.Popen([*MSQ, "compare", str(cfg), "-o", str(out), "--db", str(db),
                               "--label", name, "-q"], stderr=subprocess.PIPE, text=True)
             for name, cfg in cfgs.items()]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err


def recorded_files(db: Path) -> dict[str, list[str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT label, files FROM compares").fetchall())
    finally:
        con.close()


def stamp(name: str) -> str:
    found = re.search(r"_(\d{14})(?:_\d+)?\.", name)
    assert found, name
    return found.group(1)


@pytest.mark.slow
def test_two_compares_in_the_same_second_keep_both_outputs(tmp_path: Path) -> None:
    cfgs = two_compares(tmp_path / "dumps")
    for trial in range(5):  # the two processes nearly always share the second; make sure
        out, db = tmp_path / f"out{trial}", tmp_path / f"h{trial}.duckdb"
        run_together(cfgs, out, db)
        books = sorted(out.glob("compare_result_*.xlsx"))
        if len(books) == 2 and stamp(books[0].name) == stamp(books[1].name):
            break
    else:
        pytest.fail(f"no two workbooks with one stamp in 5 trials: {sorted(out.iterdir())}")
    names = sorted(p.name for p in out.iterdir())
    assert len([n for n in names if n.startswith("compare_result_")]) == 2, names
    assert len([n for n in names if n.startswith("advisor_")]) == 2, names
    assert [n for n in names if n.startswith(".") or n.endswith(".tmp")] == []
    # each run keeps its own blame JSON (the run's file, not a compare's: not in the history)
    assert len([n for n in names if n.startswith("blame_") and n.endswith(".json")]) == 2, names
    files = recorded_files(db)
    # each history row names its own workbook and advisor, and together they are every output
    assert sorted(Path(f).name for fs in files.values() for f in fs) == \
        sorted(n for n in names if n != db.name and not n.startswith("blame_"))
    for label, expected_rows, suspect in (("red", 2, "Functional.red.0.forward"),
                                          ("clean", 6, "NA")):
        book, advisor = (Path(f) for f in files[label])
        assert book.suffix == ".xlsx" and advisor.suffix == ".txt"
        assert len(rows(book)) == expected_rows
        assert f"Suspect Nodes: {suspect}" in advisor.read_text()


def test_layer_mapping_file_never_replaces_a_file(tmp_path: Path) -> None:
    """-lm's data_mapping_<stamp>.yaml is published like the workbook: a taken name (another
    compare's mapping of the same second) is kept as it is, the new mapping gets ``_2``,
    complete, with no temporary left behind."""
    from msq.mindspore.layer_mapping import write_data_mapping

    theirs = b"another compare's mapping\n"
    now = time.time()
    # every stamp the call below can take (it runs well within these seconds)
    taken = [tmp_path / f"data_mapping_{time.strftime('%Y%m%d%H%M%S', time.localtime(now + s))}"
                        ".yaml" for s in range(3)]
    for path in taken:
        path.write_bytes(theirs)
    mapping = {"Cell.a.forward.0.output.0": "Module.a.forward.0.output.0",
               "Cell.b.forward.0.output.0": None}
    written = write_data_mapping(mapping, tmp_path)
    assert [p.read_bytes() for p in taken] == [theirs] * 3
    assert written.name.endswith("_2.yaml") and written.with_name(
        written.name.replace("_2.yaml", ".yaml")) in taken
    assert yaml.safe_load(written.read_text()) == mapping
    assert written.stat().st_mode & 0o777 == 0o640
    assert sorted(tmp_path.iterdir()) == sorted([*taken, written])
