"""Write ONE side of a msprobe 1.1.0 dump of a random-init transformers Llama (one process per rank).

Run with the msprobe venv (bench/.venv-msprobe: msprobe 1.1.0, torch 2.13 CPU, transformers):

    bench/.venv-msprobe/bin/python bench/dumpers/llama_side.py --cwd CASE --dump-path npu \
        --preset faults --task statistics --faults '[{"op": "Functional.silu.1.forward", ...}]'

The dump is made by msprobe's own dumper (PrecisionDebugger, level L1): one training step
(forward, loss, backward) inside start()/stop(). `--cwd` is the case folder and `--dump-path` is
relative to it, so dump.json's `dump_data_dir` is relative, as in the golden dumps.

Faults: before msprobe is imported, the torch functions named by the faults are replaced by a thin
wrapper, so msprobe wraps the wrapper and the wrapper's own tensor work is invisible to it (the API
sequence stays identical on both sides). The wrapper asks msprobe's op object which call it is
(its `prefix`, e.g. "Functional.silu.1."), so a fault hits exactly the op msprobe names:
- forward: the op's output is changed through `.data` (the autograd graph is untouched);
- backward: a post-hook is put on the output's grad_fn before msprobe puts its own, so msprobe's
  `backward.output.N` (the node's grad_inputs) records the perturbed gradient while
  `backward.input.N` (the incoming gradient) is untouched.
Fault kinds: `scale` multiplies by (1 + size); `noise` adds size * rms(x) * N(0, 1) from a generator
seeded by the op name, i.e. a relative L2 error of about `size`.

`--world 2` runs a 2-rank gloo group (the caller starts one process per rank with RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT): the MLP of every layer is tensor-parallel (Megatron-style: gate/up split
by output rows, down_proj by input columns); down_proj's partial output is summed by an in-place
`torch.distributed.all_reduce` (forward) and the MLP input gradient by another (backward). Both are
dumped as `Distributed.all_reduce.N.forward`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import site
import sys
import sysconfig
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import torch  # noqa: TID253  (a dump generator, not part of msq)

REPO = Path(__file__).resolve().parents[2]

# Model presets. `faults`: tiny, for the committed fault cases. `port`: the committed bf16 port.
# `bench`: the 4-layer benchmark workload of issue 15 target 4 (see llama_port.py).
PRESETS: dict[str, dict[str, Any]] = {
    "faults": {"vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
               "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
               "head_dim": 8, "seq": 6, "batch": 1},
    "bench": {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "seq": 16, "batch": 2},
}
NAMESPACES = {"Functional": "torch.nn.functional", "Torch": "torch", "Tensor": "torch.Tensor",
              "Distributed": "torch.distributed"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cwd", required=True, help="folder the dump path is relative to")
    p.add_argument("--dump-path", required=True, help="msprobe dump_path, relative to --cwd")
    p.add_argument("--preset", default="faults", choices=sorted(PRESETS))
    p.add_argument("--layers", type=int, help="override num_hidden_layers")
    p.add_argument("--hidden", type=int, help="override hidden_size (intermediate = 2x)")
    p.add_argument("--vocab", type=int, help="override vocab_size")
    p.add_argument("--seq", type=int, help="override the sequence length")
    p.add_argument("--task", default="statistics", choices=["statistics", "tensor"])
    p.add_argument("--data-mode", default="all", choices=["all", "forward", "backward"])
    p.add_argument("--summary-mode", default="statistics", choices=["statistics", "md5"])
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--amp", choices=["bf16", "fp16"], help="forward under CPU autocast")
    p.add_argument("--faults", default="[]", help="JSON list of faults (see module doc)")
    p.add_argument("--world", type=int, default=1, help="ranks (2: tensor-parallel MLP, gloo)")
    p.add_argument("--stack-frames", type=int, default=0,
                   help="keep N caller frames of each stack.json entry, without msprobe's "
                        "wrapper frame (0: the stack as msprobe wrote it)")
    p.add_argument("--model-seed", type=int, default=1234)
    p.add_argument("--data-seed", type=int, default=7)
    return p.parse_args(argv)


# ---------------------------------------------------------------- faults (before msprobe import)

def _msprobe_prefix() -> str:
    """The msprobe name prefix ("Functional.silu.1.") of the op object calling us, or ""."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            break
        owner = frame.f_locals.get("self")
        if owner is not None and type(owner).__name__.endswith("OPTemplate"):
            return str(getattr(owner, "prefix", ""))  # "" for calls nested in another op
        frame = frame.f_back
    return ""


