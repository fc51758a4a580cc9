"""Each difference between the default mode and --compat msprobe-1.1 (docs/compat.md), both ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from msq.cli import main
from msq.errors import NothingComparedError
from tests.dumps import bwd, fwd, t, write_dump, write_pair
from tests.xlsx_read import only_xlsx, rows


def run(cfg: Path, out: Path, *flags: str) -> list[dict]:
    result = CliRunner().invoke(main, ["compare", str(cfg), "-o", str(out), "--no-history", *flags],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return rows(only_xlsx(out))


def names(table: list[dict], col: str = "NPU Name") -> list[str]:
    return [r[col] for r in table]


def ops(*names_: str) -> dict:
    return {f"Functional.{n}.0.forward": fwd(t(), out=t()) for n in names_}


def test_truncation_when_bench_runs_out(tmp_path):
    cfg = write_pair(tmp_path, ops("a", "b", "c", "d", "e"), ops("a", "b"))
    compat = run(cfg, tmp_path / "c", "--compat", "msprobe-1.1")
    default = run(cfg, tmp_path / "d")
    # 1.1.0 stops reading once the bench side is exhausted: d and e never appear
    assert {n.split(".")[1] for n in names(compat)} == {"a", "b", "c"}
    assert {n.split(".")[1] for n in names(default)} == {"a", "b", "c", "d", "e"}
    assert [r["Result"] for r in default if ".d." in r["NPU Name"]] == ["N/A", "N/A"]


def test_bench_only_ops_are_listed_by_default(tmp_path):
    cfg = write_pair(tmp_path, ops("a", "c"), ops("a", "b", "c"))
    compat = run(cfg, tmp_path / "c", "--compat", "msprobe-1.1")
    default = run(cfg, tmp_path / "d")
    assert "N/A" not in names(compat)
    bench_only = [r for r in default if r["NPU Name"] == "N/A"]
    assert [r["Bench Name"] for r in bench_only] == ["Functional.b.0.forward.input.0",
                                                    "Functional.b.0.forward.output.0"]
    assert {r["Err_message"] for r in bench_only} == {
        "No NPU data matched: the NPU has no Functional.b.forward op."}
    # placed where the bench side has them: after a, before c
    assert names(default, "Bench Name")[2:4] == [r["Bench Name"] for r in bench_only]


def test_module_path_containing_forward(tmp_path):
    """compat.md #4: 1.1.0 takes forward/backward from substrings, so a backward op of a module
    path holding "forward" (feedforward) also runs the forward branch: an entry without inputs
    gets its outputs twice. The default mode reads the name's direction field."""
    back = "Module.feedforward.FFN.backward.0"
    data = {back: {"output": [t()]}}
    cfg = write_pair(tmp_path, data, data, level="L0")
    assert names(run(cfg, tmp_path / "d")) == [f"{back}.output.0"]
    assert names(run(cfg, tmp_path / "c", "--compat", "msprobe-1.1")) == [f"{back}.output.0"] * 2
    # a forward op is read once in both modes, whatever its path holds
    fwd_name = "Module.feedforward.FFN.forward.0"
    data = {fwd_name: fwd(t(), out=t())}
    cfg = write_pair(tmp_path / "f", data, data, level="L0")
    for flags in ((), ("--compat", "msprobe-1.1")):
        assert names(run(cfg, tmp_path / f"f{len(flags)}", *flags)) == [
            f"{fwd_name}.input.0", f"{fwd_name}.output.0"]


def test_module_named_input(tmp_path):
    """compat.md #5: 1.1.0 takes a row's input/output from a name element ``input``, so every row
    of a module named ``input`` is an input: its output is never weighed against its input, and
    a red output goes unmarked. The default mode takes it from the dump key the row came from."""
    op = "Module.input.Linear.forward.0"
    npu = {op: fwd(t(mx=1.0), out=t(mx=3.0))}
    bench = {op: fwd(t(mx=1.0), out=t(mx=1.0))}
    cfg = write_pair(tmp_path, npu, bench, level="L0")
    default = run(cfg, tmp_path / "d")
    compat = run(cfg, tmp_path / "c", "--compat", "msprobe-1.1")
    assert names(default) == names(compat) == [f"{op}.input.0", f"{op}.output.0"]
    assert [r["_fill"] for r in default] == [None, "red"]
    assert [r["_fill"] for r in compat] == [None, None]


