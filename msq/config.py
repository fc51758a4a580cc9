"""Inputs of a compare: compare.json, the Python API's ``input_param`` and the options.

Everything is validated here, before any work starts, so that a mistake costs one clear line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msq.errors import InputError, UsageError
from msq.jsonio import read_json

log = logging.getLogger("msq")

COMPAT_CHOICES = ("msprobe-1.1",)
ENGINES = ("local", "ray")
FRAMEWORKS = ("pytorch", "mindspore")


@dataclass
class Options:
    """Flags shared by every compare kind."""

    stack_mode: bool = False
    auto_analyze: bool = True
    fuzzy_match: bool = False
    compat: str | None = None
    framework: str = "pytorch"
    data_mapping: str | Path | dict[str, str] | None = None
    api_mapping: str | Path | bool | None = None
    cell_mapping: str | Path | bool | None = None
    layer_mapping: str | Path | None = None
    formats: tuple[str, ...] = ("xlsx",)
    label: str | None = None
    db: str | Path | None = None
    record: bool = True
    workers: int | None = None
    sql_dir: str | Path | None = None
    blame: bool = True                       # blame (default mode only): where errors enter
    noise: str | Path | None = None          # compare.json of a reference noise run
    noise_label: str | None = None           # ... or a noise run recorded in the history
    blame_run: Any = None                    # set by msq.blame.run.start_run (internal)
    is_print_compare_log: bool = True
    engine: str = "local"              # directory compares: local (process pool) | ray
    ray_address: str | None = None     # --engine ray: the cluster to join
    ray_place: Any = None              # --engine ray: {path prefix: node} for node-local dumps
    resume: bool = False               # skip the pairs this run already recorded in the history

    @property
    def is_compat(self) -> bool:
        return self.compat is not None


@dataclass
class SingleInput:
    """One card: two dump.json files and the NPU stack.json."""

    npu_json: Path
    bench_json: Path
    stack_json: Path | None


@dataclass
class DirInput:
    """Directories: step dirs holding rank dirs, or dump roots holding step dirs."""

    npu_dir: Path
    bench_dir: Path
    rank_id: list[int] | None = None
    step_id: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


#: Where a real-data (tensor task) dump keeps its tensor files: beside its dump.json (msprobe's
#: layout). The one rule for "a real-data rank": the loader reads the tensors there, a directory
#: compare runs such pairs in its own process (they use the tensor pool) and Ray splits them into
#: tensor tasks. Light on purpose: msq.runner asks before the heavy modules are imported.
TENSOR_FOLDER = "dump_tensor_data"


def tensor_folder(dump_json: Path) -> Path:
    """The tensor folder of the dump whose dump.json is ``dump_json``."""
    return dump_json.parent / TENSOR_FOLDER


def is_real_data(dump_json: Path) -> bool:
    """A real-data dump: its tensor folder is beside its dump.json."""
    return tensor_folder(dump_json).is_dir()


def holds_real_data(directory: Path) -> bool:
    """Whether a rank folder of a step directory (``DIR/rank0``) or of a dump root
    (``DIR/step0/rank0``) is a real-data dump's (:func:`is_real_data`), found without pairing
    the ranks (a stray folder holding a tensor folder counts too)."""
    return any(found.is_dir() for pattern in ("*", "*/*")
               for found in directory.glob(f"{pattern}/{TENSOR_FOLDER}"))


def check_bool(name: str, value: Any) -> bool:
    """msprobe accepts only real booleans for its switches; so does msq, with the fix named."""
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be true or false, got {value!r}")
    return value


def check_compat(value: str | None) -> str | None:
    if value is None or value in COMPAT_CHOICES:
        return value
    raise UsageError(f"unknown compat mode {value!r}; try one of: {', '.join(COMPAT_CHOICES)}")


def check_sql_dir(value: str | Path | None) -> None:
    """``--sql-dir`` must be an existing folder (its views replace msq's own by name)."""
    if value is not None and not Path(value).is_dir():
        raise InputError(f"{value}: --sql-dir must be a folder of SQL views laid out like msq's "
                         "sql/ (e.g. compare/rules/marks.sql); check the path")


def _resolve(base: Path, value: Any, key: str, source: Path) -> Path:
    """A path from compare.json: absolute, else relative to ``base`` (see ``_relative_base``)."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{source}: '{key}' must be a non-empty path string, got {value!r}")
    path = Path(value)
    return path if path.is_absolute() else base / path


def _relative_base(doc: Mapping[str, Any], cwd: Path, source: Path) -> Path:
    """The one folder a compare.json's relative paths are taken from: the working directory (as
    msprobe reads them), else compare.json's own folder when every relative path is there (so a
    shipped compare.json works from anywhere). One folder for all of them: taken path by path,
    ``"npu_path": "npu", "bench_path": "bench"`` run from a folder that happens to hold a
    ``bench`` compared the dump root's npu with that unrelated folder."""
    rel = [Path(v) for k in ("npu_path", "bench_path", "stack_path")
           if isinstance(v := doc.get(k), str) and v and not Path(v).is_absolute()]
    if not rel or all(_exists(cwd / p, source) for p in rel) or not source.is_file():
        return cwd
    if all(_exists(source.parent / p, source) for p in rel):
        return source.parent
    return cwd


