"""Framework detection from the dump itself (msq/mindspore/detect.py)."""

from __future__ import annotations

from pathlib import Path

from msq.mindspore.detect import looks_like_mindspore
from tests.mindspore.msdump import compare_json, cross_framework_pair, run_cli


def test_looks_like_mindspore() -> None:
    ms_op = {"input_args": [{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [1]}]}
    pt_op = {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1]}]}
    assert looks_like_mindspore({"data": {"Cell.a.Dense.forward.0": pt_op}})
    assert looks_like_mindspore({"data": {"Functional.add.0.forward": ms_op}})
    assert not looks_like_mindspore({"data": {"Functional.add.0.forward": pt_op}})
    assert not looks_like_mindspore({"data": {}})


def test_framework_detected_without_f(tmp_path: Path) -> None:
    """No -f: the MindSpore dump is recognised, so -am applies (it would be refused with -f pytorch)."""
    npu, bench = cross_framework_pair(tmp_path)
    compare = compare_json(tmp_path, npu, bench)
    run = run_cli(compare, tmp_path / "out", "-am", framework=None)
    assert run.exit_code == 0, run.output
    assert ("Mint.abs.0.forward.input.0", "Torch.abs.0.forward.input.0") in run.pairs()
    refused = run_cli(compare, tmp_path / "out2", "-am", framework="pytorch")
    assert refused.exit_code == 2
    assert "-f mindspore" in refused.output
