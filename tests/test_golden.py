"""msq --compat msprobe-1.1 reproduces msprobe 1.1.0's own outputs on every golden case.

Each golden flag set (tests/conftest.py: GOLDEN) is run through the msq CLI (cwd = the case
folder, as msprobe was run); every workbook must equal msprobe's cell by cell (value, cell type,
fill) and every advisor file byte for byte.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from msq.cli import main
from tests.conftest import GOLDEN, golden_params
from tests.golden_util import FlagSet, all_flag_sets, diff_sheets, outputs_by_name

FLAG_SETS = all_flag_sets() if GOLDEN.is_dir() else []


def run_flag_set(fs: FlagSet, tmp_path, monkeypatch):
    monkeypatch.chdir(fs.case_dir)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, fs.argv(out), catch_exceptions=False)
    return result, out


@pytest.mark.parametrize("fs", golden_params(FLAG_SETS, ids=str))
def test_golden_flag_set(fs: FlagSet, tmp_path, monkeypatch):
    result, out = run_flag_set(fs, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    want_xlsx = outputs_by_name(fs.expected, ".xlsx")
    got_xlsx = outputs_by_name(out, ".xlsx")
    assert sorted(got_xlsx) == sorted(want_xlsx)
    for name, want in want_xlsx.items():
        problems = diff_sheets(got_xlsx[name], want)
        assert not problems, f"{name}:\n" + "\n".join(problems)
    want_adv = outputs_by_name(fs.expected, ".txt")
    want_adv.pop("cmd.txt", None)
    want_adv.pop("log.txt", None)
    got_adv = outputs_by_name(out, ".txt")
    assert sorted(got_adv) == sorted(want_adv)
    for name, want in want_adv.items():
        assert got_adv[name].read_bytes() == want.read_bytes(), name


@pytest.mark.golden
def test_every_golden_case_is_there():
    """A golden folder that is there must be complete (a missing one skips or, under CI, fails
    through the ``golden`` marker: tests/conftest.py)."""
    assert len(FLAG_SETS) >= 100
