"""What the CLI prints: the summary of ``msq compare``, the text tables of ``msq sql``/``msq runs``.

Rendering lives here, at the CLI's edge; the library returns data (:class:`msq.result.CompareResult`,
:class:`msq.history.Table`).
"""

from __future__ import annotations

import datetime as dt
import re
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from msq.errors import printable, printable_lines
from msq.result import CompareResult, ShownCompare, ShownRun, failed_pairs

if TYPE_CHECKING:  # msq.history loads duckdb: only when a history command runs
    from msq.history import Table


def print_summary(results: Sequence[CompareResult], *, quiet: bool = False,
                  seconds: float | None = None) -> None:
    """One block per compare: rows, matches, marks, the first suspect (by the sheet row that
    holds it) and the files written; a run of several compares ends with a total line."""
    if quiet:
        return
    for res in results:
        if res.mode == "kernel":
            for path in res.files:
                click.echo(f"wrote {path}")
            continue
        title = res.title or ""
        click.echo(f"msq compare{(' ' + title) if title else ''}: {res.mode} mode, {res.rows} rows "
                   f"({_counts(res)}), {res.red} red, {res.yellow} yellow, {res.seconds:.1f}s")
        for line in verdict_lines(res):
            click.echo(f"  {printable(line)}")
        _print_blame(res)
        for path in res.files:
            click.echo(f"  wrote {path}")
        if res.history_db is not None:
            click.echo(f"  recorded as compare {res.history_id} in {res.history_db}")
        if res.rows == 0:
            click.echo("  nothing to compare: no rows matched (no workbook written)")
    _print_run_blame(results)
    total = total_line(results, seconds)
    if total is not None:
        click.echo(total)


def _counts(res: CompareResult) -> str:
    bench_only = f", {res.unmatched_bench} bench-only" if res.unmatched_bench else ""
    return f"{res.matched} matched, {res.unmatched_npu} NPU-only{bench_only}"


def total_line(results: Sequence[CompareResult], seconds: float | None = None) -> str | None:
    """The last line of a directory run: every pair's counts added up, how many pairs failed
    (``results.failed``) and the first one, and where the first suspect is (pairs in step and
    rank order). None for a single compare."""
    pairs = [r for r in results if r.mode != "kernel"]
    failed = failed_pairs(results)
    if not pairs or (len(pairs) == 1 and not pairs[0].title and not failed):
        return None
    total = CompareResult(mode="", rows=sum(r.rows for r in pairs),
                          matched=sum(r.matched for r in pairs),
                          unmatched_npu=sum(r.unmatched_npu for r in pairs),
                          unmatched_bench=sum(r.unmatched_bench for r in pairs))
    red, yellow = sum(r.red for r in pairs), sum(r.yellow for r in pairs)
    took = seconds if seconds is not None else sum(r.seconds for r in pairs)
    first = next((r for r in pairs if r.suspect_ref is not None), None)
    where = f"first suspect in {_where(first)}" if first is not None else "no suspect"
    # a failed pair is on the total line: the line must never read as every pair's
    failures = (f"{len(failed)} failed ({'first ' if len(failed) > 1 else ''}"
                f"{printable(failed[0].message)}), " if failed else "")
    return (f"msq compare total: {_plural(len(pairs), 'compare')}, {failures}{total.rows} rows "
            f"({_counts(total)}), {red} red, {yellow} yellow, {took:.1f}s; {where}")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _where(res: CompareResult) -> str:
    return res.title or (f"rank {res.rank}" if res.rank is not None else "the compare")


def gate_line(results: Sequence[CompareResult], fail_on: str) -> str | None:
    """The line ``--fail-on`` prints on stderr when it trips: which rule, how many rows, and the
    first one (its sheet row and name; for red, the rules that made it red). None: passed."""
    pairs = [r for r in results if r.mode != "kernel"]
    several = len(pairs) > 1
    in_pairs = ""
    if fail_on == "red":
        hit = [r for r in pairs if r.red]
        if several:
            in_pairs = f" in {len(hit)} of {len(pairs)} compares"
        count = f"{_plural(sum(r.red for r in hit), 'red row')}{in_pairs}"
        first = hit[0].first_red if hit else None
        why = f" ({first.rules})" if first is not None and first.rules else ""
    else:
        hit = [r for r in pairs if r.suspect_ref is not None]
        if several:
            in_pairs = f" in {len(hit)} of {len(pairs)} compares"
        count = (f"the advisor names a suspect{in_pairs} "
                 f"({_plural(sum(r.failing for r in hit), 'failing row')})")
        first, why = (hit[0].suspect_ref if hit else None), ""
    if not hit:
        return None
    line = f"msq: accuracy gate tripped (--fail-on {fail_on}): {count}"
    if first is None:  # a result that does not say which row (it always should)
        return line
    place = f"{_where(hit[0])} " if several else ""
    return f"{line}; first: {place}{first.label}: {printable(first.name)}{why}"