@contextlib.contextmanager
def _msprobe_quiet() -> Iterator[None]:
    """Hide our own tensor ops from msprobe, the way msprobe hides ops nested in a dumped op.

    A backward hook runs outside any dumped op, so without this msprobe would dump the fault's
    arithmetic as extra APIs on the npu side only.
    """
    from msprobe.pytorch.hook_module.hook_module import HOOKModule

    ident = threading.current_thread().ident
    before = HOOKModule.inner_stop_hook.get(ident, False)
    HOOKModule.inner_stop_hook[ident] = True
    try:
        yield
    finally:
        HOOKModule.inner_stop_hook[ident] = before


def _perturb(t: torch.Tensor, kind: str, size: float, seed_name: str) -> torch.Tensor:
    """The faulty version of t (same dtype/shape)."""
    if kind == "scale":
        return t * (1.0 + size)
    if kind == "noise":
        gen = torch.Generator().manual_seed(zlib.crc32(seed_name.encode()))
        x = t.detach().to(torch.float32)
        rms = x.pow(2).mean().sqrt()
        return (x + size * rms * torch.randn(x.shape, generator=gen)).to(t.dtype)
    raise SystemExit(f"unknown fault kind {kind!r} (scale or noise)")


def _report(op: str, index: int, good: torch.Tensor, bad: torch.Tensor) -> None:
    """One line per injection: the relative L2 error it really made (read by make_faults.py)."""
    g, b = good.detach().double(), bad.detach().double()
    rel = float((b - g).norm() / g.norm()) if float(g.norm()) else float("inf")
    rank = os.environ.get("RANK")
    print("FAULT " + json.dumps({"op": op, "index": index, "rank": None if rank is None else int(rank),
                                 "rel_l2": rel}), flush=True)


def _pick(out: Any, index: int) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        if index != 0:
            raise SystemExit("fault index > 0 on a single-tensor output")
        return out
    return out[index]


def install_faults(faults: list[dict[str, Any]], rank: int) -> None:
    """Replace each faulted torch function by a wrapper that perturbs the named call."""
    by_prefix: dict[str, list[dict[str, Any]]] = {}
    funcs: set[tuple[str, str]] = set()
    for f in faults:
        if f.get("rank", rank) != rank:
            continue
        ns, api, _call, direction = f["op"].split(".")
        if ns not in NAMESPACES or direction not in ("forward", "backward"):
            raise SystemExit(f"bad fault op {f['op']!r}")
        by_prefix.setdefault(f["op"].rsplit(".", 1)[0] + ".", []).append(f)
        funcs.add((ns, api))
    for ns, api in sorted(funcs):
        owner = _resolve(NAMESPACES[ns])
        setattr(owner, api, _wrap(getattr(owner, api), by_prefix))


def _resolve(dotted: str) -> Any:
    obj: Any = torch
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _wrap(orig: Callable[..., Any], by_prefix: dict[str, list[dict[str, Any]]]) -> Callable[..., Any]:
    def faulty(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        for f in by_prefix.get(_msprobe_prefix(), []):
            index = int(f.get("index", 0))
            if f["op"].endswith(".forward"):
                t = _pick(out, index)
                with torch.no_grad():
                    bad = _perturb(t.data, f["kind"], f["size"], f["op"])
                    _report(f["op"], index, t.data, bad)
                    t.data.copy_(bad)
            else:
                node = _pick(out, 0).grad_fn
                if node is None:
                    raise SystemExit(f"{f['op']}: output has no grad_fn, cannot fault its backward")
                node.register_hook(_grad_hook(f, index))
        return out

    faulty.__name__ = getattr(orig, "__name__", "faulty")
    faulty.__qualname__ = getattr(orig, "__qualname__", "faulty")
    faulty.__doc__ = getattr(orig, "__doc__", None)
    return faulty


def _grad_hook(f: dict[str, Any], index: int) -> Callable[..., Any]:
    def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        grads = list(grad_inputs)
        with _msprobe_quiet():
            bad = _perturb(grads[index], f["kind"], f["size"], f["op"])
            _report(f["op"], index, grads[index], bad)
            grads[index] = bad
        return tuple(grads)

    return hook


# ---------------------------------------------------------------- model

def llama_config(args: argparse.Namespace) -> tuple[Any, int, int]:
    from transformers import LlamaConfig

    p = dict(PRESETS[args.preset])
    if args.layers:
        p["num_hidden_layers"] = args.layers
    if args.hidden:
        p["hidden_size"] = args.hidden
        p["intermediate_size"] = 2 * args.hidden
        p["head_dim"] = args.hidden // p["num_attention_heads"]
    if args.vocab:
        p["vocab_size"] = args.vocab
    if args.seq:
        p["seq"] = args.seq
    seq, batch = p.pop("seq"), p.pop("batch")
    cfg = LlamaConfig(max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=False,
                      attn_implementation="sdpa", **p)
    return cfg, seq, batch


class _ReduceFromTP(torch.autograd.Function):
    """Forward: in-place all_reduce (sum of the partial outputs). Backward: identity."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        dist.all_reduce(x)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad


class _CopyToTP(torch.autograd.Function):
    """Forward: identity. Backward: in-place all_reduce of the input gradient."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        grad = grad.contiguous()
        dist.all_reduce(grad)
        return grad


class TPMLP(torch.nn.Module):
    """A LlamaMLP split over `world` ranks (this rank's shard of the same full weights)."""

    def __init__(self, mlp: Any, rank: int, world: int) -> None:
        super().__init__()
        inter = mlp.gate_proj.out_features
        lo, hi = rank * inter // world, (rank + 1) * inter // world
        self.gate_proj = _shard(mlp.gate_proj.weight[lo:hi])
        self.up_proj = _shard(mlp.up_proj.weight[lo:hi])
        self.down_proj = _shard(mlp.down_proj.weight[:, lo:hi])
        self.act_fn = mlp.act_fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _CopyToTP.apply(x)
        partial = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        return _ReduceFromTP.apply(partial)


def _shard(weight: torch.Tensor) -> torch.nn.Linear:
    lin = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    with torch.no_grad():
        lin.weight.copy_(weight)
    return lin


def build(args: argparse.Namespace, rank: int) -> tuple[torch.nn.Module, torch.Tensor]:
    from transformers import LlamaForCausalLM

    cfg, seq, batch = llama_config(args)
    torch.manual_seed(args.model_seed)
    model = LlamaForCausalLM(cfg)
    model.train()
    if args.world > 1:
        for layer in model.model.layers:
            layer.mlp = TPMLP(layer.mlp, rank, args.world)
    gen = torch.Generator().manual_seed(args.data_seed)  # tensor-parallel ranks share the batch
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=gen)
    return model, ids


