"""Nothing compared is not a pass (default mode), and the summary never contradicts the marks.

* no matched row: the outputs are written (each row says why it is unmatched), then one error line
  and exit 1; the API raises NothingComparedError carrying the results;
* an md5 dump against a statistics dump is refused, as statistics against tensor is;
* ``--compat msprobe-1.1`` keeps 1.1.0's behaviour (a hollow pass, exit 0);
* "every row meets the accuracy rules" is never printed next to red or yellow rows;
* the Reason column reaches CSV and Parquet (default mode only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import msq
from msq.cli import main
from msq.errors import NothingComparedError
from tests.dumps import fwd, t, write_dump, write_pair

INF = float("inf")


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def ops(*names: str, **stats: Any) -> dict[str, Any]:
    return {f"Functional.{n}.0.forward": fwd(t(), out=t(**stats)) for n in names}


def api_param(cfg: Path) -> dict[str, str]:
    doc = json.loads(cfg.read_text())
    return {"npu_json_path": doc["npu_path"], "bench_json_path": doc["bench_path"]}


def test_no_matched_row_is_an_error_after_the_outputs(tmp_path: Path) -> None:
    cfg = write_pair(tmp_path, ops("a", "b"), ops("c"))
    code, out, err = cli("compare", str(cfg), "-o", str(tmp_path / "o"), "--no-history")
    assert code == 1
    assert "0 matched" in out and "no suspect: nothing was compared" in out
    assert "every row meets" not in out
    assert "NPU-only: 4 rows (4 the bench lacks the API)" in out
    assert "msq: error: nothing compared: none of the 6 rows has a counterpart" in err
    assert len(list((tmp_path / "o").glob("compare_result_*.xlsx"))) == 1  # says why, row by row


def test_the_api_raises_with_the_results(tmp_path: Path) -> None:
    cfg = write_pair(tmp_path, ops("a"), ops("c"))
    with pytest.raises(NothingComparedError, match="nothing compared") as raised:
        msq.compare(api_param(cfg), tmp_path / "o", record=False)
    (result,) = raised.value.results
    assert (result.rows, result.matched) == (4, 0)
    assert result.files, "the outputs were written"


def test_compat_keeps_the_hollow_pass(tmp_path: Path) -> None:
    cfg = write_pair(tmp_path, ops("a"), ops("c"))
    code, _, err = cli("compare", str(cfg), "-o", str(tmp_path / "o"), "--no-history",
                         "--compat", "msprobe-1.1")
    assert code == 0 and "msq: error" not in err
    result = msq.compare(api_param(cfg), tmp_path / "o2", record=False, compat="msprobe-1.1")
    assert result.matched == 0


def _rank_dirs(root: Path, empty_rank: int) -> Path:
    for side in ("npu", "bench"):
        for rank in (0, 1):
            data = ops("a") if side == "npu" or rank != empty_rank else ops("z")
            write_dump(root / side / "step0" / f"rank{rank}", data)
    cfg = root / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(root / "npu" / "step0"),
                               "bench_path": str(root / "bench" / "step0")}))
    return cfg


def test_a_rank_pair_that_compared_nothing_fails_the_run(tmp_path: Path) -> None:
    cfg = _rank_dirs(tmp_path, empty_rank=1)
    code, _, err = cli("compare", str(cfg), "-o", str(tmp_path / "o"), "--no-history")
    assert code == 1
    assert "msq: error: rank1-rank1: nothing compared" in err
    errors = [line for line in err.splitlines() if line.startswith("msq: error:")]
    assert len(errors) == 1 and "rank0-rank0" not in errors[0]  # the pair that compared is fine
    written = sorted(p.name for p in (tmp_path / "o").glob("compare_result_*.xlsx"))
    assert [n.split("_")[2] for n in written] == ["rank0-rank0", "rank1-rank1"]
    with pytest.raises(NothingComparedError, match="rank1-rank1: nothing compared") as raised:
        msq.compare_distributed(tmp_path / "npu" / "step0", tmp_path / "bench" / "step0",
                                tmp_path / "o2", record=False)
    assert [r.matched for r in raised.value.results] == [2, 0]


def test_md5_against_statistics_is_refused(tmp_path: Path) -> None:
    npu = {"Functional.a.0.forward": fwd(t(md5="0a0b0c0d"), out=t(md5="deadbeef"))}
    cfg = write_pair(tmp_path, npu, ops("a"))
    code, out, err = cli("compare", str(cfg), "-o", str(tmp_path / "o"), "--no-history")
    assert code == 1 and not out
    assert "the summary modes differ" in err and "npu/step0/rank/dump.json: md5" in err
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").iterdir())
    # 1.1.0 decides the mode by the NPU dump alone and compares
    code, out, _ = cli("compare", str(cfg), "-o", str(tmp_path / "c"), "--no-history",
                       "--compat", "msprobe-1.1")
    assert code == 0 and "md5 mode" in out


def test_red_rows_are_never_next_to_every_row_meets(tmp_path: Path) -> None:
    # a shared -inf: msprobe's overflow rule colours it red, its accuracy rule (finite values
    # only) does not flag it; the default mode sees no error at all
    masked = ops("a", mn=-INF, mean=-INF, norm=INF)
    cfg = write_pair(tmp_path, masked, masked)
    code, out, _ = cli("compare", str(cfg), "-o", str(tmp_path / "c"), "--no-history",
                       "--compat", "msprobe-1.1")
    assert code == 0 and ", 1 red, 0 yellow" in out
    assert "every row meets" not in out
    assert "no suspect by msprobe's accuracy rule, but 1 red and 0 yellow rows" in out
    code, out, _ = cli("compare", str(cfg), "-o", str(tmp_path / "d"), "--no-history",
                       "--fail-on", "red")
    assert code == 0 and ", 0 red, 0 yellow" in out
    assert "no suspect: every row meets the accuracy rules" in out


def test_reason_reaches_csv_and_parquet(tmp_path: Path) -> None:
    cfg = write_pair(tmp_path, ops("a", "b", mx=2.0), ops("a", "c"))
    code, out, _ = cli("compare", str(cfg), "-o", str(tmp_path / "d"), "--no-history",
                       "--format", "csv,parquet")
    assert code == 0, out
    (parquet,) = (tmp_path / "d").glob("compare_result_*.parquet")
    table = pq.read_table(parquet).to_pylist()
    reasons = {r["NPU Name"] if r["NPU Name"] != "N/A" else r["Bench Name"]: r["Reason"]
               for r in table}
    assert reasons["Functional.a.0.forward.output.0"].startswith("scale-aware error 0.5 >= 0.1")
    assert reasons["Functional.b.0.forward.output.0"] == "the bench has no Functional.b.forward op"
    assert reasons["Functional.c.0.forward.output.0"] == "the NPU has no Functional.c.forward op"
    (csv_path,) = (tmp_path / "d").glob("compare_result_*.csv")
    header = csv_path.read_text(encoding="utf-8").splitlines()[0]
    assert header.endswith('"Err_message","Reason","Mark","Mark_rules"')
    code, out, _ = cli("compare", str(cfg), "-o", str(tmp_path / "c"), "--no-history",
                       "--format", "csv,parquet", "--compat", "msprobe-1.1")
    (parquet,) = (tmp_path / "c").glob("compare_result_*.parquet")
    assert "Reason" not in pq.read_table(parquet).column_names
