"""MindSpore layer mapping (``-lm FILE.yaml``, spec §3.8.2): derive a data mapping, then use it.

The layer YAML renames children per class, e.g. ``Attention: {qkv_proj: query_key_value}``.
From each side's construct.json (parent of every op) and stack.json (call stacks) every cell/module
and every API call gets a *scope key* such as ``Cell.network.attn.qkv_proj.Dense.0`` or
``Cell.network.attn.attention_scores.matmul.matmul.0``. The MindSpore keys go into a trie; walking
it while renaming children through the YAML gives the PyTorch key each MindSpore op should have, and
so op pairs (``Cell.network.attn.qkv_proj.Dense.0`` <-> ``Module.network.attention.query_key_value.Linear.0``).
Their rows, paired positionally within inputs and within outputs, are the data mapping: it is
written to ``<output>/data_mapping_{YYYYmmddHHMMSS}.yaml`` and then compared like ``-dm``
(in compat mode from the entries' argument counts in the loaded ``ops`` table).

Default mode: ops are found by their exact names and every row counts (keyword arguments and
nested arguments included, under their displayed names). ``--compat msprobe-1.1`` reproduces
1.1.0: ops found by substring (``Functional.add`` also finds ``Functional.addmm``), only the
top-level positional inputs named ``<op>.input.<i>``.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import yaml

from msq.config import Options, SingleInput
from msq.db import new_file
from msq.errors import DumpError, InputError
from msq.jsonio import read_construct, read_json
from msq.mappings import read_yaml

log = logging.getLogger("msq")

SKIP_FILES = ("site-packages/mindspore", "package/mindspore", "msprobe", "site-packages/torch",
              "package/torch")
SKIP_FUNCS = ("construct", "__call__")
# PyTorch's forward is MindSpore's construct; 1.1.0 skips only the latter, so an API inside a
# PyTorch module gets an extra ".forward" in its scope key and never pairs (fixed by default)
SKIP_FUNCS_DEFAULT = SKIP_FUNCS + ("forward",)
MAX_DEPTH = 100
EXAMPLE = "ParallelAttention: {qkv_proj: query_key_value, out_proj: dense}"
_DIRECTION_SUFFIX = re.compile(r"\.(forward|backward)$")


@dataclass
class Scope:
    """One op of construct.json with its scope key's origin (the dump.json op name)."""

    origin: str
    parent: str | None


@dataclass
class Node:
    """A trie node: one dot field of the MindSpore scope keys."""

    type_name: str | None = None
    counts: list[str] = field(default_factory=list)
    children: dict[str, Node] = field(default_factory=dict)
    has_data: bool = False
    node_type: str | None = None


