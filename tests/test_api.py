"""The Python API (issue 12, item 12): real signatures, what the results carry, compare_json, and
the API's key names in compare.json."""

from __future__ import annotations

import inspect
import json
import os
import pydoc
import re
import time
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

import msq
from msq.cli import main
from msq.config import Options
from msq.errors import InputError, UsageError
from tests.history.builders import LINEAR1_OUT, build_roots, single_card

API = (msq.compare, msq.compare_distributed, msq.compare_json)
#: Options fields that are not the caller's to set (the msprobe switches are positional, and
#: compare.json's own is_print_compare_log comes with the input)
NOT_OPTIONS = {"stack_mode", "auto_analyze", "fuzzy_match", "is_print_compare_log",
               "blame_run"}  # blame_run: the run's blame state, set by msq.blame.run
#: Options of directory compares (engines, --resume): not msq.compare's, which compares one card
DIRECTORY_ONLY = {"engine", "ray_address", "ray_place", "resume"}


@pytest.mark.parametrize("func", API, ids=lambda f: f.__name__)
def test_help_shows_the_real_signature(func: object) -> None:
    params = inspect.signature(func).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    text = pydoc.render_doc(func, renderer=pydoc.plaintext)
    for shown in ("output_path: 'PathLike'", "stack_mode: 'bool' = False", "*, compat: ",
                  "formats: 'str | Sequence[str]' = 'xlsx'", "record: 'bool' = True",
                  "workers: 'int | None' = None", "-> 'CompareResults'"
                  if func is not msq.compare else "-> 'CompareResult'"):
        assert shown in text, shown


@pytest.mark.parametrize("func", API, ids=lambda f: f.__name__)
def test_every_option_is_in_the_signature(func: object) -> None:
    """An option added to msq.config.Options must reach the API too (and nothing else may)."""
    params = inspect.signature(func).parameters
    keyword_only = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY} - {"suffix"}
    want = set(Options.__dataclass_fields__) - NOT_OPTIONS
    assert keyword_only == (want - DIRECTORY_ONLY if func is msq.compare else want)


def test_result_carries_rank_step_absolute_paths_and_an_integer_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}})
    monkeypatch.chdir(tmp_path)
    doc = json.loads(cfg.read_text())
    rel = {"npu_json_path": os.path.relpath(doc["npu_path"]),
           "bench_json_path": os.path.relpath(doc["bench_path"])}
    res = msq.compare(rel, "out", db="hist.duckdb")
    assert (res.rank, res.step) == (0, 0)
    assert res.npu_path == doc["npu_path"] and Path(res.npu_path).is_absolute()
    assert Path(res.bench_path).is_absolute()
    assert all(Path(f).is_absolute() and Path(f).is_file() for f in res.files)
    assert res.history_db == tmp_path / "hist.duckdb"
    assert isinstance(res.suspect_row, int)
    (book,) = (tmp_path / "out").glob("*.xlsx")
    sheet = openpyxl.load_workbook(book).worksheets[0]
    assert sheet.cell(row=res.suspect_row, column=1).value == res.suspect
    assert res.suspect_row == int(res.suspect_line) + 2
    assert res.first_red is not None and res.first_red.row == res.suspect_row
    assert res.failing >= 1


def test_compare_json_runs_a_single_card_and_directories(tmp_path: Path) -> None:
    cfg = single_card(tmp_path / "dumps")
    (one,) = msq.compare_json(cfg, tmp_path / "one", record=False)
    assert one.rows == 13 and one.red == 0
    roots = build_roots(tmp_path / "roots")
    many = msq.compare_json(str(roots["v1"]), tmp_path / "many", formats="csv", record=False,
                            auto_analyze=False)
    assert [(r.step, r.rank) for r in many] == [(s, r) for s in (0, 1, 2) for r in (0, 1)]
    assert all(f.suffix == ".csv" for r in many for f in r.files)


def test_compare_distributed_results_in_step_and_rank_order(tmp_path: Path) -> None:
    roots = build_roots(tmp_path / "roots")
    res = msq.compare_distributed(tmp_path / "roots" / "v1" / "step1", tmp_path / "roots/bench/step1",
                                  tmp_path / "out", record=False, auto_analyze=False)
    assert [(r.step, r.rank, r.red) for r in res] == [(1, 0, 0), (1, 1, 1)]
    assert roots  # built


