"""``msq show`` (issue 12, item 10): a compare from the history or an output folder, its red and
yellow rows with their rules, a line per rank and step for a directory run, in 100 columns."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from msq.cli import main
from tests.history.builders import LINEAR1_OUT, RELU_OUT, as_version_3, build_roots, single_card

PATH_LINES = ("  NPU:", "  bench:", "  files:", "        ", "  read from")


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def fits(text: str) -> None:
    """Every line within 100 columns (paths are printed whole, so their lines are not counted)."""
    long = [line for line in text.splitlines()
            if len(line) > 100 and not line.startswith(PATH_LINES)]
    assert long == []


def marked_in_history(db: Path, compare_id: int) -> list[tuple[int, str, str, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT out_seq + 2, mark, npu_name, "
                           "coalesce(nullif(reason, ''), mark_rules) FROM result_rows "
                           "WHERE compare_id = ? AND mark IS NOT NULL ORDER BY out_seq",
                           [compare_id]).fetchall()
    finally:
        con.close()


def shown_rows(text: str) -> list[tuple[int, str, str, str]]:
    """(row, mark, name, why) of each marked row the view lists."""
    found = re.findall(r"^ +(\d+)  (red|yellow) +(\S+)\n {19}(.+)$", text, re.MULTILINE)
    return [(int(row), mark, name, rules) for row, mark, name, rules in found]


@pytest.fixture
def one_card(tmp_path: Path) -> tuple[Path, Result]:
    """A compare with a red and a yellow-candidate row, recorded in out/msq.duckdb."""
    cfg = single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}, RELU_OUT: {"Max": 1.25}})
    out = tmp_path / "out"
    result = run("compare", str(cfg), "-o", str(out))
    assert result.exit_code == 0, result.output
    return out, result


def test_show_a_compare_by_id(one_card: tuple[Path, Result]) -> None:
    out, compared = one_card
    result = run("show", "1", "--db", str(out / "msq.duckdb"))
    assert result.exit_code == 0, result.output
    text = result.stdout
    fits(text)
    assert text.startswith("compare 1 (step0 rank0): statistics mode, default, ")
    counts = re.search(r"(\d+ rows \(.*\)), (\d+) red, (\d+) yellow", compared.stdout)
    assert f"  {counts.group(0)}\n" in text
    # the suspect by the same row as the console gave
    suspect = re.search(r"first suspect: (row \d+: \S+)", compared.stdout).group(1)
    assert f"  first suspect: {suspect}\n" in text
    # every red and yellow row, with the rules that fired, as the history keeps them
    want = marked_in_history(out / "msq.duckdb", 1)
    assert want and shown_rows(text) == want
    assert f"red and yellow rows ({len(want)}):" in text


def test_the_default_mode_says_which_rule_fired_and_compat_names_the_rules(
        tmp_path: Path) -> None:
    """The default mode's reason carries the numbers (as the Reason column and the gate line do);
    ``--compat msprobe-1.1`` has only msprobe's rules, so show names them."""
    cfg = single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}})
    shown = {}
    for mode, flags in (("default", []), ("compat", ["--compat", "msprobe-1.1"])):
        out = tmp_path / mode
        assert run("compare", str(cfg), "-o", str(out), "--format", "xlsx,csv",
                   *flags).exit_code == 0
        shown[mode] = {name: why for _, _, name, why in shown_rows(run("show", str(out)).stdout)}
        (out / "msq.duckdb").unlink()  # the same from the CSV alone
        assert {name: why for _, _, name, why in shown_rows(
            run("show", str(out)).stdout)} == shown[mode]
    said = re.fullmatch(r"scale-aware error ([\d.]+) >= 0\.1, from Max: NPU ([\d.]+), "
                        r"bench ([\d.]+)", shown["default"]["Functional.linear.1.forward.output.0"])
    assert said, shown["default"]
    err, npu, bench = map(float, said.groups())  # the NPU's Max is 3x the bench's
    assert npu == pytest.approx(3 * bench, rel=1e-2) and err == pytest.approx(2 / 3, rel=1e-2)
    rules = shown["compat"]["Functional.linear.1.forward.output.0"]
    assert rules.endswith("relative error") and not re.search(r"\d", rules)


def test_show_an_output_folder_is_its_latest_run(one_card: tuple[Path, Result]) -> None:
    out, _ = one_card
    by_folder, by_id = run("show", str(out)), run("show", "1", "--db", str(out / "msq.duckdb"))
    assert by_folder.exit_code == 0, by_folder.output
    assert by_folder.stdout == by_id.stdout


def test_limit_caps_the_rows_and_says_how_many_more(tmp_path: Path) -> None:
    cfg = single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}, RELU_OUT: {"Max": 3.0}})
    out = tmp_path / "out"
    assert run("compare", str(cfg), "-o", str(out)).exit_code == 0
    every = shown_rows(run("show", str(out), "--limit", "0").stdout)
    assert len(every) >= 2
    capped = run("show", str(out), "--limit", "1").stdout
    assert shown_rows(capped) == every[:1]
    assert f"  ... and {len(every) - 1} more (msq show --limit 0 lists every one)" in capped