def _print_blame(res: Any) -> None:
    """Where the error enters in this compare, and how much blame could link."""
    summary = getattr(res, "blame", None)
    if summary is None:
        return
    for line in blame_lines(summary):
        click.echo(f"  {line}")
    run = getattr(res, "run_blame", None)
    # the JSON of a run of one compare (a run of several: after the run's line)
    if run is not None and run.compares < 2 and getattr(res, "blame_json", None) is not None:
        click.echo(f"  wrote {res.blame_json}")


def blame_lines(summary: Any) -> list[str]:
    """A compare's blame (a :class:`msq.blame.summary.BlameSummary`) in words: where the error
    enters, the worst local source when it is another row, the verdict counts and links (what
    ``msq compare`` prints of a compare, and ``msq show`` of a recorded one)."""
    from msq.blame.summary import counts_line, linked_line, source_line

    lines = []
    first, worst = summary.first_and_worst()
    if first is not None and worst is not None:
        lines.append(f"error enters at: {printable(source_line(first))}")
        # the first source in execution order may be a small one (e.g. a rounding that enters
        # early); the worst one, which the advisor and blame_rank 1 name, is said too
        if worst["out_seq"] != first["out_seq"]:  # another row than the first
            lines.append(f"worst local source: {printable(source_line(worst))}")
    lines.append(f"blame: {counts_line(summary)}; {linked_line(summary)}")
    return lines


def run_blame_line(run: Any) -> str:
    """Where the error enters first over a run of several compares (a
    :class:`msq.blame.ranks.RunBlame`), over every rank and step."""
    from msq.blame.summary import source_line

    first = run.first
    if first is None:
        return (f"blame over {run.compares} compares: no local source (every difference is "
                "within its floor or explained by its inputs)")
    rank = f"rank {first['rank']}" if first["rank"] is not None else "rank -"
    step = f", step {first['step']}" if first["step"] is not None else ""
    return (f"blame over {run.compares} compares: the error enters first at {rank}{step}: "
            f"{printable(source_line(first))}; {run.n_sources} local "
            f"source{'' if run.n_sources == 1 else 's'} in all")


def _print_run_blame(results: Sequence[Any]) -> None:
    """A run of several compares (with ``--resume``, those it skipped too): where the error
    enters first, over every rank and step."""
    runs = [r.run_blame for r in results if getattr(r, "run_blame", None) is not None]
    if not runs or runs[0].compares < 2:
        return
    click.echo(run_blame_line(runs[0]))
    click.echo(f"  wrote {results[0].blame_json}")


#: Why rows are unmatched (the default mode's reason codes, sql/compare/rules/unmatched_reasons.sql)
#: as the console counts them; {other} is the side that lacks the row.
_REASONS = {
    "dtype": "dtype cannot be compared",
    "shape": "shape differs",
    "op_differs": "another row of its op differs",
    "args": "the {other} op has other arguments",
    "taken": "the {other} row is paired elsewhere",
    "call": "no {other} op at that call",
    "api": "the {other} lacks the API",
    "extra": "no {other} argument at that place",
    "dm_missing": "-dm maps it to a name the bench lacks",
    "dm_unnamed": "not named in the -dm mapping",
}
_SIDES = {"npu_only": ("NPU-only", "bench"), "npu_extra": ("NPU-only", "bench"),
          "bench_only": ("bench-only", "NPU")}


