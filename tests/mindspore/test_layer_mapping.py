"""The MindSpore layer mapping (-lm, spec §3.8.2): scope keys, the derived data mapping file, and
the compare through it, on small networks whose MindSpore cell names differ from PyTorch's."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import yaml

from msq import compare
from msq.errors import NothingComparedError
from msq.mindspore.layer_mapping import Scope, layer_pairs, scope_keys, stack_functions
from tests.mindspore.msdump import (
    DumpBuilder,
    api_input,
    arrays,
    compare_json,
    data_mapping_files,
    frame,
    run_cli,
)

MS_LIB = "/usr/lib/python3/site-packages/mindspore/ops/function.py"
PT_LIB = "/usr/lib/python3/site-packages/torch/functional.py"
LAYER_YAML = ("Cell: {network: network}\nNet: {attn: attention}\n"
              "Attention: {qkv_proj: query_key_value, out_proj: dense}\n"
              "layers: {'1': '0', '2': '1'}\n")


def network(tmp: Path, task: str = "statistics") -> tuple[DumpBuilder, DumpBuilder]:
    """Net(attn(qkv_proj, matmul, out_proj), layers[1..2](add), dropout) + a top-level relu on
    MindSpore; Net(attention(query_key_value, matmul, dense), layers[0..1](add)) + relu on PyTorch."""
    a = arrays(6)
    x, y = a["x"], a["y"]
    q, s = x * 2, x @ x.T
    npu = DumpBuilder(tmp / "npu", "mindspore", task)
    bench = DumpBuilder(tmp / "bench", "pytorch", task)
    for d, p, lib, names in ((npu, "Cell", MS_LIB, ("attn", "qkv_proj", "Dense", "out_proj")),
                             (bench, "Module", PT_LIB, ("attention", "query_key_value", "Linear",
                                                       "dense"))):
        ms = p == "Cell"
        attn, qkv, dense_cls, out = names
        api = "Functional" if ms else "Torch"
        net = f"{p}.network.Net.forward.0"
        att = f"{p}.network.{attn}.Attention.forward.0"
        d.op(net, [x], {}, [y], parent=None)
        d.op(att, [x], {}, [q], parent=net)
        d.op(f"{p}.network.{attn}.{qkv}.{dense_cls}.forward.0", [x], {}, [q], parent=att)
        d.op(f"{api}.matmul.0.forward", [q, q.T], {}, [s], parent=att, stack=[
            frame(lib, 5, "matmul", "return _matmul(a, b)"),
            frame("model.py", 20, "scores", "s = ops.matmul(q, k)"),
            frame("model.py", 30, "construct" if ms else "forward", "s = self.scores(q)"),
            frame("model.py", 40, "construct" if ms else "forward", f"h = self.{attn}(x)")])
        d.op(f"{p}.network.{attn}.{out}.{dense_cls}.forward.0", [q], {}, [x], parent=att)
        for i, layer in enumerate((1, 2) if ms else (0, 1)):
            block = f"{p}.network.layers.{layer}.Block.forward.0"
            d.op(block, [x], {}, [x + y], parent=net)
            d.op(f"{api}.add.{i}.forward", [x, y], {}, [x + y], parent=block, stack=[
                frame("model.py", 50, "construct", "h = ops.add(x, y)"),
                frame("model.py", 60, "construct", "x = layer(x)")])
        if ms:
            d.op("Cell.network.dropout.Dropout.forward.0", [x], {}, [x], parent=net)
        d.op("Functional.relu.0.forward", [x], {}, [np.maximum(x, 0)], parent=None)
        d.op(f"{p}.network.{attn}.{qkv}.{dense_cls}.backward.0", [q], {}, [x],
             parent=f"{p}.network.{attn}.Attention.backward.0")
        d.write()
    return npu, bench


@pytest.fixture(scope="module")
def net_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("layer")
    npu, bench = network(tmp)
    (tmp / "layer.yaml").write_text(LAYER_YAML)
    return compare_json(tmp, npu, bench)


# -- pieces -------------------------------------------------------------------------------------
def test_stack_functions_between_the_api_and_its_parent() -> None:
    frames = [frame(MS_LIB, 1, "matmul", "x"), frame("m.py", 2, "scores", "ops.matmul(q, k)"),
              frame("m.py", 3, "helper", "self.scores(q)"), frame("m.py", 4, "construct", "a()"),
              frame("m.py", 5, "construct", "self.attn(x)"), frame("m.py", 6, "run", "attn")]
    assert stack_functions(frames, "matmul", "attn") == ["helper", "scores"]
    assert stack_functions(frames, "softmax", "attn") == []
    # a PyTorch module's forward is skipped like construct (1.1.0 keeps it)
    pt = [frame("m.py", 2, "scores", "torch.matmul(q, k)"), frame("m.py", 3, "forward", "scores()"),
          frame("m.py", 4, "forward", "self.attention(x)")]
    assert stack_functions(pt, "matmul", "attention") == ["scores"]
    assert stack_functions(pt, "matmul", "attention", ("construct", "__call__")) == \
        ["forward", "scores"]
    assert stack_functions(["The call stack retrieval failed."], "matmul", "attn") == []


def test_scope_keys() -> None:
    construct = {
        "Cell.net.Net.forward.0": None,
        "Cell.net.layers.3.Block.forward.0": "Cell.net.Net.forward.0",
        "Functional.add.4.forward": "Cell.net.layers.3.Block.forward.0",
        "Functional.relu.0.forward": None,
        "Tensor.__add__.0.backward": None,
    }
    stack = {k: [frame("m.py", 1, "construct", "add(x)")] for k in construct}
    keys = scope_keys(stack, construct, compat=False)
    assert list(keys) == ["Cell.net.Net.0", "Cell.net.layers.3.Block.0",
                          "Cell.net.layers.add.add.4", "Cell.relu.relu.0",
                          "Cell.__add__.__add__.0"]
    assert keys["Cell.net.layers.add.add.4"] == Scope("Functional.add.4.forward",
                                                      "Cell.net.layers.3.Block.forward.0")
    assert scope_keys({}, construct, compat=False) == {}


def test_layer_pairs_rename_children_through_the_yaml() -> None:
    ms = {"Cell.n.Net.0": Scope("Cell.n.Net.forward.0", None),
          "Cell.n.fc.Dense.0": Scope("Cell.n.fc.Dense.forward.0", "Cell.n.Net.forward.0"),
          "Cell.n.gone.Dense.0": Scope("Cell.n.gone.Dense.forward.0", "Cell.n.Net.forward.0"),
          "Cell.n.add.add.0": Scope("Functional.add.0.forward", "Cell.n.Net.forward.0")}
    pt = {"Module.n.Net.0": Scope("Module.n.Net.forward.0", None),
          "Module.n.linear.Linear.0": Scope("Module.n.linear.Linear.forward.0", "x"),
          "Module.n.add.add.0": Scope("Torch.add.0.forward", "Module.n.Net.forward.0")}
    assert layer_pairs(ms, pt, {"Net": {"fc": "linear"}}) == [
        ("Cell.n.Net.0", "Module.n.Net.0"), ("Cell.n.fc.Dense.0", "Module.n.linear.Linear.0"),
        ("Cell.n.gone.Dense.0", None), ("Functional.add.0", "Torch.add.0")]


# -- end to end ---------------------------------------------------------------------------------
EXPECTED = {
    "Cell.network.Net.forward.0.input.0": "Module.network.Net.forward.0.input.0",
    "Cell.network.attn.qkv_proj.Dense.forward.0.output.0":
        "Module.network.attention.query_key_value.Linear.forward.0.output.0",
    "Functional.matmul.0.forward.input.1": "Torch.matmul.0.forward.input.1",
    "Cell.network.attn.out_proj.Dense.forward.0.input.0":
        "Module.network.attention.dense.Linear.forward.0.input.0",
    "Cell.network.layers.1.Block.forward.0.output.0": "Module.network.layers.0.Block.forward.0.output.0",
    "Cell.network.layers.2.Block.forward.0.input.0": "Module.network.layers.1.Block.forward.0.input.0",
    "Functional.add.1.forward.input.0": "Torch.add.1.forward.input.0",
    "Functional.relu.0.forward.output.0": "Functional.relu.0.forward.output.0",
    "Cell.network.attn.qkv_proj.Dense.backward.0.input.0":
        "Module.network.attention.query_key_value.Linear.backward.0.input.0",
    "Cell.network.dropout.Dropout.forward.0.input.0": None,
}


@pytest.mark.parametrize("compat", [False, True], ids=["default", "compat"])
def test_layer_mapping_end_to_end(net_case: Path, tmp_path: Path, compat: bool) -> None:
    flags = ["--compat", "msprobe-1.1"] if compat else []
    run = run_cli(net_case, tmp_path / "out", "-lm", str(net_case.parent / "layer.yaml"), *flags)
    assert run.exit_code == 0, run.output
    files = data_mapping_files(run.out_dir)
    assert len(files) == 1 and oct(files[0].stat().st_mode & 0o777) == "0o640"
    written = yaml.safe_load(files[0].read_text())
    expected = dict(EXPECTED)
    if compat:  # 1.1.0 keeps PyTorch's "forward" frame in the API's scope key: matmul is lost
        expected["Functional.matmul.0.forward.input.1"] = None
    for npu_name, bench_name in expected.items():
        assert written[npu_name] == bench_name, npu_name
    names = list(written)
    # forward pairs in NPU execution order, backward pairs after them
    assert names.index("Cell.network.Net.forward.0.input.0") == 0
    assert names[-1].startswith("Cell.network.attn.qkv_proj.Dense.backward.0")
    pairs = dict(run.pairs())
    for npu_name, bench_name in expected.items():
        if compat and bench_name is None:  # 1.1.0 shows only the mapped rows
            assert npu_name not in pairs
        else:
            assert pairs[npu_name] == (bench_name or "N/A")
    assert run.by_npu()["Functional.add.1.forward.input.0"]["Max diff"] == 0
    # dropout in and out (and matmul's three rows in compat)
    assert f"{5 if compat else 2} NPU row(s) have no PyTorch counterpart" in run.output


def test_layer_mapping_through_the_api(net_case: Path, tmp_path: Path) -> None:
    npu_json = Path(yaml.safe_load(net_case.read_text())["npu_path"])
    bench_json = Path(yaml.safe_load(net_case.read_text())["bench_path"])
    inp = {"npu_json_path": str(npu_json), "bench_json_path": str(bench_json),
           "stack_json_path": str(npu_json.parent / "stack.json")}
    result = compare(inp, tmp_path / "out", framework="mindspore", record=False,
                     layer_mapping=str(net_case.parent / "layer.yaml"))
    assert data_mapping_files(tmp_path / "out")
    assert result.matched == sum(1 for v in yaml.safe_load(
        data_mapping_files(tmp_path / "out")[0].read_text()).values() if v)


def test_layer_mapping_real_data(tmp_path: Path) -> None:
    npu, bench = network(tmp_path, task="tensor")
    (tmp_path / "layer.yaml").write_text(LAYER_YAML)
    run = run_cli(compare_json(tmp_path, npu, bench), tmp_path / "out", "-lm",
                  str(tmp_path / "layer.yaml"), "--workers", "1")
    assert run.exit_code == 0, run.output
    row = run.by_npu()["Cell.network.attn.qkv_proj.Dense.forward.0.output.0"]
    assert (row["Cosine"], row["MaxAbsErr"]) == (1, 0)
    assert row["Data_name"] == "Cell.network.attn.qkv_proj.Dense.forward.0.output.0.npy"
    assert row["Err_message"].endswith("the comparison accuracy may be affected.")


def test_substring_and_kwargs_default_vs_compat(tmp_path: Path) -> None:
    """1.1.0 finds ops by substring (Functional.add finds Functional.addmm) and only top-level
    positional inputs; the default mode uses exact op names and every row, kwargs included."""
    a = arrays(7)
    x, y, w, b = a["x"], a["y"], a["w"], a["b"]
    npu = DumpBuilder(tmp_path / "npu", "mindspore")
    bench = DumpBuilder(tmp_path / "bench", "pytorch")
    npu.op("Cell.net.Net.forward.0", [x], {}, [x], parent=None)
    npu.op("Functional.addmm.0.forward", [b, x, w.T], {}, [x @ w.T + b], parent=None)
    npu.op("Functional.add.0.forward", [x, y], {"alpha": 2.0}, [x + y], parent=None)
    bench.op("Module.net.Net.forward.0", [x], {}, [x], parent=None)
    bench.op("Torch.add.0.forward", [x, y], {"alpha": 2.0}, [x + y], parent=None)
    npu.write()
    bench.write()
    (tmp_path / "layer.yaml").write_text("Cell: {}\n")
    compare_file = compare_json(tmp_path, npu, bench)
    got = {}
    for mode, flags in (("default", []), ("compat", ["--compat", "msprobe-1.1"])):
        run = run_cli(compare_file, tmp_path / mode, "-lm", str(tmp_path / "layer.yaml"), *flags)
        assert run.exit_code == 0, run.output
        got[mode] = yaml.safe_load(data_mapping_files(run.out_dir)[0].read_text())
    assert got["default"]["Functional.add.0.forward.input.0"] == "Torch.add.0.forward.input.0"
    assert got["default"]["Functional.add.0.forward.input.alpha.0"] == \
        "Torch.add.0.forward.input.alpha.0"
    assert got["default"]["Functional.addmm.0.forward.input.0"] is None
    # 1.1.0: the add pair also collects addmm (listed first), so add's rows end up unpaired
    assert got["compat"]["Functional.add.0.forward.input.0"] is None
    assert "Functional.add.0.forward.input.alpha.0" not in got["compat"]


# -- problems -----------------------------------------------------------------------------------
def test_missing_construct_json_is_an_error(net_case: Path, tmp_path: Path) -> None:
    import shutil

    case = tmp_path / "case"
    shutil.copytree(net_case.parent, case)
    (case / "bench" / "step0" / "rank" / "construct.json").unlink()
    text = net_case.read_text().replace(str(net_case.parent), str(case))
    (case / "compare.json").write_text(text)
    run = run_cli(case / "compare.json", tmp_path / "out", "-lm", str(case / "layer.yaml"))
    assert run.exit_code == 1
    assert "construct.json: not found; -lm needs stack.json and construct.json next to the " \
           "bench (PyTorch) dump.json" in " ".join(run.output.split())


def test_yaml_names_that_do_not_exist_are_warned(net_case: Path, tmp_path: Path) -> None:
    path = tmp_path / "layer.yaml"
    path.write_text(LAYER_YAML + "Transformer: {a: b}\nAttention: {qkv: query_key_value}\n")
    run = run_cli(net_case, tmp_path / "out", "-lm", str(path))
    assert run.exit_code == 0, run.output
    text = " ".join(run.output.split())
    assert "entry 'Transformer': no MindSpore cell or node of that class/name" in text
    assert "entry 'Attention': 'qkv' is not a child of any 'Attention' cell" in text
    # every NPU row is in the workbook; unmapped ones without a bench row
    npu_rows = [r for r in run.rows if r["NPU Name"] != "N/A"]
    assert len(npu_rows) == 27


def test_malformed_yaml_is_an_error(net_case: Path, tmp_path: Path) -> None:
    path = tmp_path / "layer.yaml"
    path.write_text("- Attention\n")
    run = run_cli(net_case, tmp_path / "out", "-lm", str(path))
    assert run.exit_code == 1
    assert "a layer mapping must be a YAML mapping of class name" in run.output


def test_empty_construct_pairs_nothing_but_keeps_rows(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    a = arrays(8)
    npu = DumpBuilder(tmp_path / "npu", "mindspore")
    bench = DumpBuilder(tmp_path / "bench", "pytorch")
    npu.op("Functional.add.0.forward", [a["x"], a["y"]], {}, [a["x"] + a["y"]])
    bench.op("Torch.add.0.forward", [a["x"], a["y"]], {}, [a["x"] + a["y"]])
    npu.construct.clear()
    npu.write()
    bench.write()
    (tmp_path / "layer.yaml").write_text(LAYER_YAML)
    with caplog.at_level(logging.WARNING, logger="msq"), \
            pytest.raises(NothingComparedError) as nothing:  # the default mode: not a pass
        compare(api_input(npu, bench), tmp_path / "out", framework="mindspore",
                record=False, layer_mapping=str(tmp_path / "layer.yaml"))
    result = nothing.value.results[0]
    assert "stack.json or construct.json is empty" in caplog.text
    assert "the layer mapping paired no rows" in caplog.text
    assert (result.rows, result.unmatched_npu) == (3, 3)


def test_pytorch_npu_dump_ignores_lm(tmp_path: Path) -> None:
    a = arrays(9)
    npu = DumpBuilder(tmp_path / "npu", "pytorch")
    bench = DumpBuilder(tmp_path / "bench", "pytorch")
    for d in (npu, bench):
        d.op("Torch.add.0.forward", [a["x"], a["y"]], {}, [a["x"] + a["y"]])
        d.write()
    (tmp_path / "layer.yaml").write_text(LAYER_YAML)
    run = run_cli(compare_json(tmp_path, npu, bench), tmp_path / "out", "-lm",
                  str(tmp_path / "layer.yaml"), framework="pytorch")
    assert run.exit_code == 0, run.output
    assert "-lm is ignored" in run.output
    assert not data_mapping_files(tmp_path / "out")
    assert all(n == b for n, b in run.pairs())


def test_directory_compare_writes_one_mapping_per_rank(tmp_path: Path) -> None:
    """Step directories with two ranks: each rank pair derives its own data mapping file."""
    import json

    a = arrays(10)
    x, y = a["x"], a["y"]
    for rank in ("rank0", "rank1"):
        npu = DumpBuilder(tmp_path / "npu", "mindspore", rank=rank)
        bench = DumpBuilder(tmp_path / "bench", "pytorch", rank=rank)
        npu.op("Cell.net.fc.Dense.forward.0", [x], {}, [x + y], parent=None)
        bench.op("Module.net.linear.Linear.forward.0", [x], {}, [x + y], parent=None)
        npu.write()
        bench.write()
    (tmp_path / "layer.yaml").write_text("Cell: {net: net}\nnet: {fc: linear}\n")
    compare_file = tmp_path / "compare.json"
    compare_file.write_text(json.dumps({"npu_path": str(tmp_path / "npu" / "step0"),
                                        "bench_path": str(tmp_path / "bench" / "step0")}))
    run = run_cli(compare_file, tmp_path / "out", "-lm", str(tmp_path / "layer.yaml"))
    assert run.exit_code == 0, run.output
    files = sorted(p.name for p in data_mapping_files(tmp_path / "out"))
    assert [f.rsplit("_", 1)[0] for f in files] == ["data_mapping_rank0-rank0",
                                                    "data_mapping_rank1-rank1"]
    for path in data_mapping_files(tmp_path / "out"):
        assert yaml.safe_load(path.read_text()) == {
            "Cell.net.fc.Dense.forward.0.input.0": "Module.net.linear.Linear.forward.0.input.0",
            "Cell.net.fc.Dense.forward.0.output.0": "Module.net.linear.Linear.forward.0.output.0"}