def test_a_directory_run_has_a_line_per_rank_and_step(tmp_path: Path) -> None:
    roots = build_roots(tmp_path / "dumps")
    out = tmp_path / "out"
    compared = run("compare", str(roots["v1"]), "-o", str(out))
    assert compared.exit_code == 0, compared.output
    result = run("show", str(out))
    assert result.exit_code == 0, result.output
    text = result.stdout
    fits(text)
    assert text.startswith("run of 6 compares (ids 1-6): statistics mode, default, ")
    table = re.findall(r"^ +(\d) +(\d) +(\d) +(\d+) +(\d+) +(\d+)  (.+)$", text, re.MULTILINE)
    assert [(int(s), int(r)) for s, r, *_ in table] == [(s, r) for s in (0, 1, 2) for r in (0, 1)]
    # each line agrees with what the compare printed for that pair
    for step, rank, _id, rows, red, yellow, suspect in table:
        block = re.search(rf"^msq compare step{step} rank{rank}-rank{rank}: statistics mode, "
                          rf"(\d+) rows .*, (\d+) red, (\d+) yellow.*\n  (.+)$",
                          compared.stdout, re.MULTILINE)
        assert (rows, red, yellow) == block.groups()[:3]
        said = block.group(4)
        assert said == f"first suspect: {suspect}" or (suspect == "no suspect"
                                                       and said.startswith("no suspect"))
    assert "step1 rank1: red and yellow rows (" in text


def test_the_same_run_from_its_csv_or_parquet_outputs(tmp_path: Path) -> None:
    """Without a history the folder's outputs carry the marks: the same view, but ids and
    paths."""
    roots = build_roots(tmp_path / "dumps")
    with_history, files_only = tmp_path / "hist", tmp_path / "files"
    assert run("compare", str(roots["v2"]), "-o", str(with_history)).exit_code == 0
    for fmt in ("csv", "parquet"):
        out = files_only / fmt
        assert run("compare", str(roots["v2"]), "-o", str(out), "--no-history",
                   "--format", fmt).exit_code == 0
        text = run("show", str(out)).stdout
        fits(text)
        assert shown_rows(text) == shown_rows(run("show", str(with_history)).stdout)
        assert re.search(r"^run of 6 compares: ", text, re.MULTILINE)
        lines = [re.sub(r"^ +(\d) +(\d) +\S+ ", r"\1 \2 ", line) for line in text.splitlines()
                 if re.match(r"^ +\d +\d +[\d-]+ +\d+ ", line)]
        hist_lines = [re.sub(r"^ +(\d) +(\d) +\S+ ", r"\1 \2 ", line)
                      for line in run("show", str(with_history)).stdout.splitlines()
                      if re.match(r"^ +\d +\d +[\d-]+ +\d+ ", line)]
        assert [line.split() for line in lines] == [line.split() for line in hist_lines]


def test_long_names_and_rules_wrap_within_100_columns(tmp_path: Path) -> None:
    long_op = "Module." + ".".join(f"layers{i}" for i in range(14)) + ".Linear.forward.0"
    extra = {long_op: {"input_args": [], "input_kwargs": {},
                       "output": [{"type": "torch.Tensor", "dtype": "torch.float32",
                                   "shape": [4], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
                                   "Norm": 1.0, "requires_grad": False}]}}
    cfg = single_card(tmp_path / "dumps", extra=extra)
    npu = Path(json.loads(cfg.read_text())["npu_path"])
    doc = json.loads(npu.read_text())
    doc["data"][long_op]["output"][0]["Max"] = float("inf")  # red there: overflow
    npu.write_text(json.dumps(doc))
    out = tmp_path / "out"
    assert run("compare", str(cfg), "-o", str(out)).exit_code == 0
    text = run("show", str(out)).stdout
    fits(text)
    joined = text.replace("\n" + " " * 19, "")
    assert long_op + ".output.0" in joined


def test_nothing_to_show_is_one_line(tmp_path: Path) -> None:
    cfg = single_card(tmp_path / "dumps")
    out = tmp_path / "out"
    assert run("compare", str(cfg), "-o", str(out), "--no-history").exit_code == 0
    result = run("show", str(out))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"msq: error: {out}: no history database (msq.duckdb) and "
                                    "no CSV or Parquet output to read")
    missing = run("show", "7", "--db", str(tmp_path / "nope.duckdb"))
    assert missing.exit_code == 1 and "no history database here" in missing.stderr


def test_an_unknown_id_says_which_ids_there_are(one_card: tuple[Path, Result]) -> None:
    out, _ = one_card
    result = run("show", "9", "--db", str(out / "msq.duckdb"))
    assert result.exit_code == 1
    assert result.stderr == (f"msq: error: {out / 'msq.duckdb'}: no compare 9 (the ids go from "
                             "1 to 1); msq runs lists them\n")