def verdict_lines(res: CompareResult) -> list[str]:
    """The suspect (with the rule that marked it), or why there is none; why rows are unmatched.

    "Every row meets the accuracy rules" is said only when no row is red or yellow and at least
    one row was compared.
    """
    lines = []
    suspect = res.suspect_ref
    if suspect is not None:
        lines.append(f"first suspect: {suspect.label}: {suspect.name}")
        if res.suspect_reason:
            lines.append(f"  {res.suspect_reason}")
    elif res.rows and not res.matched:
        lines.append("no suspect: nothing was compared (no row has a counterpart)")
    elif res.red or res.yellow:  # --compat: msprobe's colours and its accuracy rule disagree
        lines.append(f"no suspect by msprobe's accuracy rule, but {res.red} red and {res.yellow} "
                     "yellow rows: read them in the workbook")
    elif res.rows:
        lines.append("no suspect: every row meets the accuracy rules")
    counts: dict[str, dict[str, int]] = {}
    for (kind, why), n in res.unmatched_reasons.items():
        side, other = _SIDES.get(kind, (kind, "other side"))
        label = _REASONS.get(why, why).format(other=other)
        counts.setdefault(side, {})
        counts[side][label] = counts[side].get(label, 0) + n
    for side, labels in counts.items():
        parts = ", ".join(f"{n} {label}"
                          for label, n in sorted(labels.items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(f"{side}: {sum(labels.values())} rows ({parts})")
    return lines


# --------------------------------------------------------------------------------------------
# fixed-width text tables


def format_value(value: Any) -> str:
    """One cell as text: NULL, shortest round-trip floats, times to the second, escaped newlines."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    text = str(value)
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    # any other control character (terminal escapes in an op name) is shown, not sent
    return printable(text)


_NUMERIC = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|"
                      r"UBIGINT|UHUGEINT|FLOAT|DOUBLE|DECIMAL.*)$")


def render_table(table: Table) -> str:
    """A fixed-width text table: header, dashes, rows (numbers right-aligned), row count."""
    if not table.columns:
        return "OK\n"
    cells = [[format_value(v) for v in row] for row in table.rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(table.columns)]
    right = [bool(_NUMERIC.match(t)) for t in table.types]
    lines = [_line(table.columns, widths, [False] * len(widths)),
             _line(["-" * w for w in widths], widths, right)]
    lines += [_line(r, widths, right) for r in cells]
    count = len(table.rows)
    lines.append(f"({count} row{'' if count == 1 else 's'})")
    return "\n".join(lines) + "\n"


def terminal_text(text: str) -> str:
    """CSV or JSON text printed to the terminal: a dump's control characters shown as ``\\xNN``
    (a file written with ``-o`` keeps them)."""
    return printable_lines(text)


def _line(values: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    parts = [v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)]
    return "  ".join(parts).rstrip()


# --------------------------------------------------------------------------------------------
# msq show: a recorded compare in at most 100 columns

WIDTH = 100
_ROW_HEAD = ("      row  mark    ", "NPU name, then why it is marked")


def render_show(run: ShownRun) -> str:
    """A compare (or a directory run: a line per rank and step first), its marked rows with
    their rules, readable in :data:`WIDTH` columns (a long name or rule wraps; paths do not)."""
    lines: list[str] = []
    if len(run.compares) == 1:
        lines += _compare_block(run.compares[0], run.source)
    else:
        lines += _run_block(run)
    for shown in run.compares:
        lines += _marked_block(shown, titled=len(run.compares) > 1)
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _what(shown: ShownCompare) -> str:
    bits = [f"{shown.mode} mode", "--compat " + shown.compat if shown.compat else "default"]
    if shown.label:
        bits.append(f"label {printable(shown.label)}")
    if shown.started_at is not None:
        bits.append(shown.started_at.isoformat(sep=" ", timespec="seconds"))
    if shown.seconds is not None:
        bits.append(f"{shown.seconds:.1f}s")
    return ", ".join(bits)


def _shown_counts(shown: ShownCompare) -> str:
    bench_only = f", {shown.bench_only} bench-only" if shown.bench_only else ""
    return (f"{shown.rows} rows ({shown.matched} matched, {shown.npu_only} NPU-only{bench_only}),"
            f" {shown.red} red, {shown.yellow} yellow")


def _suspect_text(shown: ShownCompare) -> str:
    if shown.suspect is None:
        return "no suspect"
    where = f"{shown.suspect_label}: " if shown.suspect_label else ""
    return f"{where}{printable(shown.suspect)}"


def _compare_block(shown: ShownCompare, source: str) -> list[str]:
    name = f"compare {shown.compare_id}" if shown.compare_id is not None else "compare"
    title = f" ({shown.title})" if shown.title else ""
    lines = [f"{name}{title}: {_what(shown)}"]
    if shown.npu_path:
        lines += [f"  NPU:   {shown.npu_path}", f"  bench: {shown.bench_path}"]
    lines.append(f"  {_shown_counts(shown)}")
    lines += _wrap(f"first suspect: {_suspect_text(shown)}", "  ", "    ")
    if shown.blame is not None:
        for line in blame_lines(shown.blame):
            lines += _wrap(line, "  ", "    ")
    for i, path in enumerate(shown.files):
        lines.append(f"  {'files:' if i == 0 else '      '} {path}")
    lines.append(f"  read from {source}")
    return lines


def _run_block(run: ShownRun) -> list[str]:
    first = run.compares[0]
    ids = [c.compare_id for c in run.compares if c.compare_id is not None]
    id_text = f" (ids {min(ids)}-{max(ids)})" if ids else ""
    total = ShownCompare(mode=first.mode, rows=sum(c.rows for c in run.compares),
                         matched=sum(c.matched for c in run.compares),
                         npu_only=sum(c.npu_only for c in run.compares),
                         bench_only=sum(c.bench_only for c in run.compares),
                         red=sum(c.red for c in run.compares),
                         yellow=sum(c.yellow for c in run.compares))
    started = min((c.started_at for c in run.compares if c.started_at is not None), default=None)
    what = _what(ShownCompare(mode=first.mode, compat=first.compat, label=first.label,
                              started_at=started))
    lines = [f"run of {len(run.compares)} compares{id_text}: {what}", f"  {_shown_counts(total)}"]
    if run.blame is not None:
        lines += _wrap(run_blame_line(run.blame), "  ", "    ")
    lines += [f"  read from {run.source}", ""]
    head = ["step", "rank", "id", "rows", "red", "yellow"]
    cells = [[_num(c.step), _num(c.rank), _num(c.compare_id), str(c.rows), str(c.red),
              str(c.yellow)] for c in run.compares]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(head)]
    left = sum(widths) + 2 * len(widths)
    lines.append("  " + _line([*head, "first suspect"], [*widths, 0], [False] * 7))
    lines.append("  " + _line(["-" * w for w in [*widths, WIDTH - 2 - left]],
                              [*widths, 0], [True] * 7))
    for shown, row in zip(run.compares, cells):
        suspect = _fit(_suspect_text(shown), WIDTH - 2 - left)
        lines.append("  " + _line([*row, suspect], [*widths, 0], [True] * 6 + [False]))
    return lines


def _marked_block(shown: ShownCompare, titled: bool) -> list[str]:
    where = f"{shown.title or 'compare'}: " if titled else ""
    if not shown.marked_total:
        return ["", f"{where}no red or yellow row"] if titled else ["", "no red or yellow row"]
    lines = ["", f"{where}red and yellow rows ({shown.marked_total}):",
             _ROW_HEAD[0] + _ROW_HEAD[1],
             "  " + "-" * 7 + "  " + "-" * 6 + "  " + "-" * (WIDTH - len(_ROW_HEAD[0]))]
    indent = " " * len(_ROW_HEAD[0])
    for row in shown.marked:
        first = f"  {row.label.removeprefix('row '):>7}  {row.mark:<6}  "
        name = _wrap(printable(row.name), first, indent)
        reason = _wrap(printable(row.reason), indent, indent) if row.reason else []
        lines += name + reason
    more = shown.marked_total - len(shown.marked)
    if more > 0:
        lines.append(f"  ... and {more} more (msq show --limit 0 lists every one)")
    return lines


def _wrap(text: str, first: str, rest: str) -> list[str]:
    """``text`` after ``first``, continued after ``rest``, in lines of at most :data:`WIDTH`
    columns: at spaces, and anywhere in a word too long for a line (an op name)."""
    wrapper = textwrap.TextWrapper(width=WIDTH, initial_indent=first, subsequent_indent=rest,
                                   break_on_hyphens=False)
    return wrapper.wrap(text) or [first]


def _fit(text: str, room: int) -> str:
    """``text`` cut in the middle to ``room`` columns (a name's op and its tail both show)."""
    if len(text) <= room or room < 10:
        return text
    keep = room - 1
    return text[: keep // 2] + "…" + text[len(text) - (keep - keep // 2):]


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)
