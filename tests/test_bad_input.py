"""Bad input gets one clear line naming the file and the fix, a meaningful exit status, no
traceback and no output file left behind."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from msq.cli import main
from tests.dumps import fwd, t, write_pair

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def good_pair(tmp_path: Path) -> Path:
    data = {"Functional.a.0.forward": fwd(t(), out=t())}
    return write_pair(tmp_path, data, data)


def no_outputs(out: Path) -> bool:
    return not out.exists() or not [p for p in out.iterdir() if not p.name.startswith(".")
                                    or p.suffix == ".tmp"]


def test_missing_compare_json(tmp_path):
    code, out = cli("compare", str(tmp_path / "nope.json"), "-o", str(tmp_path / "o"))
    assert code == 1
    assert "nope.json" in out and "not found" in out
    # the file named on the command line, not one named inside it
    assert out.strip().endswith("compare.json not found; check the path in the command line")


def test_malformed_compare_json_names_line_and_column(tmp_path):
    cfg = tmp_path / "compare.json"
    cfg.write_text('{"npu_path": "a",\n "bench_path": }')
    code, out = cli("compare", str(cfg), "-o", str(tmp_path / "o"))
    assert code == 1
    assert "compare.json" in out and "line 2" in out and "column" in out


@pytest.mark.parametrize("content, expect", [
    ('{"task": "statistics", "data": {"a": 1,', "malformed JSON at line"),
    ("", "is empty"),
    ("[1, 2]", "expected a JSON object"),
    ('{"task": "statistics", "data": []}', "'data' must be an object"),
    ('{"task": "overflow_check", "data": {}}', "not comparable"),
    ('{"task": "weird", "data": {}}', "unknown task"),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
    ('{"task": "statistics", "data": {"Functional.a.0.forward": 3}}', "entry 'Functional.a.0.forward'"),
    (('{"task": "statistics", "data": {"Functional.a.0.forward": {"input_args": [{"type": '
      '"torch.Tensor", "dtype": "torch.float32", "shape": 5}]}}}'), "shape of"),
])
def test_broken_npu_dump(tmp_path, content, expect):
    cfg = good_pair(tmp_path)
    npu = Path(json.loads(cfg.read_text())["npu_path"])
    npu.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = tmp_path / "o"
    code, text = cli("compare", str(cfg), "-o", str(out))
    assert code == 1, text
    assert str(npu) in text and expect in text
    assert len(text.strip().splitlines()) == 1
    assert no_outputs(out)


def test_tasks_differ(tmp_path):
    cfg = good_pair(tmp_path)
    bench = Path(json.loads(cfg.read_text())["bench_path"])
    doc = json.loads(bench.read_text())
    doc["task"] = "tensor"
    bench.write_text(json.dumps(doc))
    code, text = cli("compare", str(cfg), "-o", str(tmp_path / "o"))
    assert code == 1 and "tasks differ" in text


def test_file_and_directory_mixed(tmp_path):
    cfg = good_pair(tmp_path)
    doc = json.loads(cfg.read_text())
    doc["bench_path"] = str(Path(doc["bench_path"]).parent)
    cfg.write_text(json.dumps(doc))
    code, text = cli("compare", str(cfg), "-o", str(tmp_path / "o"))
    assert code == 1 and "both be dump.json files or both directories" in text


def test_non_bool_option_in_compare_json(tmp_path):
    cfg = good_pair(tmp_path)
    doc = json.loads(cfg.read_text())
    doc["is_print_compare_log"] = "yes"
    cfg.write_text(json.dumps(doc))
    code, text = cli("compare", str(cfg), "-o", str(tmp_path / "o"))
    assert code == 1 and "is_print_compare_log" in text and "true or false" in text


def test_non_bool_api_option_is_a_usage_error(tmp_path):
    from msq import compare
    from msq.errors import UsageError

    cfg = json.loads(good_pair(tmp_path).read_text())
    param = {"npu_json_path": cfg["npu_path"], "bench_json_path": cfg["bench_path"]}
    with pytest.raises(UsageError, match="stack_mode must be true or false"):
        compare(param, tmp_path / "o", stack_mode="yes")


def test_mapping_flags_need_mindspore(tmp_path):
    code, text = cli("-f", "pytorch", "compare", str(good_pair(tmp_path)), "-o", str(tmp_path / "o"),
                     "-cm")
    assert code == 2 and "-f mindspore" in text


def test_unknown_format_is_a_usage_error(tmp_path):
    code, text = cli("compare", str(good_pair(tmp_path)), "-o", str(tmp_path / "o"),
                     "--format", "xlsx,pdf")
    assert code == 2 and "pdf" in text and "xlsx, csv, parquet" in text


def test_stack_path_is_optional_and_spaces_in_paths_work(tmp_path):
    root = tmp_path / "with space"
    cfg = good_pair(root)
    doc = json.loads(cfg.read_text())
    del doc["stack_path"]
    cfg.write_text(json.dumps(doc))
    code, text = cli("compare", str(cfg), "-o", str(root / "out dir"), "-s", "--no-history")
    assert code == 0, text
    assert len(list((root / "out dir").glob("compare_result_*.xlsx"))) == 1


def test_output_path_is_a_file(tmp_path):
    blocker = tmp_path / "out"
    blocker.write_text("x")
    code, text = cli("compare", str(good_pair(tmp_path)), "-o", str(blocker))
    assert code == 1 and "not a directory" in text


def test_nothing_to_compare_writes_no_file(tmp_path):
    cfg = write_pair(tmp_path, {}, {})
    code, text = cli("compare", str(cfg), "-o", str(tmp_path / "o"), "--no-history",
                     "--compat", "msprobe-1.1")
    assert code == 0
    assert "nothing to compare" in text
    assert not list((tmp_path / "o").glob("*.xlsx"))


def test_an_empty_side_is_refused_by_default(tmp_path):
    """Nothing compared is not a pass (docs/errors.md): one line naming the empty dump, exit 1."""
    cfg = write_pair(tmp_path, {"Functional.a.0.forward": fwd(t(), out=t())}, {})
    code, text = cli("compare", str(cfg), "-o", str(tmp_path / "o"), "--no-history")
    assert code == 1
    assert "bench/step0/rank/dump.json: holds no ops" in text
    assert not list((tmp_path / "o").glob("*.xlsx"))


def test_real_process_prints_one_line_and_exit_status(tmp_path):
    """Through the installed console script: no traceback, exit 1."""
    proc = subprocess.run([sys.executable, "-m", "msq.cli", "compare", str(tmp_path / "x.json"),
                           "-o", str(tmp_path / "o")], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("msq: error:") and "x.json" in proc.stderr


def test_usage_error_exit_status_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "msq.cli", "compare", "--bogus"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2


def test_public_api_names_are_functions():
    """``msq.compare`` must stay the function even after the pipeline module is imported."""
    import msq
    import msq.pipeline

    assert callable(msq.compare) and callable(msq.compare_distributed)


def test_a_relative_path_that_exists_nowhere_names_both_places_tried(tmp_path, monkeypatch):
    cfg = tmp_path / "cfg" / "compare.json"
    cfg.parent.mkdir()
    cfg.write_text('{"npu_path": "x/dump.json", "bench_path": "y/dump.json"}')
    monkeypatch.chdir(tmp_path)
    code, out = cli("compare", str(cfg), "-o", str(tmp_path / "o"))
    assert code == 1
    assert (f"{cfg}: {tmp_path / 'x' / 'dump.json'} does not exist, nor does "
            f"{tmp_path / 'cfg' / 'x' / 'dump.json'}; check the path") in out


def _root_beside(folder: Path) -> Path:
    """A two-sided dump root (npu/, bench/ with one step and rank) and its compare.json."""
    for side in ("npu", "bench"):
        shutil.copytree(FIXTURES / "ranks" / side, folder / side)
    cfg = folder / "compare.json"
    cfg.write_text('{"npu_path": "npu", "bench_path": "bench"}')
    return cfg


def test_relative_paths_are_all_taken_from_one_folder(tmp_path, monkeypatch):
    # The working directory holds an unrelated "bench" folder (a repository's bench/, say) but no
    # "npu": both paths come from compare.json's folder, not bench from here and npu from there.
    cfg = _root_beside(tmp_path / "root")
    (tmp_path / "bench" / "unrelated").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    code, out = cli("compare", str(cfg), "-o", str(tmp_path / "o"), "-q")
    assert code == 0, out
    rows = duckdb.connect(str(tmp_path / "o" / "msq.duckdb"), read_only=True).execute(
        "SELECT DISTINCT bench_path FROM compares").fetchall()
    assert rows and all(p.startswith(str(tmp_path / "root" / "bench")) for (p,) in rows), rows


def test_relative_paths_split_between_two_folders_are_refused(tmp_path, monkeypatch):
    cfg = _root_beside(tmp_path / "root")
    shutil.rmtree(tmp_path / "root" / "bench")
    shutil.copytree(FIXTURES / "ranks" / "bench", tmp_path / "bench")
    monkeypatch.chdir(tmp_path)
    code, out = cli("compare", str(cfg), "-o", str(tmp_path / "o"))
    assert code == 1
    assert (f"{cfg}: {tmp_path / 'npu'} does not exist (compare.json's folder has "
            f"{tmp_path / 'root' / 'npu'}, but not every relative path") in out
    assert not (tmp_path / "o" / "msq.duckdb").exists()
