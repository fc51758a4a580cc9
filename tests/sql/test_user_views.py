"""--sql-dir: a user's views replace msq's own by name, in a real compare."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from msq.cli import main
from tests.xlsx_read import only_xlsx, rows

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "stat" / "compare.json"
ALL_RED = ("-- description: every output row is red (a user's rule)\n"
           "SELECT out_seq, 'red' AS mark, 'mine' AS rules FROM hl_values\n")


def compare(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["compare", str(DEMO), "-o", str(tmp_path / "out"),
                                       "--no-history", "-c", *extra])
    return result.exit_code, result.stdout, result.stderr


def test_a_user_marks_view_colours_the_workbook(tmp_path: Path) -> None:
    rules = tmp_path / "mine" / "compare" / "rules"
    rules.mkdir(parents=True)
    (rules / "marks.sql").write_text(ALL_RED)
    code, out, err = compare(tmp_path, "--sql-dir", str(tmp_path / "mine"))
    assert code == 0, err
    total = int(re.search(r"statistics mode, (\d+) rows", out).group(1))
    assert f"{total} red, 0 yellow" in out
    fills = [row["_fill"] for row in rows(only_xlsx(tmp_path / "out"))]
    assert fills == ["red"] * total


def test_without_sql_dir_the_shipped_rules_apply(tmp_path: Path) -> None:
    code, out, err = compare(tmp_path)
    assert code == 0, err
    assert "4 red, 0 yellow" in out  # the default rules (docs/rules.md)


def test_a_broken_user_view_is_one_line_naming_its_file(tmp_path: Path) -> None:
    rules = tmp_path / "mine" / "compare" / "rules"
    rules.mkdir(parents=True)
    (rules / "marks.sql").write_text("SELECT out_seq, no_such_column FROM hl_values\n")
    code, _, err = compare(tmp_path, "--sql-dir", str(tmp_path / "mine"))
    assert code == 1
    assert err.count("\n") == 1
    assert err.startswith(f"msq: error: {rules / 'marks.sql'}: Binder Error")


def test_a_missing_sql_dir_is_refused_before_the_compare(tmp_path: Path) -> None:
    code, _, err = compare(tmp_path, "--sql-dir", str(tmp_path / "nope"))
    assert code == 1
    assert err == (f"msq: error: {tmp_path / 'nope'}: --sql-dir must be a folder of SQL views "
                   "laid out like msq's sql/ (e.g. compare/rules/marks.sql); check the path\n")
    assert not list((tmp_path / "out").glob("*.xlsx"))