def _elsewhere(value: str, tried: Path, source: Path) -> str:
    """The other place a relative path of compare.json was looked for (its own folder), for the
    error that names ``tried``; "" when there was none."""
    other = source.parent / value
    if Path(value).is_absolute() or not source.is_file() or other == tried:
        return ""
    if _exists(other, source):
        return (f" (compare.json's folder has {other}, but not every relative path of "
                "compare.json is there: they are taken from one folder; give absolute paths)")
    return f", nor does {other}"


def _exists(path: Path, source: Path) -> bool:
    """``path.exists()``, but a name too long for the system is an error naming it, not a crash."""
    try:
        return path.exists()
    except OSError as err:
        raise InputError(f"{source}: {str(path)[:200]}: {err.strerror}; check the path") from None


def parse_compare_json(path: Path) -> SingleInput | DirInput:
    """Read compare.json (msprobe's ``-i`` file); relative paths are taken from the working dir."""
    doc = read_json(path, "compare.json")
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected an object with npu_path and bench_path")
    return input_from_mapping(doc, path, Path.cwd())


#: The Python API's key names (msprobe's ``compare(input_param)``), accepted in compare.json too
API_KEYS = {"npu_json_path": "npu_path", "bench_json_path": "bench_path",
            "stack_json_path": "stack_path"}


def canonical_keys(doc: Mapping[str, Any], source: Path | str) -> dict[str, Any]:
    """compare.json's keys whichever spelling was used: ``npu_json_path`` (the API's) is read as
    ``npu_path`` (msprobe's compare.json), and so on; both spellings at once must agree."""
    out = dict(doc)
    for api_key, key in API_KEYS.items():
        if api_key not in out:
            continue
        value = out.pop(api_key)
        if key in out and out[key] != value:
            raise InputError(f"{source}: '{key}' and '{api_key}' name different paths "
                             f"({out[key]!r} vs {value!r}); give one of them")
        out[key] = value
    return out


def input_from_mapping(doc: Mapping[str, Any], source: Path | str,
                       base: Path) -> SingleInput | DirInput:
    """Classify a compare.json-like mapping: two files, or two directories."""
    source = Path(str(source))
    doc = canonical_keys(doc, source)
    for key in ("npu_path", "bench_path"):
        if key not in doc:
            raise InputError(f"{source}: missing '{key}'; compare.json needs npu_path and bench_path")
    base = _relative_base(doc, base, source)
    npu = _resolve(base, doc["npu_path"], "npu_path", source)
    bench = _resolve(base, doc["bench_path"], "bench_path", source)
    if "is_print_compare_log" in doc and not isinstance(doc["is_print_compare_log"], bool):
        raise InputError(f"{source}: 'is_print_compare_log' must be true or false, "
                         f"got {doc['is_print_compare_log']!r}")
    for key, p in (("npu_path", npu), ("bench_path", bench)):
        if not _exists(p, source):
            raise InputError(f"{source}: {p} does not exist{_elsewhere(doc[key], p, source)}; "
                             "check the path")
    if npu.is_file() != bench.is_file():
        raise InputError(f"{source}: npu_path and bench_path must both be dump.json files or both "
                         f"directories ({npu} vs {bench})")
    if npu.is_dir():
        return DirInput(npu, bench, _int_list(doc, "rank_id", source), _int_list(doc, "step_id", source),
                        extra={"has_rank_id": "rank_id" in doc})
    stack = doc.get("stack_path")
    stack_path = _resolve(base, stack, "stack_path", source) if stack is not None else None
    if stack_path is not None and not stack_path.is_file():
        raise InputError(f"{source}: stack_path {stack_path} is not a file; fix it or drop the key")
    return SingleInput(npu, bench, stack_path)


