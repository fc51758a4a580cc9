"""Mapping files (-dm data mapping, and the MindSpore api/cell/layer mappings) as ``mappings`` rows.

A mapping is data: it is loaded into the ``mappings`` table and applied by SQL joins.
"""

from __future__ import annotations

import functools
import logging
import stat
from pathlib import Path
from typing import Any

import duckdb

from msq import db
from msq.errors import DumpError

log = logging.getLogger("msq")
MAX_YAML_BYTES = 10 << 20


@functools.cache
def _mapping_loader() -> type:
    """yaml's SafeLoader, except that an alias may only repeat a scalar: aliases of lists or
    mappings nest without bound ("billion laughs") and blew up the first message that printed a
    value. Built on first use: yaml is imported only by compares that read a mapping file."""
    import yaml

    class MappingLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                node = self.anchors.get(event.anchor)
                if node is not None and not isinstance(node, yaml.ScalarNode):
                    raise yaml.composer.ComposerError(
                        None, None, f"an alias (*{event.anchor}) of a list or mapping, which msq "
                        "does not expand in mapping files", event.start_mark)
            return super().compose_node(parent, index)

    return MappingLoader


def read_yaml(path: Path, what: str) -> Any:
    """``yaml.safe_load`` a mapping file with errors that name the file and the line."""
    try:
        info = path.stat()
    except OSError:
        raise DumpError(f"{path}: {what} not found; check the path") from None
    size = info.st_size
    if not stat.S_ISREG(info.st_mode):  # a directory failed with a traceback, a FIFO hung
        raise DumpError(f"{path}: {what} is not a regular file; give the path of a YAML file")
    if size > MAX_YAML_BYTES:
        raise DumpError(f"{path}: {what} is {size} bytes; a mapping file above 10 MiB is "
                        "almost certainly the wrong file")
    import yaml  # lazy: see _mapping_loader

    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.load(handle, Loader=_mapping_loader())  # a SafeLoader subclass
    except UnicodeDecodeError:
        raise DumpError(f"{path}: {what} is not UTF-8 text") from None
    except OSError as err:
        raise DumpError(f"{path}: cannot read {what} ({err.strerror}); check the path") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise DumpError(f"{path}: {what} is not valid YAML{where}: "
                        f"{getattr(err, 'problem', None) or err}") from None


def data_mapping_pairs(source: str | Path | dict[str, Any]) -> list[tuple[str, str]]:
    """The (NPU row name, bench row name) pairs of a -dm mapping, in file order."""
    if isinstance(source, dict):
        doc: Any = source
        where = "data_mapping"
    else:
        doc = read_yaml(Path(source), "data mapping YAML")
        where = str(source)
    if not isinstance(doc, dict):
        raise DumpError(f"{where}: a data mapping must be a YAML mapping of NPU row name: bench row "
                        f"name, found a {type(doc).__name__}")
    pairs = []
    for key, value in doc.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise DumpError(f"{where}: entry {key!r}: {value!r}: both names must be strings "
                            "(e.g. Functional.linear.0.forward.input.0)")
        pairs.append((key, value))
    return pairs


def load_mapping_rows(con: duckdb.DuckDBPyConnection, kind: str,
                      pairs: list[tuple[str, str]]) -> None:
    """Insert mapping pairs as ``mappings`` rows (ord = position in the file)."""
    import pyarrow as pa  # lazy: mapping files only

    table = pa.table({"kind": [kind] * len(pairs), "npu_key": [p[0] for p in pairs],
                      "bench_key": [p[1] for p in pairs],
                      "ord": pa.array(range(len(pairs)), pa.int32())})
    db.insert_arrow(con, "mappings", table)


def warn_missing_data_names(con: duckdb.DuckDBPyConnection, compat: bool) -> list[str]:
    """Log a warning for every mapping name that is not in its dump; return the messages."""
    bench_side = "npu" if compat else "bench"  # 1.1.0 looks bench names up in the NPU rows (a bug)
    rows = con.execute(f"""
        SELECT m.npu_key, m.bench_key,
               m.npu_key IN (SELECT disp_name FROM tensors WHERE side = 'npu') AS npu_found,
               m.bench_key IN (SELECT disp_name FROM tensors WHERE side = '{bench_side}') AS bench_found
        FROM mappings m WHERE m.kind = 'data' ORDER BY m.ord""").fetchall()
    messages = []
    for npu_key, bench_key, npu_found, bench_found in rows:
        if not npu_found:
            messages.append(f"Can not find npu op name : `{npu_key}` in npu dump json file.")
        elif not bench_found:
            messages.append(f"Can not find bench op name : `{bench_key}` in bench dump json file.")
    for message in messages:
        log.warning("data mapping: %s", message)
    return messages


def pair_rows_mapped(con: duckdb.DuckDBPyConnection, source: str | Path | dict[str, Any],
                     compat: bool) -> None:
    """Fill ``compare_rows`` through a data mapping (``-dm``, or the one ``-lm`` derives)."""
    load_mapping_rows(con, "data", data_mapping_pairs(source))
    warn_missing_data_names(con, compat)
    con.execute("INSERT INTO compare_rows SELECT * FROM row_pairs_mapped")