def test_api_key_names_work_in_compare_json(tmp_path: Path) -> None:
    cfg = single_card(tmp_path / "dumps")
    doc = json.loads(cfg.read_text())
    api_style = tmp_path / "api.json"
    api_style.write_text(json.dumps({"npu_json_path": doc["npu_path"],
                                     "bench_json_path": doc["bench_path"]}))
    result = CliRunner().invoke(main, ["compare", str(api_style), "-o", str(tmp_path / "out"),
                                       "--no-history"])
    assert result.exit_code == 0, result.output
    assert "13 rows" in result.stdout
    # and msprobe's compare.json names in the API's input_param
    res = msq.compare({"npu_path": doc["npu_path"], "bench_path": doc["bench_path"]},
                      tmp_path / "out2", record=False)
    assert res.rows == 13


def test_both_spellings_must_agree(tmp_path: Path) -> None:
    cfg = single_card(tmp_path / "dumps")
    doc = json.loads(cfg.read_text())
    both = tmp_path / "both.json"
    both.write_text(json.dumps({**doc, "npu_json_path": doc["bench_path"]}))
    with pytest.raises(InputError, match="'npu_path' and 'npu_json_path' name different paths"):
        msq.compare_json(both, tmp_path / "out", record=False)


def test_msprobe_suffix_is_refused_and_unknown_keywords_are_python_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="suffix"):
        msq.compare_distributed(tmp_path, tmp_path, tmp_path / "o", suffix="_x")
    with pytest.raises(TypeError, match="stak_mode"):
        msq.compare({}, tmp_path, stak_mode=True)  # type: ignore[call-arg]


@pytest.mark.parametrize("compat", [False, True], ids=["default", "compat"])
def test_one_compares_files_share_its_time_stamp(tmp_path: Path, compat: bool) -> None:
    # started just before a second turns, the compare ends in the next one: each file named by
    # the time it was written would carry two different stamps (the workbook's, then later ones)
    fixture = Path(__file__).parent.parent / "fixtures" / "stat"
    cfg = json.loads((fixture / "compare.json").read_text())
    for key in ("npu_path", "bench_path", "stack_path"):
        if key in cfg:
            cfg[key] = str(fixture / cfg[key])
    while time.time() % 1 < 0.97:
        time.sleep(0.005)
    kwargs = {"compat": "msprobe-1.1"} if compat else {}
    result = msq.compare(cfg, tmp_path, auto_analyze=True, formats=["xlsx", "csv"], **kwargs)
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".duckdb")
    assert len(names) == (3 if compat else 5), names  # the default mode adds blame CSV, JSON
    assert {re.search(r"_(\d{14})\.", n).group(1) for n in names} == {result.stamp}, names


def test_directory_results_hand_back_blame_rows_as_plain_lists(tmp_path: Path) -> None:
    """A directory compare's pairs send their blame rows to the driver packed (PackedRows, to
    keep the driver's memory flat); the API hands them back as lists of dicts, which a caller
    can change and dump as JSON, equal to the rows a single compare of the pair gives."""
    import dataclasses

    from msq.blame.summary import PackedRows

    demo = Path(__file__).resolve().parents[1] / "fixtures" / "ranks"
    res = msq.compare_distributed(demo / "npu" / "step0", demo / "bench" / "step0",
                                  tmp_path / "out", record=False, workers=2)
    via_json = msq.compare_json(demo / "compare.json", tmp_path / "out2", record=False)
    assert [r.rank for r in res] == [r.rank for r in via_json] == [0, 1]
    for r in [*res, *via_json]:
        assert r.blame is not None
        assert type(r.blame.sources) is list and type(r.blame.collectives) is list
        assert not isinstance(r.blame.sources, PackedRows)
        json.dumps(dataclasses.asdict(r.blame), default=str)
    one = msq.compare({"npu_json_path": str(demo / "npu/step0/rank1/dump.json"),
                       "bench_json_path": str(demo / "bench/step0/rank1/dump.json")},
                      tmp_path / "one", record=False)
    assert repr(res[1].blame.sources) == repr(one.blame.sources) and res[1].blame.sources
