"""The library stays light: importing msq loads neither click nor torch (style practice 8/9)."""

from __future__ import annotations

import subprocess
import sys


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