def _int_list(doc: dict[str, Any], key: str, source: Path) -> list[int] | None:
    if key not in doc:
        return None
    value = doc[key]
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        raise InputError(f"{source}: '{key}' must be a list of integers, got {value!r}")
    return value


def input_from_api(input_param: Any) -> SingleInput:
    """The Python API's dict: npu_json_path, bench_json_path, stack_json_path (compare.json's
    npu_path, bench_path, stack_path are read too)."""
    if not isinstance(input_param, Mapping):
        raise UsageError(f"input_param must be a dict with npu_json_path and bench_json_path, "
                         f"got {type(input_param).__name__}")
    given = canonical_keys(input_param, "input_param")
    mapping = {"npu_path": given.get("npu_path"), "bench_path": given.get("bench_path")}
    if given.get("stack_path") is not None:
        mapping["stack_path"] = given["stack_path"]
    if "is_print_compare_log" in given:
        mapping["is_print_compare_log"] = given["is_print_compare_log"]
    for key, api_key in (("npu_path", "npu_json_path"), ("bench_path", "bench_json_path")):
        if mapping[key] is None:
            raise UsageError(f"input_param is missing '{api_key}'")
    parsed = input_from_mapping(mapping, "input_param", Path.cwd())
    if not isinstance(parsed, SingleInput):
        raise UsageError("input_param paths must be dump.json files; for directories use "
                         "compare_distributed()")
    return parsed


def check_noise(opts: Options) -> None:
    """The blame options: a reference noise run by path or by label, not both, and only where
    blame runs (the default mode)."""
    check_bool("blame", opts.blame)
    if opts.noise is None and opts.noise_label is None:
        return
    if opts.noise is not None and opts.noise_label is not None:
        raise UsageError("give the reference noise run once: --noise PATH or --noise-label LABEL")
    if opts.is_compat or not opts.blame:
        raise UsageError("a reference noise run sets blame's floors, and blame runs in the default "
                         "mode only: drop --noise/--noise-label, or --compat/--no-blame")
    if opts.noise is not None and not Path(opts.noise).is_file():
        raise InputError(f"{opts.noise}: the reference noise run's compare.json does not exist; "
                         "give the compare.json of two bench-side runs (--noise)")


def options_from_kwargs(stack_mode: bool, auto_analyze: bool, fuzzy_match: bool,
                        kwargs: dict[str, Any]) -> Options:
    check_bool("stack_mode", stack_mode)
    check_bool("auto_analyze", auto_analyze)
    check_bool("fuzzy_match", fuzzy_match)
    known = set(Options.__dataclass_fields__) - {"stack_mode", "auto_analyze", "fuzzy_match"}
    unknown = set(kwargs) - known
    if unknown:
        raise UsageError(f"unknown argument(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(sorted(known))}")
    opts = Options(stack_mode=stack_mode, auto_analyze=auto_analyze, fuzzy_match=fuzzy_match,
                   **kwargs)
    check_compat(opts.compat)
    check_sql_dir(opts.sql_dir)
    if opts.engine not in ENGINES:
        raise UsageError(f"unknown engine {opts.engine!r}; try one of: {', '.join(ENGINES)}")
    if opts.engine != "ray" and (opts.ray_address or opts.ray_place):
        raise UsageError("ray_address and ray_place need engine='ray' (--engine ray)")
    if opts.record and _in_memory(opts.db):
        log.warning("--db :memory: keeps no history: this compare is not recorded "
                    "(--no-history says so without this warning)")
        opts.record = False
    check_noise(opts)
    if isinstance(opts.formats, str):
        opts.formats = tuple(f.strip() for f in opts.formats.split(",") if f.strip())
    return opts


def _in_memory(db: str | Path | None) -> bool:
    """``--db :memory:`` (or ``MSQ_DB``): DuckDB's name for a database that is never written."""
    return str(db or os.environ.get("MSQ_DB") or "") == ":memory:"