# -- reading ------------------------------------------------------------------------------------
def read_structure(dump_json: Path, side: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """stack.json and construct.json next to a dump.json (-lm needs both)."""
    folder = dump_json.parent
    found = []
    for name in ("stack.json", "construct.json"):
        if not (folder / name).is_file():
            raise InputError(f"{folder / name}: not found; -lm needs stack.json and construct.json "
                             f"next to the {side} dump.json (dump with level L0 or mix)")
        found.append(folder / name)
    stack = read_json(found[0], "stack.json")
    if not isinstance(stack, dict):
        raise DumpError(f"{found[0]}: expected an object of op name -> list of frames")
    return stack, read_construct(found[1])


def read_layer_yaml(path: Path, compat: bool) -> dict[str, dict[str, str]]:
    """The layer YAML: class (or node) name -> {MindSpore child name: PyTorch child name}."""
    doc = read_yaml(path, "layer mapping YAML")
    if doc is None:
        log.warning("%s: the layer mapping YAML is empty; cells are paired only where their names "
                    "already agree", path)
        return {}
    if not isinstance(doc, dict):
        raise DumpError(f"{path}: a layer mapping must be a YAML mapping of class name -> "
                        f"{{MindSpore child: PyTorch child}}, e.g. '{EXAMPLE}'; found a "
                        f"{type(doc).__name__}")
    out: dict[str, dict[str, str]] = {}
    for key, value in doc.items():
        if not isinstance(value, dict):
            raise DumpError(f"{path}: entry '{key}': expected a mapping of MindSpore child name -> "
                            f"PyTorch child name, e.g. '{EXAMPLE}'; found {value!r}")
        # an unquoted layer number (5: 0) is an int in YAML; 1.1.0 would then never find it
        out[key if compat else str(key)] = value if compat else {
            str(k): str(v) for k, v in value.items()}
    return out


# -- scope keys (spec §3.8.2 step 1) ------------------------------------------------------------
def stack_functions(frames: list[Any], func_name: str, parent_name: str,
                    skip_funcs: tuple[str, ...] = SKIP_FUNCS_DEFAULT) -> list[str]:
    """Function names of the frames between the API call and its parent cell, outermost first."""
    start = end = -1
    for idx, line in enumerate(frames):
        text = str(line)
        if func_name in text:
            start = idx
        elif parent_name in text:
            end = idx
            break
    names = []
    for line in frames[start:end]:
        parts = str(line).split(",")
        if len(parts) < 3 or any(s in parts[0] for s in SKIP_FILES):
            continue
        words = parts[2].split()
        if len(words) < 2 or any(s in parts[2] for s in skip_funcs):
            continue
        names.append(words[1])
    return names[::-1]


def _strip_direction(key: str, compat: bool) -> str:
    if compat:  # 1.1.0 strips *characters* of ".forward"/".backward" from both ends
        return key.strip(".forward").strip(".backward")  # noqa: B005, PLE1310 (1.1.0's bug)
    return _DIRECTION_SUFFIX.sub("", key)


def _api_key(key: str, parent: str | None, frames: Any, is_ms: bool, compat: bool) -> str | None:
    """Scope key of an API op (None when 1.1.0 skips it)."""
    parts = key.split(".")
    if not parent:
        parts[0] = "Cell" if is_ms else "Module"
        if len(parts) >= 3 and not parts[-3].isdigit():
            parts = parts[:-2] + parts[-3:]  # the API name doubles as its type: add.add
        return ".".join(parts).replace(".forward", "").replace(".backward", "")
    parent_parts = parent.split(".")
    if len(parent_parts) < 4 or len(parts) < 3:
        return None
    idx = -4 if not parent_parts[-4].isdigit() else -5
    funcs: list[str] = []
    if frames and isinstance(frames, list):
        parent_name = parent_parts[idx]
        funcs = stack_functions(frames, parts[-3], parent_name.removesuffix("s"),
                                SKIP_FUNCS if compat else SKIP_FUNCS_DEFAULT)
    joined = ".".join(parent_parts[: len(parent_parts) + idx + 1] + funcs + parts[1:-2] + parts[-3:])
    return _strip_direction(joined, compat)


def scope_keys(stack: dict[str, Any], construct: dict[str, Any], compat: bool) -> dict[str, Scope]:
    """Scope key -> op, for every op of construct.json (later ops overwrite, as in a dict)."""
    if not stack or not construct:
        return {}
    is_ms = any("Cell" in key for key in construct)
    out: dict[str, Scope] = {}
    for key, parent in construct.items():
        parent = parent if isinstance(parent, str) else None
        if key.startswith(("Module", "Cell")):
            parts = key.split(".")
            scope_key: str | None = ".".join(parts[:-2] + [parts[-1]])
        else:
            scope_key = _api_key(key, parent, stack.get(key), is_ms, compat)
        if scope_key is not None:
            out[scope_key] = Scope(key, parent)
    return out


# -- the trie walk (steps 2-3) ------------------------------------------------------------------
def build_trie(scopes: dict[str, Scope]) -> Node:
    root = Node(type_name="Cell")
    for key, scope in scopes.items():
        parts = key.split(".")
        if len(parts) < 2:
            log.warning("layer mapping: scope key '%s' (op %s) is too short; skipped", key,
                        scope.origin)
            continue
        node = root
        for name in parts[:-2]:
            node = node.children.setdefault(name, Node())
            if node.type_name is None:
                node.type_name = name
        node.type_name = parts[-2]
        node.has_data = True
        node.counts.append(parts[-1])
        node.node_type = scope.origin.split(".")[0]
    return root


def walk(node: Node, mapping: dict[str, dict[str, str]], path: str = "", mapped: str = "",
         depth: int = 0) -> Iterator[tuple[str, str]]:
    """(MindSpore name, renamed name) for every node with data, depth first."""
    if depth > MAX_DEPTH:
        raise DumpError(f"layer mapping: the cell tree is deeper than {MAX_DEPTH} levels; "
                        "check construct.json")
    if node.has_data:
        for count in node.counts:
            suffix = f".{count}" if node.node_type == "Cell" else f".{node.type_name}.{count}"
            yield path + suffix, mapped + suffix
    renames = mapping.get(node.type_name or "", {})
    for child, child_node in node.children.items():
        new = renames.get(child, child)
        yield from walk(child_node, mapping, f"{path}.{child}" if path else child,
                        f"{mapped}.{new}" if mapped else new, depth + 1)


def _prefix_to_key(scopes: dict[str, Scope]) -> dict[str, str]:
    """Cell/module scope key without its class (``Cell.a.b.0``) -> the full key."""
    out = {}
    for key, scope in scopes.items():
        if scope.origin.startswith(("Cell", "Module")):
            parts = key.split(".")
            out[".".join(parts[:-2] + [parts[-1]])] = key
    return out


def layer_pairs(ms_scopes: dict[str, Scope], pt_scopes: dict[str, Scope],
                mapping: dict[str, dict[str, str]]) -> list[tuple[str, str | None]]:
    """(MindSpore op, PyTorch op or None) without direction: ``Cell.a.Dense.0``, ``Functional.add.0``."""
    renamed = dict(walk(build_trie(ms_scopes), mapping))
    ms_prefix, pt_prefix = _prefix_to_key(ms_scopes), _prefix_to_key(pt_scopes)
    pairs: list[tuple[str, str | None]] = []
    for ms_name, pt_name in renamed.items():
        pt_name = re.sub(r"^Cell", "Module", pt_name)
        if ms_name in ms_prefix:
            pairs.append((ms_prefix[ms_name], pt_prefix.get(pt_name)))
        elif ms_name in ms_scopes:
            pt_scope = pt_scopes.get(pt_name)
            pairs.append((ms_scopes[ms_name].origin.rsplit(".", 1)[0],
                          pt_scope.origin.rsplit(".", 1)[0] if pt_scope else None))
    return pairs


def warn_unused_yaml(path: Path, mapping: dict[str, dict[str, str]], root: Node) -> None:
    """Warn about YAML classes and children the MindSpore cell tree does not have."""
    children_by_type: dict[str, set[str]] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        children_by_type.setdefault(node.type_name or "", set()).update(node.children)
        stack.extend(node.children.values())
    for type_name, renames in mapping.items():
        if type_name not in children_by_type:
            log.warning("%s: entry '%s': no MindSpore cell or node of that class/name in the NPU "
                        "dump's construct.json; the entry is unused", path, type_name)
            continue
        for child in renames:
            if child not in children_by_type[type_name]:
                log.warning("%s: entry '%s': '%s' is not a child of any '%s' cell in the NPU dump; "
                            "it is unused", path, type_name, child, type_name)


# -- rows (step 4) ------------------------------------------------------------------------------
def _seq_key(op_name: str) -> str:
    """``Cell.a.Dense.forward.0`` / ``Functional.add.0.forward`` -> ``Cell.a.Dense.0`` / ``Functional.add.0``."""
    parts = op_name.split(".")
    index = parts[-2] if parts[-1] in ("forward", "backward") else parts[-1]
    return ".".join(parts[:-2] + [index])


def _sorted(pairs: list[tuple[str, str | None]], npu_ops: list[str], bench_ops: list[str],
            flag: str) -> list[tuple[str, str | None]]:
    big = 1 << 62
    npu_seq = {_seq_key(k): i for i, k in enumerate(npu_ops) if flag in k}
    bench_seq = {_seq_key(k): i for i, k in enumerate(bench_ops) if flag in k}
    return sorted(pairs, key=lambda p: (npu_seq.get(p[0], big),
                                        bench_seq.get(p[1], big) if p[1] else big))


class OpArgs(NamedTuple):
    """One dump.json entry as 1.1.0's -lm counts it: its name and the lengths of its lists."""

    name: str
    n_input_args: int
    n_input: int
    n_output: int


def read_op_args(con: duckdb.DuckDBPyConnection, side: str) -> list[OpArgs]:
    """The entries of one side's dump.json, in file order, from the loaded ``ops`` table."""
    return [OpArgs(*row) for row in con.execute(
        "SELECT op_name, n_input_args, n_input, n_output FROM ops WHERE side = ? ORDER BY op_seq",
        [side]).fetchall()]


def _compat_rows(base: str | None, ops: list[OpArgs], flag: str) -> tuple[list[str], list[str]]:
    """1.1.0: ops containing ``base`` minus its index (substring!) with that index; top-level rows."""
    if not base:
        return [], []
    name, index = base.rsplit(".", 1)
    inputs: list[str] = []
    outputs: list[str] = []
    for op in ops:
        key = op.name
        if flag not in key or name not in key:
            continue
        parts = key.split(".")
        if parts[-1] != index and parts[-2] != index:
            continue
        n_args = op.n_input_args if flag == "forward" else op.n_input
        inputs += [f"{key}.input.{i}" for i in range(n_args)]
        outputs += [f"{key}.output.{i}" for i in range(op.n_output)]
    return inputs, outputs


def compat_row_mapping(pairs: list[tuple[str, str | None]], npu_ops: list[OpArgs],
                       bench_ops: list[OpArgs]) -> dict[str, str | None]:
    """The data mapping exactly as 1.1.0 builds it (NPU row -> bench row or None)."""
    rows: list[tuple[str | None, str | None]] = []
    npu_names, bench_names = [op.name for op in npu_ops], [op.name for op in bench_ops]
    for flag in ("forward", "backward"):
        for ms_base, pt_base in _sorted(pairs, npu_names, bench_names, flag):
            n_in, n_out = _compat_rows(ms_base, npu_ops, flag)
            b_in, b_out = _compat_rows(pt_base, bench_ops, flag)
            rows += list(zip_longest(n_in, b_in)) + list(zip_longest(n_out, b_out))
    return {n: b for n, b in rows if n is not None}


def _op_name(base: str | None, flag: str, names: set[str]) -> str | None:
    if not base:
        return None
    name, index = base.rsplit(".", 1)
    for candidate in (f"{name}.{flag}.{index}", f"{name}.{index}.{flag}"):
        if candidate in names:
            return candidate
    return None


def default_op_pairs(pairs: list[tuple[str, str | None]], npu_ops: list[str],
                     bench_ops: list[str]) -> list[tuple[str, str | None]]:
    """(NPU op, bench op or None) with exact names: forward pairs, then backward pairs."""
    npu_names, bench_names = set(npu_ops), set(bench_ops)
    out: list[tuple[str, str | None]] = []
    for flag in ("forward", "backward"):
        for ms_base, pt_base in _sorted(pairs, npu_ops, bench_ops, flag):
            npu_op = _op_name(ms_base, flag, npu_names)
            if npu_op is not None:
                out.append((npu_op, _op_name(pt_base, flag, bench_names)))
    return out


def default_row_mapping(con: duckdb.DuckDBPyConnection,
                        op_pairs: list[tuple[str, str | None]]) -> dict[str, str | None]:
    """Rows of the op pairs (the ``ms_layer_rows`` view), in op-pair order."""
    if op_pairs:
        con.executemany("INSERT INTO mappings VALUES ('layer', ?, ?, ?)",
                        [(n, b, i) for i, (n, b) in enumerate(op_pairs)])
    rows = con.execute("SELECT npu_name, bench_name FROM ms_layer_rows "
                       "ORDER BY ord, io_order, pos").fetchall()
    return {n: b for n, b in rows}


# -- driver -------------------------------------------------------------------------------------
def derive_data_mapping(con: duckdb.DuckDBPyConnection, inp: SingleInput, layer_yaml: Path,
                        compat: bool) -> dict[str, str | None]:
    """The data mapping -lm produces for one compare (NPU = MindSpore, bench = PyTorch)."""
    mapping = read_layer_yaml(layer_yaml, compat)
    ms_stack, ms_construct = read_structure(inp.npu_json, "NPU (MindSpore)")
    pt_stack, pt_construct = read_structure(inp.bench_json, "bench (PyTorch)")
    for side, stack, construct in (("NPU", ms_stack, ms_construct),
                                   ("bench", pt_stack, pt_construct)):
        if not stack or not construct:
            log.warning("-lm: the %s side's stack.json or construct.json is empty (a level L1 "
                        "dump?); the layer mapping pairs nothing", side)
    ms_scopes = scope_keys(ms_stack, ms_construct, compat)
    pt_scopes = scope_keys(pt_stack, pt_construct, compat)
    warn_unused_yaml(layer_yaml, mapping, build_trie(ms_scopes))
    pairs = layer_pairs(ms_scopes, pt_scopes, mapping)
    if compat:
        return compat_row_mapping(pairs, read_op_args(con, "npu"), read_op_args(con, "bench"))
    npu_ops, bench_ops = (
        [r[0] for r in con.execute("SELECT op_name FROM ops WHERE side = ? ORDER BY op_seq",
                                   [side]).fetchall()] for side in ("npu", "bench"))
    return default_row_mapping(con, default_op_pairs(pairs, npu_ops, bench_ops))


def write_data_mapping(mapping: dict[str, str | None], output_dir: Path,
                       suffix: str = "") -> Path:
    """``<output>/data_mapping{suffix}_{YYYYmmddHHMMSS}.yaml`` (insertion order, null = no bench
    row); the suffix (``_rank0-rank0`` in a directory compare) keeps rank pairs apart.

    Written as every output is: complete or not at all, and never over another file (another
    compare into this folder in the same second gets ``_2``; see :func:`msq.db.new_file`).
    """
    stamp = time.strftime("%Y%m%d%H%M%S")
    path = Path(os.path.realpath(output_dir)) / f"data_mapping{suffix}_{stamp}.yaml"
    with new_file(path, mode=0o640) as staged:
        staged.tmp.write_text(yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True),
                              encoding="utf-8")
    return staged.path


def apply_layer_mapping(con: duckdb.DuckDBPyConnection, inp: SingleInput, opts: Options,
                        output_dir: Path, suffix: str = "") -> dict[str, str]:
    """Derive and write the data mapping; return the row pairs to compare through (as -dm)."""
    if opts.data_mapping is not None:
        log.warning("-lm replaces -dm: the data mapping %s is not used", opts.data_mapping)
    mapping = derive_data_mapping(con, inp, Path(opts.layer_mapping or ""), opts.is_compat)
    path = write_data_mapping(mapping, output_dir, suffix)
    missing = [n for n, b in mapping.items() if b is None]
    if missing:
        log.warning("-lm: %d NPU row(s) have no PyTorch counterpart (null in %s), e.g. %s",
                    len(missing), path.name, missing[0])
    log.info("-lm: %d row pair(s) written to %s", len(mapping) - len(missing), path)
    if not mapping:
        log.warning("-lm: the layer mapping paired no rows; check the YAML against the cell names "
                    "in the NPU construct.json")
    return {n: b for n, b in mapping.items() if b is not None}
