"""Blame: where the error enters (local) and where it is only passed on (inherited).

Every compared row gets one comparable error figure (the ``row_error`` view). Blame links each
op's inputs to the earlier outputs that produced them (per side: content hash in tensor mode,
md5 in md5 mode, the exact statistics otherwise), and calls an output row *local* when its error
is beyond the noise floor (its dtype's, or a reference noise run's) by ``FLOOR_FACTOR`` and beyond
``AMP_LIMIT`` times the error its inputs bring; *inherited* when its inputs explain it; *clean*
within the floor. Across ranks, a collective's output is explained by the inputs of every rank.
See docs/blame.md for the method and its limits.

Modules: :mod:`msq.blame.compute` (the compare's blame tables), :mod:`msq.blame.summary` (what
the console, the advisor and the outputs say), :mod:`msq.blame.ranks` (directory compares: every
rank and step together), :mod:`msq.blame.noise` (noise bands of a reference noise run).
"""

from __future__ import annotations

#: ``local`` needs an error beyond this many times the row's floor ...
FLOOR_FACTOR = 4.0
#: ... and beyond this many times the error its inputs bring (what an op may amplify).
AMP_LIMIT = 100.0

#: What a batch's stored ``blame_rows`` (msq.blame.compute.batch_rows_select) holds as codes,
#: not texts: {column: the SQL of its text, as blame_rows shows it (sql/compare/blame/
#: blame_rows.sql)}. Its reason is blame_judged's kind (an ENUM ``blame_reason``), its
#: floor_source a ``blame_floor`` (or its text, where the batch has a dtype the ENUM lacks:
#: msq.blame.compute.materialize_rows); each reader of the batch's rows makes the texts of the
#: rows it reads (its pairs' views, msq.pipeline.pair_views; the blame sheet's and the
#: summaries' rows; the history's SELECT, msq.pair_tables._batch_history_rows). A batch's
#: amp_limit is :data:`AMP_LIMIT` (msq.blame.compute.run_batch_blame), a constant here: its text
#: made once, not a row's each (blame_params read by a subquery: ~+8 M instructions of a 6-pair
#: root batch's history rows, bench/README "Session 29: blame").
BATCH_TEXTS = {
    "reason": f"blame_reason_text(reason, err_kind, via, {AMP_LIMIT!r}::DOUBLE)",
    "floor_source": "floor_source::VARCHAR"}


def batch_texts() -> str:
    """``REPLACE (...)`` of a ``SELECT *`` of a batch's stored ``blame_rows``: its rows with
    their texts (:data:`BATCH_TEXTS`), as blame_rows shows them."""
    return "REPLACE ({})".format(", ".join(f"{sql} AS {column}" for column, sql in BATCH_TEXTS.items()))
