"""What the CLI prints (msq/console.py): the text tables, and what ``msq compare`` prints: the
sheet row of the suspect, the gate's one line on stderr, a quiet stderr, log lines apart from the
progress line, and the total line of a directory run."""

from __future__ import annotations

import csv
import io
import logging
import re
import sys
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner, Result

from msq import status_line
from msq.cli import main, setup_logging
from msq.console import gate_line, render_table
from msq.history import Table
from msq.result import CompareResult
from tests.conftest import GOLDEN
from tests.history.builders import LINEAR1_OUT, RELU_OUT, build_roots, single_card

SUSPECT = re.compile(r"^  first suspect: (row (\d+)): (\S+)$", re.MULTILINE)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def sheet_names(path: Path) -> dict[int, str]:
    """Column A of the workbook by the row number Excel shows."""
    sheet = openpyxl.load_workbook(path, read_only=True).worksheets[0]
    return {i: row[0] for i, row in enumerate(sheet.iter_rows(values_only=True), start=1)}


def advisor_line(out: Path) -> str:
    (advisor,) = out.glob("advisor_*.txt")
    return advisor.read_text().splitlines()[0]


@pytest.fixture
def red_card(tmp_path: Path) -> Path:
    """One card whose linear.1 output is red (Max x3) and relu's is off by 5% (Max x1.05): yellow
    in the default mode, whose red starts at a scale-aware error of 0.1 (docs/rules.md)."""
    return single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}, RELU_OUT: {"Max": 1.05}})


def test_render_table_aligns_numbers_and_marks_nulls() -> None:
    text = render_table(Table(
        ["name", "n", "x"], ["VARCHAR", "BIGINT", "DOUBLE"],
        [("a\tb", 1, 0.5), (None, 12345, float("nan")), ("long name", None, 1e-20)]))
    assert text == ("name       n      x\n"
                    "---------  -----  -----\n"
                    "a\\tb           1    0.5\n"
                    "NULL       12345    nan\n"
                    "long name   NULL  1e-20\n"
                    "(3 rows)\n")
    assert render_table(Table([], [], [])) == "OK\n"


# ----------------------------------------------------------------------- item 6: row N is Excel's


@pytest.mark.parametrize("compat", [False, True])
def test_row_n_is_the_sheet_row_that_holds_the_name(red_card: Path, tmp_path: Path,
                                                   compat: bool) -> None:
    out = tmp_path / "out"
    result = run("compare", str(red_card), "-o", str(out), "--no-history",
                 *(["--compat", "msprobe-1.1"] if compat else []))
    assert result.exit_code == 0, result.output
    _, row, name = SUSPECT.search(result.stdout).groups()
    (book,) = out.glob("*.xlsx")
    assert sheet_names(book)[int(row)] == name
    # the advisor file: msprobe's 0-based Line under --compat, the same row in the default mode
    assert advisor_line(out) == f"Line: {int(row) - 2 if compat else row}"