def test_float_tolerance_without_outputs(tmp_path):
    npu = {"Functional.f.0.backward": bwd([t(dtype="torch.float16")], [])}
    bench = {"Functional.f.0.backward": bwd([t(dtype="torch.float32")], [])}
    cfg = write_pair(tmp_path, npu, bench)
    compat = run(cfg, tmp_path / "c", "--compat", "msprobe-1.1")
    default = run(cfg, tmp_path / "d")
    assert compat[0]["Bench Name"] == "N/A"      # 1.1.0: empty output zip means "no match"
    assert default[0]["Bench Name"] == "Functional.f.0.backward.input.0"


def test_highlight_windows_per_op(tmp_path):
    # spec §5.5.1: an output-only op shifts 1.1.0's windows so s8's red output is missed
    ok = {"mx": 1.0, "mn": -1.0, "mean": 0.0, "norm": 2.0}
    npu = {
        "Functional.s7.0.forward": fwd(t(**ok), out=t(**ok)),
        "Functional.o1.0.forward": {"output": [t(**ok)]},
        "Functional.s8.0.forward": fwd(t(**ok), out=t(mx=5.0, mn=-1.0, mean=0.0, norm=2.0)),
    }
    bench = {
        "Functional.s7.0.forward": fwd(t(**ok), out=t(**ok)),
        "Functional.o1.0.forward": {"output": [t(**ok)]},
        "Functional.s8.0.forward": fwd(t(**ok), out=t(**ok)),
    }
    cfg = write_pair(tmp_path, npu, bench)
    compat = run(cfg, tmp_path / "c", "--compat", "msprobe-1.1")
    default = run(cfg, tmp_path / "d")
    s8_out = "Functional.s8.0.forward.output.0"
    assert [r["_fill"] for r in compat if r["NPU Name"] == s8_out] == [None]
    assert [r["_fill"] for r in default if r["NPU Name"] == s8_out] == ["red"]


def test_data_mapping_lists_unmapped_rows_and_checks_bench_names(tmp_path, caplog):
    cfg = write_pair(tmp_path, ops("a", "b"), ops("x", "b"))
    mapping = tmp_path / "map.yaml"
    mapping.write_text("Functional.a.0.forward.output.0: Functional.x.0.forward.output.0\n"
                       "Functional.b.0.forward.output.0: Functional.nope.0.forward.output.0\n")
    compat = run(cfg, tmp_path / "c", "--compat", "msprobe-1.1", "-dm", str(mapping))
    default = run(cfg, tmp_path / "d", "-dm", str(mapping))
    assert names(compat) == ["Functional.a.0.forward.output.0"]
    assert names(default)[0] == "Functional.a.0.forward.output.0"
    assert sorted(names(default)[1:]) == sorted([
        "Functional.a.0.forward.input.0", "Functional.b.0.forward.input.0",
        "Functional.b.0.forward.output.0"])
    assert all(r["Bench Name"] == "N/A" for r in default[1:])


def test_data_mapping_warning_names_the_missing_bench_name(tmp_path):
    from msq.pipeline import compare

    cfg = write_pair(tmp_path, ops("a"), ops("a"))
    doc = json.loads(cfg.read_text())
    param = {"npu_json_path": doc["npu_path"], "bench_json_path": doc["bench_path"],
             "stack_json_path": doc["stack_path"]}
    import logging

    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda rec: records.append(rec.getMessage())  # type: ignore[method-assign]
    logging.getLogger("msq").addHandler(handler)
    try:
        # the only mapped name is missing: nothing is compared, which is not a pass
        with pytest.raises(NothingComparedError, match="the -dm mapping gives"):
            compare(param, tmp_path / "o", data_mapping={
                "Functional.a.0.forward.output.0": "Functional.zz.0.forward.output.0"},
                record=False)
    finally:
        logging.getLogger("msq").removeHandler(handler)
    assert any("Can not find bench op name : `Functional.zz.0.forward.output.0`" in r
               for r in records)


@pytest.mark.parametrize("compat", [False, True])
def test_rank10_and_above(tmp_path, compat):
    for side in ("npu", "bench"):
        for rank in (0, 1, 10):
            write_dump(tmp_path / side / "step0" / f"rank{rank}", ops("a"))
    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(tmp_path / "npu" / "step0"),
                               "bench_path": str(tmp_path / "bench" / "step0")}))
    flags = ["--compat", "msprobe-1.1"] if compat else []
    result = CliRunner().invoke(main, ["compare", str(cfg), "-o", str(tmp_path / "o"),
                                       "--no-history", *flags])
    if compat:
        assert result.exit_code == 1
        assert "rank10" in result.output
        assert not list((tmp_path / "o").glob("*.xlsx"))
    else:
        assert result.exit_code == 0, result.output
        made = sorted(p.name.split("_")[2] for p in (tmp_path / "o").glob("*.xlsx"))
        assert made == ["rank0-rank0", "rank1-rank1", "rank10-rank10"]
