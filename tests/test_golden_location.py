"""Golden data is found in one place (tests/conftest.py: $MSQ_GOLDEN, else ../shared/golden), and
a test that needs it skips with the reason outside CI and fails under CI=true."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import ROOT

# a path to the golden cases spelled out ("shared/golden", "shared" / "golden", /work/shared)
_HARD_CODED = re.compile(r"""shared["']?\s*[/,]\s*["']?golden|/work/shared""")
_GOLDEN_TEST = "tests/hostile/test_metadata.py::test_msprobe_layout_without_duplicates_is_not_parsed_twice"


def test_no_test_hard_codes_the_golden_folder() -> None:
    allowed = {ROOT / "tests" / "conftest.py", ROOT / "tests" / "test_golden_location.py"}
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py")
                 if p not in allowed and _HARD_CODED.search(p.read_text(encoding="utf-8"))]
    assert offenders == [], "use tests.conftest.GOLDEN (MSQ_GOLDEN) instead"


def _run_golden_test(ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["MSQ_GOLDEN"] = str(ROOT / "no-such-golden-folder")
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p",
                           "no:cacheprovider", "-q", "-rs", _GOLDEN_TEST],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_missing_golden_data_skips_with_the_reason_outside_ci() -> None:
    proc = _run_golden_test(None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout
    assert "golden data not found at" in proc.stdout and "MSQ_GOLDEN" in proc.stdout


def test_missing_golden_data_fails_under_ci() -> None:
    proc = _run_golden_test("true")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "CI=true needs it" in proc.stdout