def test_without_a_target_the_latest_run_of_the_history(one_card: tuple[Path, Result],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = one_card
    monkeypatch.chdir(out)
    result = run("show")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("compare 1 ")


def test_a_version_1_history_shows_the_rules(one_card: tuple[Path, Result]) -> None:
    """``msq show`` opens read-only and does not migrate: a file written before the reason
    column shows the rules' names it has."""
    out, _ = one_card
    db = out / "msq.duckdb"
    as_version_3(db)  # then without the reason column: the layout of version 1
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE result_rows DROP COLUMN reason")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    result = run("show", "1", "--db", str(db))
    assert result.exit_code == 0, result.output
    shown = shown_rows(result.stdout)
    assert shown and all(why in ("relative error", "error grows", "inf/nan")
                         for _, _, _, why in shown), shown


def _unwrapped(text: str) -> str:
    """``msq show``'s text with its wrapped lines joined again (a continuation is indented two
    more columns than its line; the marked rows' blocks are left as they are)."""
    return re.sub(r"\n    (?=\S)", " ", text)


def _blame_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()
            if re.match(r"^ *(error enters at: |worst local source: |blame: )", line)]


def test_a_compare_shows_where_its_error_enters_as_the_compare_said(
        one_card: tuple[Path, Result]) -> None:
    """The blame lines ``msq compare`` printed for the compare (where the error enters, the
    worst local source when it is another row, the verdict counts and links), read back from
    the history's blame rows."""
    out, compared = one_card
    said = _blame_lines(compared.stdout)
    assert said and said[0].startswith("error enters at: ") and said[-1].startswith("blame: ")
    text = run("show", "1", "--db", str(out / "msq.duckdb")).stdout
    fits(text)
    assert _blame_lines(_unwrapped(text)) == said


def test_a_directory_run_shows_where_the_error_enters_first_over_every_rank(
        tmp_path: Path) -> None:
    """The shipped multi-rank demo: the run's line (first local source over every rank and
    step, and how many in all) as ``msq compare`` printed it, and each compare's own lines when
    it is shown alone."""
    demo = Path(__file__).resolve().parents[1] / "fixtures" / "ranks" / "compare.json"
    out = tmp_path / "out"
    compared = run("compare", str(demo), "-o", str(out))
    assert compared.exit_code == 0, compared.output
    run_line = [line for line in compared.stdout.splitlines() if line.startswith("blame over ")]
    assert len(run_line) == 1 and "the error enters first at rank " in run_line[0]
    text = run("show", str(out)).stdout
    fits(text)
    assert [line.strip() for line in _unwrapped(text).splitlines()
            if line.strip().startswith("blame over ")] == run_line
    # each pair's own lines, as its block of the compare's output has them
    blocks = re.split(r"^msq compare ", compared.stdout, flags=re.MULTILINE)[1:]
    ids = re.findall(r"recorded as compare (\d+) in ", compared.stdout)
    assert len(ids) == len([b for b in blocks if "recorded as compare" in b]) >= 2
    for block in blocks:
        found = re.search(r"recorded as compare (\d+) in ", block)
        if found is None:
            continue
        alone = run("show", found.group(1), "--db", str(out / "msq.duckdb")).stdout
        assert _blame_lines(_unwrapped(alone)) == _blame_lines(block)


def test_compat_mode_shows_no_blame(tmp_path: Path) -> None:
    """``--compat msprobe-1.1`` records no blame: nothing to show, no line about it."""
    cfg = single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}})
    out = tmp_path / "out"
    assert run("compare", str(cfg), "-o", str(out), "--compat", "msprobe-1.1").exit_code == 0
    text = run("show", "1", "--db", str(out / "msq.duckdb")).stdout
    assert text.startswith("compare 1 ") and _blame_lines(text) == []


def test_a_version_8_history_reads_blame_rows_through_the_current_view(
        one_card: tuple[Path, Result]) -> None:
    """Reading never migrates: a version-8 file keeps its stored view, and the reader puts the
    current one in front of it (the stored one copies a list of every term into each row of a
    join: seconds on a large run). Same rows; ``msq show`` and ``msq sql`` both read it."""
    from tests.history.builders import as_version_8

    out, compared = one_card
    db = out / "msq.duckdb"
    query = "SELECT * FROM blame_rows ORDER BY compare_id, out_seq, io, op_seq"
    current = run("sql", query, "--db", str(db), "--format", "json")
    assert current.exit_code == 0, current.output
    as_version_8(db)
    older = run("sql", query, "--db", str(db), "--format", "json")
    assert older.exit_code == 0, older.output
    assert json.loads(older.stdout) == json.loads(current.stdout) and json.loads(older.stdout)
    used = run("sql", "SELECT database_name, sql FROM duckdb_views() WHERE view_name = "
               "'blame_rows' ORDER BY database_name", "--db", str(db), "--format", "json")
    views = {v["database_name"]: v["sql"] for v in json.loads(used.stdout)}
    assert "list(term" in views["msq"] and "LEFT JOIN terms" in views["temp"]
    assert run("sql", "SELECT value FROM meta WHERE key = 'schema_version'", "--db", str(db),
               "--format", "csv").stdout.splitlines()[1] == '"8"'
    assert _blame_lines(_unwrapped(run("show", "1", "--db", str(db)).stdout)) == \
        _blame_lines(compared.stdout)
