"""The two calls the single-card pipeline makes into the MindSpore support.

1. :func:`rename_for_match`, once the compare's tables and views exist: ``-am``/``-cm`` rewrite
   the NPU side's MindSpore names into PyTorch's for matching.
2. :func:`pair_rows`, where the pipeline pairs rows: ``-lm`` (a data mapping derived from the
   layer YAML) or a user api YAML (``-am FILE``) pair the rows their own way.
"""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb

from msq.config import Options, SingleInput
from msq.mappings import pair_rows_mapped
from msq.mindspore.api_user import has_user_api, pair_rows_user_api

log = logging.getLogger("msq")


def rename_for_match(con: duckdb.DuckDBPyConnection, opts: Options, framework: str) -> None:
    """-am / -cm on a MindSpore NPU dump: load the mappings as rows, rewrite the match names."""
    if framework == "mindspore" and (opts.api_mapping or opts.cell_mapping):
        # lazy: the mappings load yaml and their tables, which a PyTorch compare never needs
        from msq.mindspore.name_mapping import apply_ms_mappings

        apply_ms_mappings(con, opts)


def pair_rows(con: duckdb.DuckDBPyConnection, inp: SingleInput, opts: Options, framework: str,
              output_dir: Path, suffix: str) -> bool:
    """Fill ``op_pairs``/``compare_rows`` when a MindSpore mapping decides the pairing.

    ``-lm`` (MindSpore NPU dump only) replaces any ``-dm``; a user api YAML applies unless a
    ``-dm`` is given. Returns False when neither applies: the pipeline pairs the rows itself.
    """
    if opts.layer_mapping and framework == "mindspore":
        from msq.mindspore.layer_mapping import apply_layer_mapping  # lazy: as above

        mapping = apply_layer_mapping(con, inp, opts, output_dir, suffix)
        pair_rows_mapped(con, mapping, opts.is_compat)
        return True
    if opts.layer_mapping:
        log.warning("-lm maps MindSpore cells to PyTorch modules; the NPU dump is not MindSpore, "
                    "so -lm is ignored")
    # a user api YAML is loaded only under -am on a MindSpore NPU dump (rename_for_match):
    # otherwise the look-up of the loaded mappings would only cost a query
    if (opts.data_mapping is None and framework == "mindspore" and opts.api_mapping
            and has_user_api(con)):
        pair_rows_user_api(con, opts.is_compat)
        return True
    return False