# ---------------------------------------------------------------- run

def msprobe_config(args: argparse.Namespace) -> dict[str, Any]:
    cfg: dict[str, Any] = {"task": args.task, "dump_path": args.dump_path, "rank": [], "step": [],
                           "level": "L1", "enable_dataloader": False}
    if args.task == "tensor":
        cfg["tensor"] = {"scope": [], "list": [], "data_mode": [args.data_mode]}
    else:
        cfg["statistics"] = {"scope": [], "list": [], "data_mode": [args.data_mode],
                             "summary_mode": args.summary_mode}
    return cfg


def sanitize_stacks(rank_dir: Path, frames: int) -> None:
    """Replace machine paths in stack.json by placeholders, as the golden dumps do.

    frames > 0 keeps, of each entry, only the `frames` innermost caller frames, dropping the
    first frame (msprobe's own wrapper, the same line for every op of a namespace): the full
    transformers call stacks are ~20 frames an op and would be most of the committed test data.
    The file keeps msprobe's format (json.dump, indent=1).
    """
    stack = rank_dir / "stack.json"
    places = [(d, "$SITE_PACKAGES") for d in site.getsitepackages()]
    places += [(sysconfig.get_paths()["stdlib"], "$PYTHON_STDLIB"), (str(REPO), "$REPO")]
    subs = sorted({(variant, name) for d, name in places
                   for variant in (d, os.path.realpath(d))}, key=lambda s: -len(s[0]))
    doc = json.loads(stack.read_text())
    for name, lines in doc.items():
        kept = lines[1:1 + frames] if frames > 0 else lines
        for path, holder in subs:
            kept = [line.replace(path.rstrip("/") + "/", holder + "/") for line in kept]
        doc[name] = kept
    with stack.open("w") as f:
        json.dump(doc, f, indent=1)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    rank = int(os.environ.get("RANK", "0"))
    install_faults(json.loads(args.faults), rank)  # BEFORE msprobe wraps torch

    import torch.distributed as dist
    from msprobe.pytorch import PrecisionDebugger

    os.chdir(args.cwd)
    if args.world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=args.world)
    model, ids = build(args, rank)
    cfg_path = Path(f".msprobe_config_{args.dump_path.replace('/', '_')}_{rank}.json")
    cfg_path.write_text(json.dumps(msprobe_config(args)))
    debugger = PrecisionDebugger(config_path=str(cfg_path))
    debugger.start()
    if args.amp:
        amp_dtype = torch.bfloat16 if args.amp == "bf16" else torch.float16
        with torch.autocast("cpu", dtype=amp_dtype):
            loss = model(input_ids=ids, labels=ids).loss
    else:
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    debugger.stop()
    cfg_path.unlink()
    rank_dir = Path(args.dump_path) / "step0" / (f"rank{rank}" if args.world > 1 else "rank")
    sanitize_stacks(rank_dir, args.stack_frames)
    if args.world > 1:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        print(f"loss {loss.item():.9g}")


if __name__ == "__main__":
    main()
