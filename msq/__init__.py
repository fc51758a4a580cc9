"""msq: accuracy compare of model dumps (msprobe-compatible), on DuckDB.

Public API: :func:`compare` and :func:`compare_distributed` take msprobe's parameters;
:func:`compare_json` runs a compare.json as ``msq compare`` does. Each returns
:class:`msq.result.CompareResult` records: counts, the suspect and its sheet row, rank and step,
absolute paths of the dumps and of the files written.

A directory compare where a rank (and step) pair cannot be compared (a truncated dump.json, say)
still writes and records the other pairs, but is not a pass: :func:`compare_distributed` raises
:class:`msq.errors.PairsFailedError` (``results``: the pairs compared; ``failed``: the pairs that
failed, :class:`msq.result.FailedPair` records of title, dump paths and reason), and
:func:`compare_json` returns the results with ``failed`` beside them (``results.failed``, empty
when every pair was compared), as ``msq compare`` exits 1 on them.

The options after ``*`` are the same for all three (the command line's flags):

* ``compat``: ``"msprobe-1.1"`` reproduces msprobe 1.1.0 cell for cell, its bugs included.
* ``framework``: ``"pytorch"`` or ``"mindspore"``, the NPU side's; None lets the dump tell.
* ``data_mapping``: ``-dm``, a YAML path or a dict of NPU row name -> bench row name.
* ``api_mapping``, ``cell_mapping``: ``-am``/``-cm`` (MindSpore): True for the built-in
  mapping, or a YAML path. ``layer_mapping``: ``-lm``, a YAML path.
* ``formats``: outputs to write, ``"xlsx,csv,parquet"`` or a sequence of names.
* ``label``, ``db``, ``record``: the history database (``record=False`` skips it).
* ``workers``: processes for tensor metrics (default: all cores).
* ``sql_dir``: a folder of SQL views that replace msq's own by name.
* ``noise``: blame's reference noise run, a compare.json of two bench-side runs (one card for
  :func:`compare`); ``noise_label``: one recorded in the history under that label; ``blame``:
  False turns blame off (docs/blame.md).

Directories only (:func:`compare_distributed`, :func:`compare_json`):

* ``engine``: ``"local"`` (the default, a process pool here) or ``"ray"`` (each rank x step pair
  a task on a Ray cluster); ``ray_address``: the cluster to join; ``ray_place``:
  ``{path prefix: node}``, pairs whose NPU rank directory is under the prefix run on the node
  labelled ``msq-node=NODE``.
* ``resume``: skip the pairs this run already recorded in the history.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from msq.version import VERSION as __version__

__all__ = ["__version__", "compare", "compare_distributed", "compare_json"]

if TYPE_CHECKING:  # the records only: import msq stays light (no duckdb)
    from msq.result import CompareResult, CompareResults

PathLike = str | os.PathLike[str]


def compare(input_param: Mapping[str, Any], output_path: PathLike, stack_mode: bool = False,
            auto_analyze: bool = True, fuzzy_match: bool = False, *,
            compat: str | None = None, framework: str | None = None,
            data_mapping: PathLike | dict[str, str] | None = None,
            api_mapping: PathLike | bool | None = None,
            cell_mapping: PathLike | bool | None = None,
            layer_mapping: PathLike | None = None,
            formats: str | Sequence[str] = "xlsx", label: str | None = None,
            db: PathLike | None = None, record: bool = True, workers: int | None = None,
            sql_dir: PathLike | None = None, noise: PathLike | None = None,
            noise_label: str | None = None, blame: bool = True) -> CompareResult:
    """Compare one NPU dump with one bench dump (``msprobe.pytorch.compare``'s parameters).

    Args:
        input_param: ``npu_json_path``, ``bench_json_path`` and ``stack_json_path`` (optional),
            as msprobe's API takes them; ``npu_path``/``bench_path``/``stack_path`` work too.
        output_path: output directory (created if missing).
        stack_mode: add the NPU_Stack_Info column.
        auto_analyze: write the advisor file.
        fuzzy_match: match ops without their call counters.
        compat, framework, data_mapping, api_mapping, cell_mapping, layer_mapping, formats,
            label, db, record, workers, sql_dir, noise, noise_label, blame: see the module's
            help (``help(msq)``).

    Returns:
        The compare's :class:`~msq.result.CompareResult`.
    """
    from msq.pipeline import compare as _compare  # lazy: import msq stays light (no duckdb)

    return _compare(input_param, output_path, stack_mode, auto_analyze, fuzzy_match,
                    **_options(compat=compat, framework=framework, data_mapping=data_mapping,
                               api_mapping=api_mapping, cell_mapping=cell_mapping,
                               layer_mapping=layer_mapping, formats=formats, label=label, db=db,
                               record=record, workers=workers, sql_dir=sql_dir, noise=noise,
                               noise_label=noise_label, blame=blame))


def compare_distributed(npu_dump_dir: PathLike, bench_dump_dir: PathLike, output_path: PathLike,
                        stack_mode: bool = False, auto_analyze: bool = True,
                        fuzzy_match: bool = False, *,
                        compat: str | None = None, framework: str | None = None,
                        data_mapping: PathLike | dict[str, str] | None = None,
                        api_mapping: PathLike | bool | None = None,
                        cell_mapping: PathLike | bool | None = None,
                        layer_mapping: PathLike | None = None,
                        formats: str | Sequence[str] = "xlsx", label: str | None = None,
                        db: PathLike | None = None, record: bool = True,
                        workers: int | None = None, sql_dir: PathLike | None = None,
                        noise: PathLike | None = None, noise_label: str | None = None,
                        blame: bool = True,
                        engine: str | None = None, ray_address: str | None = None,
                        ray_place: dict[str, str] | Sequence[str] | None = None,
                        resume: bool = False,
                        suffix: str | None = None) -> CompareResults:
    """Compare every rank (and step) pair of two directories (msprobe's ``compare_distributed``).

    Args:
        npu_dump_dir: a step directory (holding rank0, rank1, ...) or a dump root of steps.
        bench_dump_dir: the bench directory of the same kind.
        output_path: output directory (created if missing).
        stack_mode, auto_analyze, fuzzy_match: as for :func:`compare`.
        compat, framework, data_mapping, api_mapping, cell_mapping, layer_mapping, formats,
            label, db, record, workers, sql_dir, noise, noise_label, blame, engine, ray_address,
            ray_place, resume: see the module's help (``help(msq)``).
        suffix: msprobe's, refused (``UsageError``) as msprobe 1.1.0 refuses it.

    Returns:
        One :class:`~msq.result.CompareResult` per compared pair, in step and rank order (a
        :class:`~msq.result.CompareResults`, a list).

    Raises:
        msq.errors.PairsFailedError: a pair could not be compared (e.g. its dump.json is
            truncated): the other pairs are written and recorded and the exception holds them
            (``results``) and the failed pairs (``failed``); ``resume=True`` compares the failed
            ones again.
        msq.errors.NothingComparedError: the default mode matched no row in a pair.
    """
    from msq.distributed import compare_distributed as _distributed  # lazy: as compare
    from msq.errors import UsageError

    if suffix is not None:
        raise UsageError("argument 'suffix' is not supported by compare_distributed")

    return _distributed(npu_dump_dir, bench_dump_dir, output_path, stack_mode=stack_mode,
                        auto_analyze=auto_analyze, fuzzy_match=fuzzy_match,
                        **_options(compat=compat, framework=framework,
                                   data_mapping=data_mapping, api_mapping=api_mapping,
                                   cell_mapping=cell_mapping, layer_mapping=layer_mapping,
                                   formats=formats, label=label, db=db, record=record,
                                   workers=workers, sql_dir=sql_dir, noise=noise,
                                   noise_label=noise_label, blame=blame, engine=engine,
                                   ray_address=ray_address, ray_place=ray_place, resume=resume))


def compare_json(path: PathLike, output_path: PathLike, stack_mode: bool = False,
                 auto_analyze: bool = True, fuzzy_match: bool = False, *,
                 compat: str | None = None, framework: str | None = None,
                 data_mapping: PathLike | dict[str, str] | None = None,
                 api_mapping: PathLike | bool | None = None,
                 cell_mapping: PathLike | bool | None = None,
                 layer_mapping: PathLike | None = None,
                 formats: str | Sequence[str] = "xlsx", label: str | None = None,
                 db: PathLike | None = None, record: bool = True, workers: int | None = None,
                 sql_dir: PathLike | None = None, noise: PathLike | None = None,
                 noise_label: str | None = None, blame: bool = True,
                 engine: str | None = None, ray_address: str | None = None,
                 ray_place: dict[str, str] | Sequence[str] | None = None,
                 resume: bool = False) -> CompareResults:
    """Run a compare.json, as ``msq compare compare.json -o OUTPUT_PATH`` does.

    compare.json names two dump.json files (one card), two directories (ranks and steps) or,
    with ``rank_id``, two MindSpore kernel dumps. Its keys are msprobe's (``npu_path``,
    ``bench_path``, ``stack_path``) or the API's (``npu_json_path``, ...); relative paths are
    taken from the working directory, else from compare.json's folder when all of them are there
    (all from one folder, never some from each).

    Args:
        path: the compare.json file.
        output_path: output directory (created if missing).
        stack_mode, auto_analyze, fuzzy_match: as for :func:`compare`.
        compat, framework, data_mapping, api_mapping, cell_mapping, layer_mapping, formats,
            label, db, record, workers, sql_dir, noise, noise_label, blame, engine, ray_address,
            ray_place, resume: see the module's help (``help(msq)``).

    Returns:
        One :class:`~msq.result.CompareResult` per compare performed (one for a single card), a
        :class:`~msq.result.CompareResults`: for directories, its ``failed`` lists the pairs
        that could not be compared (``msq compare`` exits 1 on them; a run where every pair
        failed raises :class:`msq.errors.PairsFailedError`).
    """
    from pathlib import Path

    from msq.blame.summary import unpack_blame  # lazy: as compare
    from msq.runner import run_from_compare_json

    results = run_from_compare_json(
        Path(path), Path(output_path), framework=framework, stack_mode=stack_mode,
        auto_analyze=auto_analyze, fuzzy_match=fuzzy_match,
        **_options(compat=compat, data_mapping=data_mapping, api_mapping=api_mapping,
                   cell_mapping=cell_mapping, layer_mapping=layer_mapping, formats=formats,
                   label=label, db=db, record=record, workers=workers, sql_dir=sql_dir,
                   noise=noise, noise_label=noise_label, blame=blame, engine=engine,
                   ray_address=ray_address, ray_place=ray_place, resume=resume))
    unpack_blame(results)  # a directory's pairs' rows reach here packed
    return results


def _options(**given: Any) -> dict[str, Any]:
    """The options the caller set: left out, an option keeps the library's own default."""
    return {name: value for name, value in given.items() if value is not None}
