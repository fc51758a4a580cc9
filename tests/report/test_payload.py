"""The report's data, without a browser: what a page would decode, checked against the history.

Real compares of the shipped fixtures (and golden cases where present) are recorded into real
DuckDB files; the report's payload is decoded here as the page decodes it (msq/report/payload.py
describes the layout) and compared with ``result_rows``.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner

from msq.cli import main
from msq.result import sheet_row

REPO = Path(__file__).resolve().parents[2]
DTYPES = {"f64": "<f8", "u32": "<u4", "u16": "<u2", "u8": "u1"}


def decode_html(path: Path) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The payload inside a report: its JSON header and every row column as a list."""
    text = path.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/octet-stream" id="msq-data">([A-Za-z0-9+/=]*)'
                      r"</script>", text)
    assert found, "no payload element"
    blob = base64.b64decode(found.group(1))
    assert blob[:4] == b"MSQR"
    count = int.from_bytes(blob[4:8], "little")
    lengths = [int.from_bytes(blob[8 + 4 * k:12 + 4 * k], "little") for k in range(count)]
    offset, parts = 8 + 4 * count, []
    for length in lengths:
        parts.append(gzip.decompress(blob[offset:offset + length]))
        offset += length
    meta = json.loads(parts[0])
    cols: dict[str, list[Any]] = {}
    for name, spec in meta["row_columns"].items():
        if spec["enc"] in DTYPES:
            values = np.frombuffer(parts[spec["part"]], DTYPES[spec["enc"]]).tolist()
            cols[name] = [spec["dict"][v] for v in values] if "dict" in spec else values
        elif spec["enc"] == "list":
            cols[name] = spec["values"]
    for name, spec in meta["row_columns"].items():
        if spec["enc"] == "same":
            column = [None if None in parts else ".".join(parts)
                      for parts in zip(*(cols[r] for r in spec["ref"]))]
            for i, value in spec["except"]:
                column[i] = value
            cols[name] = column
    assert all(len(v) == meta["rows"] for v in cols.values())
    return meta, cols


