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