@pytest.mark.golden
def test_tfm_stat_l1_console_row_is_where_the_op_sits(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: the console said "row 158" for an op on Excel row 160."""
    monkeypatch.chdir(GOLDEN / "tfm_stat_L1")
    out = tmp_path / "out"
    result = run("compare", "expected/default/compare.json", "-o", str(out), "--no-history")
    assert result.exit_code == 0, result.output
    _, row, name = SUSPECT.search(result.stdout).groups()
    (book,) = out.glob("*.xlsx")
    assert sheet_names(book)[int(row)] == name
    assert advisor_line(out) == f"Line: {row}"


# ------------------------------------------------------------------ item 7: the gate says it tripped


def test_gate_tripped_is_one_line_on_stderr_even_with_q(red_card: Path, tmp_path: Path) -> None:
    result = run("compare", str(red_card), "-o", str(tmp_path / "out"), "--no-history", "-q",
                 "--fail-on", "red")
    assert result.exit_code == 3
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    found = re.fullmatch(r"msq: accuracy gate tripped \(--fail-on red\): (\d+) red rows?; "
                         r"first: row (\d+): (\S+) \((.+)\)", line)
    assert found, line
    count, row, name, rules = found.groups()
    (book,) = (tmp_path / "out").glob("*.xlsx")
    assert sheet_names(book)[int(row)] == name == "Functional.linear.1.forward.output.0"
    # the default mode's reason: the rule that fired, with its numbers (the NPU's Max is 3x)
    assert int(count) == 1
    assert re.fullmatch(r"scale-aware error 0\.667 >= 0\.1, from Max: NPU [\d.]+, bench [\d.]+",
                        rules), rules


def test_gate_on_suspect_names_the_advisors_row(red_card: Path, tmp_path: Path) -> None:
    result = run("compare", str(red_card), "-o", str(tmp_path / "out"), "--no-history",
                 "--fail-on", "suspect")
    assert result.exit_code == 3
    _, row, name = SUSPECT.search(result.stdout).groups()
    # both perturbed outputs fail the rules: relu's (yellow, first in dump order) and linear.1's
    want = (f"msq: accuracy gate tripped (--fail-on suspect): the advisor names a suspect "
            f"(2 failing rows); first: row {row}: {name}")
    assert result.stderr.splitlines() == [want]


def test_gate_that_passes_prints_nothing(tmp_path: Path) -> None:
    clean = single_card(tmp_path / "dumps")
    for rule in ("red", "suspect"):
        result = run("compare", str(clean), "-o", str(tmp_path / "out"), "--no-history", "-q",
                     "--fail-on", rule)
        assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


def test_gate_line_without_a_row_still_counts() -> None:
    # a result that knows its red count but not its first red row (e.g. taken back from the
    # history) still trips the gate with the count, and without a dangling "first:"
    bare = CompareResult(mode="statistics", rows=5, red=2)
    assert gate_line([bare], "red") == "msq: accuracy gate tripped (--fail-on red): 2 red rows"
    assert gate_line([CompareResult(mode="statistics", rows=5)], "red") is None


# ------------------------------------------------------------------------ item 11: a quiet console


def test_stdout_has_the_summary_and_stderr_nothing(red_card: Path, tmp_path: Path) -> None:
    result = run("compare", str(red_card), "-o", str(tmp_path / "out"))
    assert result.exit_code == 0
    assert result.stderr == ""
    assert result.stdout.startswith("msq compare: statistics mode")


def test_log_lines_only_with_v_and_never_the_written_files_twice(red_card: Path,
                                                                 tmp_path: Path) -> None:
    result = run("compare", str(red_card), "-o", str(tmp_path / "out"), "-v")
    assert result.exit_code == 0
    assert "[INFO] compare mode: statistics (default)" in result.stderr
    assert "[INFO]" not in result.stdout
    written = [line.split("wrote ", 1)[1] for line in result.stdout.splitlines() if "wrote " in line]
    # the workbook, the advisor and blame's JSON, each once
    assert sorted(Path(p).name.split("_")[0] for p in written) == ["advisor", "blame", "compare"]
    for path in written:
        assert path not in result.stderr  # once, in the summary ("Compare result is" is gone)


def test_a_log_line_never_shares_the_progress_line(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    setup_logging(1, False)
    from msq.tensors.pool import _Progress

    bar = _Progress(10, True)
    bar.advance(3)
    logging.getLogger("msq").warning("a tensor file is odd")
    bar.advance(7)
    lines = err.getvalue().split("\n")
    logged = [line for line in lines if "a tensor file is odd" in line]
    assert len(logged) == 1 and re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[WARNING\]", logged[0])
    assert lines[0] == "\rmsq: tensor metrics 3/10 (30%)"
    assert lines[-2:] == ["\rmsq: tensor metrics 10/10 (100%)", ""]
    status_line.break_line()  # closed: nothing more is written
    assert err.getvalue().endswith("(100%)\n")


def test_a_directory_run_does_not_say_it_waits_for_its_own_history(tmp_path: Path) -> None:
    """The driver alone opens the history (msq/run_writer.py): with -v, no pair says it waits
    for another process, and every pair is recorded."""
    roots = build_roots(tmp_path / "dumps")
    result = run("compare", str(roots["v1"]), "-o", str(tmp_path / "out"), "-v")
    assert result.exit_code == 0, result.output
    assert "[INFO]" in result.stderr  # -v: log lines are on
    assert "another process" not in result.stderr
    assert len(re.findall(r"recorded as compare \d+ in ", result.stdout)) == 6


# --------------------------------------------------------------------- directory runs: the total


def test_directory_run_ends_with_a_total_line(tmp_path: Path) -> None:
    roots = build_roots(tmp_path / "dumps")
    out = tmp_path / "out"
    result = run("compare", str(roots["v1"]), "-o", str(out), "--no-history", "--fail-on", "red")
    assert result.exit_code == 3, result.output
    lines = result.stdout.splitlines()
    titles = [line.split(":")[0] for line in lines if line.startswith("msq compare step")]
    assert titles == [f"msq compare step{s} rank{r}-rank{r}" for s in (0, 1, 2) for r in (0, 1)]
    total = re.fullmatch(r"msq compare total: 6 compares, (\d+) rows \((\d+) matched, 0 NPU-only\),"
                         r" (\d+) red, (\d+) yellow, \d+\.\ds; first suspect in (.+)", lines[-1])
    assert total, lines[-1]
    rows, matched, red, yellow, where = total.groups()
    per_pair = [re.search(r": statistics mode, (\d+) rows .*, (\d+) red, (\d+) yellow", line)
                for line in lines if line.startswith("msq compare step")]
    assert int(rows) == int(matched) == sum(int(m.group(1)) for m in per_pair)
    assert (int(red), int(yellow)) == (sum(int(m.group(2)) for m in per_pair),
                                       sum(int(m.group(3)) for m in per_pair))
    first_pair = lines[lines.index(next(x for x in lines if "first suspect: row" in x)) - 1]
    assert first_pair.startswith(f"msq compare {where}:")
    # the gate: over every pair, and the first red row of the first pair that has one
    (gate,) = result.stderr.splitlines()
    assert re.fullmatch(r"msq: accuracy gate tripped \(--fail-on red\): 1 red row in 1 of 6 "
                        r"compares; first: step1 rank1-rank1 row \d+: "
                        r"Functional\.linear\.1\.forward\.output\.0 \(.+\)", gate), gate


def test_a_single_card_has_no_total_line(red_card: Path, tmp_path: Path) -> None:
    result = run("compare", str(red_card), "-o", str(tmp_path / "out"), "--no-history")
    assert "total" not in result.stdout


def test_msq_runs_lists_ids_in_step_and_rank_order(tmp_path: Path) -> None:
    roots = build_roots(tmp_path / "dumps")
    out = tmp_path / "out"
    assert run("compare", str(roots["v1"]), "-o", str(out), "-q").exit_code == 0
    listed = run("runs", "--db", str(out / "msq.duckdb"), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(listed.stdout)))
    assert [row["compare_id"] for row in rows] == [str(i) for i in range(1, 7)]
    assert [(row["step"], row["rank"]) for row in rows] == \
        [(str(s), str(r)) for s in (0, 1, 2) for r in (0, 1)]


def test_blame_says_where_the_error_enters_first_and_its_worst_source(tmp_path: Path) -> None:
    """The shipped demo (tfm_stat_L1): fp16-rounded GEMMs make linear.0 a small local source
    early, the injected gelu.1 is the worst; the console names the first and, as it differs,
    the worst, which is the blame view's blame_rank 1 and the advisor's first source."""
    demo = Path(__file__).resolve().parents[1] / "fixtures" / "stat" / "compare.json"
    out = tmp_path / "out"
    result = run("compare", str(demo), "-o", str(out))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    first = next(re.match(r"  error enters at: (\S+) \(sheet row (\d+)\)", x) for x in lines
                 if x.startswith("  error enters at: "))
    worst = next((re.match(r"  worst local source: (\S+) \(sheet row (\d+)\)", x)
                  for x in lines if x.startswith("  worst local source: ")), None)
    assert first and worst, result.stdout
    assert first.group(1) == "Functional.linear.0.forward.output.0"
    assert worst.group(1) == "Functional.gelu.1.forward.output.0"
    ranked = run("sql", "--db", str(out / "msq.duckdb"), "--format", "csv",
                 "SELECT npu_name FROM blame WHERE verdict = 'local' ORDER BY blame_rank")
    names = [name.strip('"') for name in ranked.stdout.split()[1:]]
    assert names == [worst.group(1), first.group(1)]
    # with one local source (or the first being the worst) there is no second line
    single = single_card(tmp_path / "one", {LINEAR1_OUT: {"Max": 3.0}})
    one = run("compare", str(single), "-o", str(tmp_path / "one_out"), "--no-history")
    assert "error enters at: " in one.stdout and "worst local source" not in one.stdout


def test_a_directory_compare_names_a_worst_source_only_where_it_is_another_row(
        tmp_path: Path) -> None:
    """fixtures/ranks: rank 0 has one local source (the first is the worst: one line), rank 1
    two (the worst named too). The pool's pairs reach the console with their blame rows packed
    (msq.blame.summary.PackedRows: new dicts on each read), so the first and the worst are
    told apart by their row, not by being one object."""
    demo = Path(__file__).resolve().parents[1] / "fixtures" / "ranks" / "compare.json"
    result = run("compare", str(demo), "-o", str(tmp_path / "out"), "--no-history")
    assert result.exit_code == 0, result.output
    blocks = re.split(r"^msq compare ", result.stdout, flags=re.MULTILINE)
    by_rank = {b.split(":", 1)[0]: b for b in blocks if b.startswith("rank")}
    assert set(by_rank) == {"rank0-rank0", "rank1-rank1"}, result.stdout
    assert "error enters at: " in by_rank["rank0-rank0"]
    assert "worst local source" not in by_rank["rank0-rank0"]
    assert "  worst local source: Functional.linear.1.forward.output.0 (sheet row 11)" in \
        by_rank["rank1-rank1"]
