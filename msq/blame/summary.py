"""What blame tells the user: the local sources (worst first, and the first in execution order),
the verdict counts, how many inputs were linked, and the rows a directory compare weighs across
ranks (collectives). A plain record, so that it crosses process boundaries with the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import duckdb

#: Local sources kept in a summary (worst first); the blame outputs and the history hold them all.
MAX_SOURCES = 1000
#: Columns of a blame row that a summary carries for the cross-rank pass (see msq.blame.ranks).
ROW_FIELDS = ("out_seq", "op_seq", "op_name", "npu_name", "io", "role", "direction", "is_module",
              "collective", "err_kind", "input_err", "output_err", "floor", "floor_source",
              "amplification", "verdict", "reason", "link", "candidates", "via", "band")


@dataclass
class BlameSummary:
    """Blame of one compare (one rank pair of one step).

    Attributes:
        counts: rows per verdict (local, inherited, clean).
        sources: the local rows, worst first (at most ``MAX_SOURCES``), as dicts of ``ROW_FIELDS``.
        collectives: the rows of collective and point-to-point ops (the cross-rank pass needs them).
        inputs: NPU tensor inputs; linked: those linked to a producing output.
        links: linked inputs per link kind (hash, md5, statistics, reshape, external).
        noise_source: the reference noise run the floors came from, or None (dtype floors).
        floor_factor, amp_limit: the thresholds used (see msq.blame).
        bands: ``(npu_name, band)`` of the rows that add an error over their inputs: the noise
            bands this compare gives when it is a reference noise run (msq.blame.noise).
    """

    counts: dict[str, int] = field(default_factory=dict)
    sources: list[dict[str, Any]] = field(default_factory=list)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    inputs: int = 0
    linked: int = 0
    links: dict[str, int] = field(default_factory=dict)
    noise_source: str | None = None
    floor_factor: float = 0.0
    amp_limit: float = 0.0
    bands: list[tuple[str, float]] = field(default_factory=list)
    rank: int | None = None  # the compare's rank (directory compares; None for one card)

    @property
    def first(self) -> dict[str, Any] | None:
        """The local source that comes first in execution order (None when there is none)."""
        return min(self.sources, key=lambda s: (s["op_seq"], s["out_seq"]), default=None)


#: The order of a summary's verdict counts: local, inherited, clean (any other after them).
VERDICT_ORDER = ("CASE verdict WHEN 'local' THEN 0 WHEN 'inherited' THEN 1 WHEN 'clean' THEN 2 "
                 "ELSE 3 END, verdict")


def _dicts(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def summarize(con: duckdb.DuckDBPyConnection, bands: bool = True) -> BlameSummary:
    """The summary of the blame tables in ``con`` (see :func:`msq.blame.compute.run_blame`);
    ``bands``: with the rows' noise bands (a reference noise run's compare needs them)."""
    cols = ", ".join(ROW_FIELDS)
    # in a fixed order, the most severe first (the JSON's keys): a GROUP BY's follows the rows'
    # order in the table
    counts = dict(con.execute("SELECT verdict, count(*) FROM blame_rows WHERE verdict IS NOT NULL "
                              f"GROUP BY verdict ORDER BY {VERDICT_ORDER}").fetchall())
    links = dict(con.execute("SELECT how, count(*) FROM blame_edges WHERE side = 'npu' "
                             "GROUP BY how ORDER BY how").fetchall())
    factor, limit, noise = con.execute(
        "SELECT floor_factor, amp_limit, noise_source FROM blame_params").fetchone() or (0, 0, None)
    return BlameSummary(
        counts={k: int(v) for k, v in counts.items()},
        sources=_dicts(con, f"SELECT {cols} FROM blame_rows WHERE verdict = 'local' "
                            f"ORDER BY output_err DESC, op_seq, out_seq LIMIT {MAX_SOURCES}"),
        collectives=_dicts(con, f"SELECT {cols} FROM blame_rows WHERE collective "
                                "ORDER BY out_seq"),
        inputs=int(sum(links.values())), linked=int(sum(v for k, v in links.items()
                                                        if k != "external")),
        links={k: int(v) for k, v in links.items()}, noise_source=noise,
        floor_factor=float(factor), amp_limit=float(limit),
        bands=[(str(n), float(b)) for n, b in con.execute(
            "SELECT npu_name, band FROM blame_rows WHERE band > 0 ORDER BY out_seq").fetchall()]
        if bands else [])


def summarize_recorded(con: duckdb.DuckDBPyConnection, catalog: str,
                       compare_id: int) -> tuple[BlameSummary, str] | None:
    """A recorded compare's summary and run id, from the history attached as ``catalog`` (what
    ``--resume`` brings to the run's blame for the pairs it skips); None without blame rows."""
    rows, edges = f"{catalog}.blame_rows", f"{catalog}.blame_edges"
    head = con.execute(f"SELECT any_value(run_id), any_value(floor_factor), any_value(amp_limit), "
                       f"any_value(noise_source), count(*) FROM {rows} WHERE compare_id = ?",
                       [compare_id]).fetchall()
    if not head or not head[0][4]:
        return None
    run_id, factor, limit, noise, _ = head[0]
    cols = ", ".join(ROW_FIELDS)
    where = f"FROM {rows} WHERE compare_id = {int(compare_id)}"
    counts = dict(con.execute(f"SELECT verdict, count(*) {where} AND verdict IS NOT NULL "
                              f"GROUP BY verdict ORDER BY {VERDICT_ORDER}").fetchall())
    links = dict(con.execute(f"SELECT how, count(*) FROM {edges} WHERE compare_id = ? "
                             "AND side = 'npu' GROUP BY how ORDER BY how", [compare_id]).fetchall())
    summary = BlameSummary(
        counts={k: int(v) for k, v in counts.items()},
        sources=_dicts(con, f"SELECT {cols} {where} AND verdict = 'local' "
                            f"ORDER BY output_err DESC, op_seq, out_seq LIMIT {MAX_SOURCES}"),
        collectives=_dicts(con, f"SELECT {cols} {where} AND collective ORDER BY out_seq"),
        inputs=int(sum(links.values())), linked=int(sum(v for k, v in links.items()
                                                        if k != "external")),
        links={k: int(v) for k, v in links.items()}, noise_source=noise,
        floor_factor=float(factor or 0.0), amp_limit=float(limit or 0.0))
    return summary, str(run_id)