def msq(*args: str, cwd: Path | None = None, monkeypatch: pytest.MonkeyPatch | None = None,
        code: int = 0) -> str:
    if cwd is not None and monkeypatch is not None:
        monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def history_rows(db: Path, compare_id: int) -> list[dict[str, Any]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rel = con.execute("SELECT * FROM result_rows WHERE compare_id = ? ORDER BY out_seq",
                          [compare_id])
        names = [d[0] for d in rel.description]
        return [dict(zip(names, r)) for r in rel.fetchall()]
    finally:
        con.close()


def expected_error(mode: str, row: dict[str, Any]) -> float | None:
    """The documented error figure (docs/report.md), computed here from the history row."""
    def num(v: Any) -> float | None:
        return None if v is None else float(v)

    if mode == "statistics":
        parts = [abs(v) for v in (num(row["max_rel_pct"]), num(row["norm_rel_pct"]))
                 if v is not None]
        if not parts:
            return None
        return math.nan if any(math.isnan(p) for p in parts) else max(parts) / 100
    if mode == "tensor":
        cos = num(row["cosine"])
        if cos is not None and not math.isnan(cos):
            return max(0.0, 1.0 - cos)
        return None if row["max_abs_err"] is None else abs(row["max_abs_err"])
    if row["npu_md5"] is None or row["bench_md5"] is None:
        return None
    return float(row["npu_md5"] != row["bench_md5"])


def blame_errors(db: Path, compare_id: int) -> dict[int, float | None]:
    """Blame's own error figure per row (the history's view ``blame``, docs/schema.md)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT out_seq, output_err FROM blame WHERE compare_id = ?",
                                [compare_id]).fetchall())
    finally:
        con.close()


def same_number(a: float | None, b: float | None) -> bool:
    """Equal, or within a relative 1e-12: the page's and the history's figures are computed
    by different engines (SQL vs numpy) and may differ in the last bits."""
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


def check_rows(meta: dict[str, Any], cols: dict[str, list[Any]], db: Path) -> None:
    """Every compare's rows in the payload are its result_rows, with the documented figure."""
    for head in meta["compares"]:
        want = history_rows(db, head["compare_id"])
        # with blame the figure is blame's output_err (docs/report.md), else the mode's figure
        blamed = blame_errors(db, head["compare_id"]) if meta["blame"] else None
        got = range(head["start"], head["end"])
        assert len(got) == len(want) == head["n_rows"]
        for i, row in zip(got, want):
            assert cols["out_seq"][i] == row["out_seq"]
            assert cols["npu_name"][i] == row["npu_name"]
            assert cols["bench_name"][i] == row["bench_name"]
            assert cols["mark"][i] == row["mark"]
            assert cols["mark_rules"][i] == row["mark_rules"]
            assert bool(cols["failing"][i]) == bool(row["failing"])
            figure = None if cols["err_none"][i] else cols["err"][i]
            expected = expected_error(head["mode"], row)
            if blamed is not None and blamed.get(row["out_seq"]) is not None:
                expected = blamed[row["out_seq"]]
            assert same_number(figure, expected), (i, row["npu_name"])
            for col in meta["columns"][head["mode"]]:
                if col["kind"] != "text":
                    shown = cols[col["key"] + "__show"][i]
                    text = row.get(col["key"] + "_text")
                    assert shown == (text if text is not None else
                                     ("" if row[col["key"]] is None else None))
                    if row[col["key"]] is not None:
                        assert same_number(cols[col["key"]][i], row[col["key"]])
                else:
                    assert cols[col["key"]][i] == row[col["key"]]


# --------------------------------------------------------------------------------------------


def _stat_run(out: Path, *extra: str) -> Path:
    CliRunner().invoke(main, ["compare", str(REPO / "fixtures/stat/compare.json"), "-o", str(out),
                              "--format", "xlsx,html", "-q", *extra], catch_exceptions=False)
    return out


@pytest.fixture(scope="module")
def stat_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _stat_run(tmp_path_factory.mktemp("stat") / "out")


@pytest.fixture(scope="module")
def stat_run_no_blame(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _stat_run(tmp_path_factory.mktemp("stat_nb") / "out", "--no-blame")


def test_compare_and_history_reports_hold_the_recorded_rows(stat_run: Path,
                                                             tmp_path: Path) -> None:
    (live,) = stat_run.glob("compare_result_*.html")
    db = stat_run / "msq.duckdb"
    msq("report", "--db", str(db), "-o", str(tmp_path / "h.html"))
    live_meta, live_cols = decode_html(live)
    hist_meta, hist_cols = decode_html(tmp_path / "h.html")
    hist_meta["compares"][0]["compare_id"] = 1
    check_rows(hist_meta, hist_cols, db)
    # the live compare builds the same rows before recording them
    assert live_cols.keys() == hist_cols.keys()
    for name in live_cols:
        assert [str(v) for v in live_cols[name]] == [str(v) for v in hist_cols[name]], name
    def without_id(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in f.items() if k != "compare_id"} for f in items]

    assert without_id(live_meta["findings"]) == without_id(hist_meta["findings"])
    assert without_id(live_meta["divergence"]) == without_id(hist_meta["divergence"])
    assert live_meta["columns"] == hist_meta["columns"]
    for key in ("n_rows", "n_red", "n_yellow", "suspect", "suspect_line", "npu_path", "advice"):
        assert live_meta["compares"][0][key] == hist_meta["compares"][0][key], key


def test_the_page_is_self_contained_and_its_scripts_are_pinned(stat_run: Path) -> None:
    (page,) = stat_run.glob("compare_result_*.html")
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "@import" not in text and "url(http" not in text
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', text).group(1)
    assert "default-src 'none'" in policy
    scripts = re.findall(r"<script>(.*?)</script>", text, flags=re.DOTALL)
    assert len(scripts) == 2  # uPlot and the page's own script; the data is not a script
    for body in scripts:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    assert "uPlot" in scripts[0] and "v1.6.32" in scripts[0]


def test_findings_name_the_rule_and_the_worst_rows(stat_run: Path) -> None:
    (page,) = stat_run.glob("compare_result_*.html")
    meta, _ = decode_html(page)
    db = stat_run / "msq.duckdb"
    rows = history_rows(db, 1)
    by_rule: dict[tuple[str | None, str], list[dict[str, Any]]] = {}
    for row in rows:
        for rule in (row["mark_rules"] or "").split(","):
            if rule.strip():
                by_rule.setdefault((row["mark"], rule.strip()), []).append(row)
        if row["failing"]:
            by_rule.setdefault((None, "advisor: " + row["result"]), []).append(row)
    got: dict[tuple[str | None, str], list[int]] = {}
    for f in meta["findings"]:
        got.setdefault((f["mark"], f["rule"]), []).append(f["out_seq"])
        assert f["n_rule"] == len(by_rule[(f["mark"], f["rule"])])
    assert set(got) == set(by_rule)

    blamed = blame_errors(db, 1) if meta["blame"] else {}

    def worst(r: dict[str, Any]) -> tuple[float, int]:
        e = blamed.get(r["out_seq"])
        e = expected_error("statistics", r) if e is None else e
        return (-math.inf if e is None else (math.inf if math.isnan(e) else e), -r["out_seq"])

    for key, seqs in got.items():
        want = sorted(by_rule[key], key=worst, reverse=True)[:5]
        assert seqs == [r["out_seq"] for r in want], key


@pytest.mark.parametrize("case, mode", [("fixtures/tensor", "tensor"), ("golden/mlp_md5_L1", "md5"),
                                        ("golden/tfm_tensor_L1", "tensor")])
def test_error_figure_of_each_mode(case: str, mode: str, request: pytest.FixtureRequest,
                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if case.startswith("golden/"):
        where = request.getfixturevalue("golden") / case.split("/")[1]
        spec = "expected/default/compare.json"
    else:
        where, spec = REPO / case, "compare.json"
    out = tmp_path / "out"
    msq("compare", spec, "-o", str(out), "--format", "html", "-q", cwd=where,
        monkeypatch=monkeypatch)
    (page,) = out.glob("compare_result_*.html")
    meta, cols = decode_html(page)
    assert meta["compares"][0]["mode"] == mode
    meta["compares"][0]["compare_id"] = 1
    check_rows(meta, cols, out / "msq.duckdb")
    figures = [e for e, none in zip(cols["err"], cols["err_none"]) if not none]
    assert figures and any(e > 0 for e in figures)


def _ranks_history(tmp: Path, labels: list[str | None]) -> Path:
    out = tmp / "out"
    for label in labels:
        args = ["compare", str(REPO / "fixtures/ranks/compare.json"), "-o", str(out), "-q"]
        msq(*args, *(["--label", label] if label else []))
    return out / "msq.duckdb"


def test_which_compares_a_history_report_shows(tmp_path: Path) -> None:
    db = _ranks_history(tmp_path, ["a", "a", "b", None])   # compares 1-2, 3-4 (a), 5-6, 7-8
    page = tmp_path / "r.html"

    def shown(*args: str) -> set[int]:
        msq("report", "--db", str(db), "-o", str(page), *args)
        return {c["compare_id"] for c in decode_html(page)[0]["compares"]}

    assert shown("--label", "a") == {3, 4}        # the newest of each rank: a re-run replaces
    assert shown("--label", "b") == {5, 6}
    assert shown("--compare", "2") == {2}
    assert shown() == {7, 8}                       # the newest compare's run (unlabelled, same -o)
    meta = decode_html(page)[0]
    assert meta["title"] == "statistics run: 1 step x 2 ranks"
    assert [(c["step"], c["rank"]) for c in meta["compares"]] == [(0, 0), (0, 1)]
    first, second = meta["compares"]
    assert first["start"] == 0 and second["start"] == first["end"]


@pytest.mark.parametrize("record", [True, False])
def test_a_directory_compare_writes_one_report_per_pair(record: bool, tmp_path: Path) -> None:
    """The driver of a directory compare (msq/run_writer.py) writes each pair's page from the
    pair's shipped tables: the same rows as its history record, with or without a history."""
    def run(out: Path, *extra: str) -> None:
        msq("compare", str(REPO / "fixtures/ranks/compare.json"), "-o", str(out),
            "--format", "xlsx,html", "-q", *extra)

    out = tmp_path / "out"
    run(out, *([] if record else ["--no-history"]))
    pages = sorted(out.glob("compare_result_*.html"))
    assert [p.name.split("_")[2] for p in pages] == ["rank0-rank0", "rank1-rank1"]
    db = out / "msq.duckdb"
    if not record:
        assert not db.exists()
        db = tmp_path / "h.duckdb"  # the same compare recorded elsewhere, to check against
        run(tmp_path / "again", "--db", str(db))
    for compare_id, page in enumerate(pages, start=1):
        meta, cols = decode_html(page)
        (head,) = meta["compares"]
        assert head["rank"] == compare_id - 1
        head["compare_id"] = compare_id
        check_rows(meta, cols, db)
        assert None not in cols["op_name"]


def test_a_directory_compares_pages_carry_each_pairs_blame(tmp_path: Path) -> None:
    """Each pair's page of a directory compare reads that pair's blame (its rows shipped to the
    driver, msq/run_writer.py): the fault injected on rank 1 is rank 1's local source; rank 0,
    which only receives it through the all_reduce, has none; the verdicts are the history's
    per-compare ones (blame_rows)."""
    case = REPO / "tests/data/faults/dist_tp_stat"
    out = tmp_path / "out"
    msq("compare", str(case / "compare.json"), "-o", str(out), "--format", "xlsx,html", "-q")
    pages = sorted(out.glob("compare_result_*.html"))
    assert [p.name.split("_")[2] for p in pages] == ["rank0-rank0", "rank1-rank1"]
    con = duckdb.connect(str(out / "msq.duckdb"), read_only=True)
    try:
        for compare_id, page in enumerate(pages, start=1):
            meta, cols = decode_html(page)
            assert meta["blame"] is True
            recorded = dict(con.execute("SELECT out_seq, verdict FROM blame_rows "
                                        "WHERE compare_id = ?", [compare_id]).fetchall())
            assert recorded
            shown = {s: v for s, v in zip(cols["out_seq"], cols["blame_verdict"]) if v}
            assert shown == recorded
            names = [s["row_name"] for s in meta["local_sources"]]
            if compare_id == 2:
                assert names and names[0] == "Functional.linear.6.forward.output.0"
            else:
                assert names == []
    finally:
        con.close()


def test_report_errors_are_one_line(tmp_path: Path) -> None:
    db = _ranks_history(tmp_path, ["a"])
    out = str(tmp_path / "r.html")
    text = msq("report", "--db", str(db), "--compare", "9", "-o", out, code=1)
    assert text.strip() == (f"msq: error: {db}: no compare 9 recorded; "
                            f"`msq runs --db {db}` lists them")
    text = msq("report", "--db", str(db), "--label", "zz", "-o", out, code=1)
    assert "no compare recorded with label 'zz'" in text and text.count("\n") == 1
    text = msq("report", "--db", str(db), "--label", "a", "--compare", "1", "-o", out, code=2)
    assert "give --compare or --label, not both" in text
    text = msq("report", "--db", str(db), "-o", str(tmp_path / "no" / "r.html"), code=1)
    assert "cannot write the report" in text and text.count("\n") == 1
    text = msq("report", "--db", str(tmp_path / "none.duckdb"), "-o", out, code=1)
    assert "no history database here" in text
    assert not (tmp_path / "r.html").exists()


def test_without_blame_the_advisor_suspect_is_where_the_error_enters(stat_run_no_blame: Path
                                                                      ) -> None:
    stat_run = stat_run_no_blame
    (page,) = stat_run.glob("compare_result_*.html")
    meta, cols = decode_html(page)
    assert meta["blame"] is False and meta["local_sources"] == []
    assert not any(k.startswith("blame_") for k in cols)
    head = meta["compares"][0]
    advisor = next(stat_run.glob("advisor_*.txt")).read_text()
    line = sheet_row(int(head["suspect_line"]))[1]  # the default advisor's Line: the sheet row
    assert f"Line: {line}\nSuspect Nodes: {head['suspect']}\n" in advisor
    assert f"Expert Advice: {head['advice']}" in advisor
    assert meta["divergence"][0]["out_seq"] <= head["suspect_line"]


def test_a_history_report_of_a_no_blame_run_keeps_the_advisor(stat_run_no_blame: Path,
                                                              tmp_path: Path) -> None:
    """Every history has the view blame; a run with --no-blame has no rows in it, so its report
    is the advisor's (no blame mode with nothing in it), as the live one is."""
    db = stat_run_no_blame / "msq.duckdb"
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'blame'"
                           ).fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM blame").fetchone() == (0,)
    finally:
        con.close()
    msq("report", "--db", str(db), "-o", str(tmp_path / "h.html"))
    meta, cols = decode_html(tmp_path / "h.html")
    assert meta["blame"] is False and meta["local_sources"] == []
    assert not any(k.startswith("blame_") for k in cols)
    (live,) = stat_run_no_blame.glob("compare_result_*.html")
    _, live_cols = decode_html(live)
    assert live_cols.keys() == cols.keys()
    assert [str(v) for v in live_cols["err"]] == [str(v) for v in cols["err"]]


def test_a_history_report_uses_blame_only_for_compares_with_blame_rows(
        stat_run: Path, stat_run_no_blame: Path, tmp_path: Path) -> None:
    """One history, a run with blame then one with --no-blame: the report of the second is not
    in blame mode, the first one's still is."""
    out = tmp_path / "out"
    shutil.copytree(stat_run, out)
    db = out / "msq.duckdb"
    CliRunner().invoke(main, ["compare", str(REPO / "fixtures/stat/compare.json"), "-o", str(out),
                              "-q", "--no-blame", "--label", "nb"], catch_exceptions=False)
    msq("report", "--db", str(db), "--label", "nb", "-o", str(tmp_path / "nb.html"))
    assert decode_html(tmp_path / "nb.html")[0]["blame"] is False
    msq("report", "--db", str(db), "--compare", "1", "-o", str(tmp_path / "b.html"))
    meta, _ = decode_html(tmp_path / "b.html")
    assert meta["blame"] is True and meta["local_sources"]


def test_a_blame_relation_on_issue_13s_contract_is_used(stat_run_no_blame: Path,
                                                        tmp_path: Path) -> None:
    """When the history holds a ``blame`` view (issue 13's contract), its output error is the
    figure and its local sources, worst first, are where the error enters. The view here is
    written by hand on the contract's columns, in place of the history's real one (tested on
    real blame in test_browser.py), so the report is held to the contract alone."""
    db = tmp_path / "blame.duckdb"
    shutil.copy(stat_run_no_blame / "msq.duckdb", db)
    con = duckdb.connect(str(db))
    con.execute("""CREATE OR REPLACE VIEW blame AS
      SELECT r.compare_id, c.rank, c.step, r.out_seq, r.npu_name, 0.001 AS input_err,
             0.01 * (r.out_seq + 1) AS output_err, 10.0 * (r.out_seq + 1) AS amplification,
             CASE WHEN r.out_seq IN (158, 235) THEN 'local' WHEN r.out_seq > 158 THEN 'inherited'
                  ELSE 'clean' END AS verdict,
             CASE r.out_seq WHEN 235 THEN 1 WHEN 158 THEN 2 END AS blame_rank,
             'why ' || r.out_seq AS reason
      FROM result_rows r JOIN compares c USING (compare_id)
      WHERE r.kind = 'matched'""")
    con.close()
    page = tmp_path / "r.html"
    msq("report", "--db", str(db), "-o", str(page))
    meta, cols = decode_html(page)
    assert meta["blame"] is True
    assert [s["out_seq"] for s in meta["local_sources"]] == [235, 158]
    assert meta["local_sources"][0]["amplification"] == 2360.0
    assert meta["local_sources"][0]["reason"] == "why 235"
    i = cols["out_seq"].index(158)
    assert cols["blame_verdict"][i] == "local" and cols["err"][i] == pytest.approx(1.59)
    assert cols["err_kind"][i] == "blame output error"
    assert cols["blame_reason"][i] == "why 158"
    verdicts = [cols["blame_verdict"][cols["out_seq"].index(r["out_seq"])]
                for r in history_rows(db, 1)]
    assert verdicts == [None if r["kind"] != "matched" else "local" if r["out_seq"] in (158, 235)
                        else "inherited" if r["out_seq"] > 158 else "clean"
                        for r in history_rows(db, 1)]
    assert meta["rows"] == history_rows(db, 1).__len__()


@pytest.mark.parametrize("ci", ["", "true"])
def test_browser_tests_skip_without_chromium_but_fail_in_ci(ci: str, tmp_path: Path) -> None:
    """Without Chromium the browser tests skip, with the reason; under CI they fail."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MSQ_CHROMIUM": str(tmp_path / "no-chromium"), "CI": ci}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-rsf", "-p", "no:cacheprovider",
         "tests/report/test_browser.py::test_script_in_op_names_shows_as_text"],
        check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert "Chromium not found" in proc.stdout, proc.stdout
    if ci:
        assert proc.returncode == 1 and "1 error" in proc.stdout, proc.stdout
    else:
        assert proc.returncode == 0 and "1 skipped" in proc.stdout, proc.stdout
