"""The library stays light: importing msq loads neither click nor torch (style practice 8/9)."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest


def test_import_msq_loads_no_cli_and_no_torch():
    code = ("import sys, msq, msq.pipeline, msq.tensors.pool; "
            "print(sorted(m for m in ('click', 'torch', 'msq.cli') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_local_directory_compare_never_imports_ray(tmp_path):
    """--engine local (the default) costs nothing when Ray is installed, or missing."""
    from tests.test_distributed import ranks

    ranks(tmp_path, 2)
    code = ("import sys, msq; "
            f"msq.compare_distributed({str(tmp_path / 'npu' / 'step0')!r}, "
            f"{str(tmp_path / 'bench' / 'step0')!r}, {str(tmp_path / 'out')!r}); "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                         timeout=120, cwd=tmp_path.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert len(list((tmp_path / "out").glob("compare_result_*.xlsx"))) == 2


def test_a_statistics_compare_loads_only_what_it_uses(tmp_path):
    """Start-up is most of a small compare (issue 15 #4): a PyTorch statistics compare without
    mapping files loads no yaml, none of the MindSpore mapping code, no pandas or openpyxl
    (msq writes the workbook itself) and not pyarrow.compute (the C row renderer needs none;
    the SQL one, where the C parts are not built, does)."""
    from msq.export.xlsx import renderer
    from tests.dumps import fwd, t, write_pair

    data = {f"Functional.relu.{i}.forward": fwd(t([4])) for i in range(20)}
    cfg = write_pair(tmp_path, data, data)
    unwanted = ("yaml", "msq.mindspore.layer_mapping", "msq.mindspore.name_mapping", "pandas",
                "openpyxl", "torch", *(("pyarrow.compute",) if renderer() == "C" else ()))
    code = ("import sys; from msq.cli import main\n"
            "try:\n"
            f"    main(['compare', {str(cfg)!r}, '-o', {str(tmp_path / 'out')!r}, '-q'])\n"
            "except SystemExit as exit:\n"
            "    assert not exit.code, exit.code\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {unwanted!r} "
            f"or m in {unwanted!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert len(list((tmp_path / "out").glob("compare_result_*.xlsx"))) == 1


@pytest.mark.parametrize("compat", [False, True], ids=["default", "compat"])
def test_a_statistics_compare_imports_neither_pyarrow_nor_numpy(tmp_path, compat):
    """Issue 15 #4: pyarrow and numpy cost ~0.25 s of a small compare's start-up. A PyTorch
    statistics compare (whole CLI: blame with construct.json's nesting, workbook, advisor,
    history) imports neither where the C parts are built: the C reader's columns reach DuckDB
    as an Arrow C stream (msq.flatten.Columns), the workbook's rows come back as one
    (msq.flatten.arrow_columns). Nor multiprocessing (~13 ms): it starts no process pool.
    Under --compat too: its highlight windows and op pairs are inserted without pyarrow."""
    import json

    from msq.export.xlsx import renderer
    from msq.flatten import C_PADDING
    from tests.dumps import fwd, t, write_pair

    if C_PADDING is None or renderer() != "C":
        pytest.skip("the C parts are not built: the Python reader and SQL renderer use pyarrow")
    data = {f"Functional.relu.{i}.forward": fwd(t([4], mx=float(i))) for i in range(20)}
    cfg = write_pair(tmp_path, data, dict(data, **{"Functional.relu.3.forward": fwd(t([4], mx=9.0))}))
    for side in ("npu", "bench"):
        (tmp_path / side / "step0" / "rank" / "construct.json").write_text(json.dumps(
            {**{name: "Module.block.Block.forward.0" for name in data},
             "Module.block.Block.forward.0": None}))
    out_dir = tmp_path / "out"
    flags = ["--compat", "msprobe-1.1"] if compat else []
    code = ("import sys; from msq.cli import main\n"
            "try:\n"
            f"    main(['compare', {str(cfg)!r}, '-o', {str(out_dir)!r}, '-q', *{flags!r}])\n"
            "except SystemExit as exit:\n"
            "    assert not exit.code, exit.code\n"
            "print(sorted(m for m in ('pyarrow', 'numpy', 'multiprocessing', "
            "'concurrent.futures.process') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert len(list(out_dir.glob("compare_result_*.xlsx"))) == 1
    assert len(list(out_dir.glob("advisor_*.txt"))) == 1
    history = duckdb.connect(str(out_dir / "msq.duckdb"), read_only=True)
    assert history.execute("SELECT count(*) FROM result_rows").fetchall() == [(40,)]
    assert history.execute("SELECT count(*) FROM blame_rows").fetchall()[0][0] == (0 if compat else 40)