def fmt_err(value: float | None) -> str:
    """An error figure for people: 3 significant digits, 0, inf or "-"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0:
        return "0"
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def sheet_row(out_seq: int) -> int:
    """The workbook row that holds output row ``out_seq`` (row 1 is the header)."""
    return int(out_seq) + 2


def source_line(src: dict[str, Any], rank: int | None = None) -> str:
    """One local source in words: where, and why (input error -> output error, amplification)."""
    where = f"rank {rank}: " if rank is not None else ""
    head = f"{where}{src['npu_name']} (sheet row {sheet_row(src['out_seq'])}): "
    floor = f"floor {fmt_err(src['floor'])} ({src['floor_source']})"
    if src.get("input_err") is None:
        # an input with no producer in the dump (external): nothing upstream to compare with,
        # so no "input error - -> ... (x-)" figures, but what it is and its own error
        return f"{head}{src.get('role') or 'input'} with error {fmt_err(src['output_err'])}, {floor}"
    return (f"{head}input error {fmt_err(src['input_err'])} -> output error "
            f"{fmt_err(src['output_err'])} (x{fmt_err(src.get('amplification'))}), {floor}")


def linked_line(summary: BlameSummary) -> str:
    """How many inputs blame could link to the op that produced them."""
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(summary.links.items()) if k != "external")
    return (f"{summary.linked} of {summary.inputs} tensor inputs linked to their producer"
            f"{f' ({kinds})' if kinds else ''}")


#: Local sources the advisor file names.
ADVISOR_SOURCES = 5


def counts_line(summary: BlameSummary) -> str:
    """``1 local source, 248 inherited, 408 clean``."""
    local = summary.counts.get("local", 0)
    return (f"{local} local source{'' if local == 1 else 's'}, "
            f"{summary.counts.get('inherited', 0)} inherited, {summary.counts.get('clean', 0)} clean")


def advisor_text(summary: BlameSummary) -> str:
    """The advisor file's blame section: the top local sources, each with why."""
    head = "Where the error enters (blame, local sources worst first; see docs/blame.md):\n"
    if not summary.sources:
        return head + ("  no local source: every difference is within its floor or explained by "
                       "its inputs\n")
    lines = [f"  {i}. {source_line(src, summary.rank)}; {src['reason']}"
             for i, src in enumerate(summary.sources[:ADVISOR_SOURCES], start=1)]
    more = len(summary.sources) - ADVISOR_SOURCES
    if more > 0:
        lines.append(f"  ... and {more} more (the blame sheet and the history's blame view "
                     "list them all)")
    return head + "\n".join(lines) + "\n"
