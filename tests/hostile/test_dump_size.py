"""Huge statistics dumps (issue 17 #8): a compare holds its rows in memory, ~16x the bytes of its
two dump.json at the peak for the densest dumps (1e6 tiny ops, 203 MB a side, peaked at 4 GB a
process). msq refuses a pair above MSQ_MAX_DUMP_BYTES (default 80 MiB together) on the files'
sizes, before reading either, with one line that names the limit and the knob.

The dumps are generated small (many tiny ops, as the probe's) and the limit set just below or at
their size; the default limit is checked with a sparse file, which costs no disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from msq.jsonio import MAX_DUMP_BYTES
from tests.dumps import fwd, t, write_pair
from tests.hostile.helpers import compare, error_line, good_pair, outputs, sides


def tiny_ops(root: Path, n: int) -> Path:
    """n one-tensor ops a side, as in the probe's 1e6-op dump (here a few thousand)."""
    data = {f"Functional.relu.{i}.forward": fwd(t([4]), out=None) for i in range(n)}
    return write_pair(root, data, data)


def total(cfg: Path) -> int:
    return sum(p.stat().st_size for p in sides(cfg))


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def refusal(cfg: Path, size: int, limit: int) -> str:
    npu, bench = sides(cfg)
    return (f"msq: error: {npu} and {bench}: the two dump.json hold {mib(size)} together, above "
            f"msq's {mib(limit)} limit for one compare (its memory peaks at ~16x that); dump fewer "
            "steps/ranks per file, or raise MSQ_MAX_DUMP_BYTES if memory allows")


def test_a_pair_above_the_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    cfg = tiny_ops(tmp_path, 2000)
    size = total(cfg)
    code, text = compare(cfg, tmp_path / "out", env={"MSQ_MAX_DUMP_BYTES": str(size - 1)})
    assert code == 1 and outputs(tmp_path / "out") == []
    assert error_line(text) == refusal(cfg, size, size - 1)


def test_a_pair_at_the_limit_compares(tmp_path: Path) -> None:
    cfg = tiny_ops(tmp_path, 2000)
    code, text = compare(cfg, tmp_path / "out", env={"MSQ_MAX_DUMP_BYTES": str(total(cfg))})
    assert code == 0, text
    assert "4000 rows (4000 matched" in text


@pytest.mark.parametrize("side", [0, 1])
def test_the_default_limit_counts_both_sides_before_reading(tmp_path: Path, side: int) -> None:
    """One side grown (sparse, all zeros) so that the two just pass 80 MiB: refused on the sizes;
    had msq read the zeros, it would have said the file is not JSON."""
    cfg = good_pair(tmp_path)
    grown = sides(cfg)[side]
    other = sides(cfg)[1 - side].stat().st_size
    with open(grown, "r+b") as handle:
        handle.truncate(MAX_DUMP_BYTES - other + 1)
    code, text = compare(cfg, tmp_path / "out", env={"MSQ_MAX_DUMP_BYTES": ""})
    assert code == 1 and outputs(tmp_path / "out") == []
    assert error_line(text) == refusal(cfg, MAX_DUMP_BYTES + 1, MAX_DUMP_BYTES)
    assert MAX_DUMP_BYTES == 80 << 20  # the figure docs/errors.md gives


@pytest.mark.parametrize("value", ["80MB", "-5", "0"])
def test_bad_limit_setting_is_a_usage_error(tmp_path: Path, value: str) -> None:
    code, text = compare(good_pair(tmp_path), tmp_path / "out", env={"MSQ_MAX_DUMP_BYTES": value})
    assert code == 2
    assert error_line(text) == ("msq: error: MSQ_MAX_DUMP_BYTES must be a positive number of "
                                f"bytes, got {value!r}")
