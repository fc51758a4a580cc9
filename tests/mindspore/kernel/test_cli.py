"""The kernel compare through the CLI: a compare.json with rank_id dispatches to it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from msq.cli import main
from tests.mindspore.kernel.test_compare import kbk_dir, read, save


def test_msq_mindspore_compare_with_rank_id(tmp_path: Path) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    save(kbk_dir(tmp_path / "npu"), "Default_Add-op1", 100, a)
    save(kbk_dir(tmp_path / "bench"), "Default_Add-op1", 100, a + 0.5)
    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(tmp_path / "npu"), "bench_path": str(tmp_path / "bench"),
                               "rank_id": [0], "step_id": []}))
    result = CliRunner().invoke(main, ["-f", "mindspore", "compare", "-i", str(cfg),
                                       "-o", str(tmp_path / "out")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    files = sorted((tmp_path / "out").glob("compare_result_0_0_*.xlsx"))
    assert len(files) == 1 and str(files[0]) in result.output
    table = read(files[0])
    assert table[0][:2] == ["NPU Name", "Bench Name"]
    assert len(table) == 2 and table[1][table[0].index("MaxAbsErr")] == 0.5


def test_rank_id_must_be_integers(tmp_path: Path) -> None:
    (tmp_path / "npu").mkdir()
    (tmp_path / "bench").mkdir()
    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(tmp_path / "npu"), "bench_path": str(tmp_path / "bench"),
                               "rank_id": ["0"]}))
    result = CliRunner().invoke(main, ["compare", str(cfg), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and "rank_id" in result.output and "list of integers" in result.output
