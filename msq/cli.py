"""The ``msq`` command: a thin shell over the library.

Every command builds its inputs, calls one library function and prints the result; any
:class:`MsqError` becomes one line on stderr and its exit status (1 error, 2 usage, 3 gate).
"""

from __future__ import annotations

import functools
import logging
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from msq import interrupts, status_line
from msq.console import gate_line, print_summary, render_show, render_table, terminal_text
from msq.errors import ExitStatus, MsqError, printable
from msq.result import failed_message, failed_pairs
from msq.runner import run_from_compare_json
from msq.version import VERSION

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("msq")


def handle_errors(func: F) -> F:
    """Turn library errors into one clean line and a meaningful exit status."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        restore = interrupts.install()
        try:
            done = func(*args, **kwargs)
            interrupts.settle()  # the work is complete: a Ctrl-C from now on changes nothing
            return done
        except MsqError as err:
            if interrupts.received():
                _interrupted()
            click.echo(f"msq: error: {printable(str(err))}", err=True)
            sys.exit(int(err.exit_status))
        except KeyboardInterrupt:
            _interrupted()
        except MemoryError:
            click.echo("msq: error: out of memory; free memory, compare smaller dumps, or use "
                       "fewer --workers", err=True)
            sys.exit(int(ExitStatus.ERROR))
        except Exception as err:
            # Ctrl-C inside a DuckDB query surfaces as RuntimeError("Query interrupted"), inside
            # a process pool as a broken pool: still an interruption, not a bug.
            if interrupts.received():
                _interrupted()
            if _broken_pool(err):
                # a worker (dump reader, tensor metrics, rank pair) was killed: the OOM killer,
                # mostly
                click.echo("msq: error: a worker process died (killed by the system, most often "
                           "for lack of memory); free memory, compare smaller dumps, or use fewer "
                           "--workers", err=True)
                sys.exit(int(ExitStatus.ERROR))
            raise
        finally:
            restore()

    return wrapper  # type: ignore[return-value]


def _broken_pool(err: Exception) -> bool:
    """A process pool's worker died. Its class is looked up, not imported: only a compare that
    ran a pool has imported concurrent.futures.process (and multiprocessing, ~13 ms of a small
    compare's start)."""
    process = sys.modules.get("concurrent.futures.process")
    return process is not None and isinstance(err, process.BrokenProcessPool)


def _interrupted() -> None:
    interrupts.settle()  # the cleanup is done: a second Ctrl-C must not cut the message short
    click.echo(interrupted_line(interrupts.received()), err=True)
    sys.exit(int(ExitStatus.INTERRUPTED))


def interrupted_line(signum: int | None) -> str:
    """The one line of an interrupted run (SIGINT: Ctrl-C; SIGTERM: named)."""
    how = " (SIGTERM)" if signum == signal.SIGTERM else ""
    return f"msq: interrupted{how}; no partial output was kept"


class _PrintableFormatter(logging.Formatter):
    """Log lines carry op names from the dump: keep them on one line, escapes shown, not run."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # logging's method name
        return printable(super().formatMessage(record))


class _LogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """stderr, each record on a line of its own even while a progress line is drawn."""

    def emit(self, record: logging.LogRecord) -> None:
        status_line.break_line()
        super().emit(record)


def setup_logging(verbose: int, quiet: bool) -> None:
    """stderr has warnings and errors; log lines only with -v (-vv: the time of each stage).
    ``quiet`` (-q) drops the summary on stdout, not the warnings."""
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    handler = _LogHandler(sys.stderr)
    handler.setFormatter(_PrintableFormatter("%(asctime)s [%(levelname)s] %(message)s",
                                             "%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger("msq")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(VERSION, prog_name="msq")
@click.option("-f", "--framework", type=click.Choice(["pytorch", "mindspore"]), default=None,
              help="Framework of the NPU-side dump (msprobe spelling: msq -f pytorch compare ...).")
@click.pass_context
def main(ctx: click.Context, framework: str | None) -> None:
    """msq: find which operator first goes wrong between two model dumps (msprobe-compatible)."""
    ctx.ensure_object(dict)
    ctx.obj["framework"] = framework


@main.command("compare")
@click.argument("compare_json", required=False, type=click.Path(path_type=Path))
@click.option("-i", "--input_path", "input_path", type=click.Path(path_type=Path),
              help="compare.json (msprobe's -i); or give it as the first argument.")
@click.option("-o", "--output_path", "output_path", type=click.Path(path_type=Path), required=True,
              help="Output directory (created if missing).")
@click.option("-s", "--stack_mode", is_flag=True, help="Add the NPU_Stack_Info column.")
@click.option("-c", "--compare_only", is_flag=True, help="Skip the advisor file.")
@click.option("-f", "--fuzzy_match", is_flag=True, help="Match ops without their call counters.")
@click.option("-dm", "--data_mapping", type=click.Path(path_type=Path),
              help="YAML of NPU row name -> bench row name.")
@click.option("-am", "--api_mapping", is_flag=False, flag_value="__builtin__", default=None,
              help="MindSpore: map API names to PyTorch (built-in table, or a YAML).")
@click.option("-cm", "--cell_mapping", is_flag=False, flag_value="__builtin__", default=None,
              help="MindSpore: map Cell names to Module names (default rule, or a YAML).")
@click.option("-lm", "--layer_mapping", type=click.Path(path_type=Path),
              help="MindSpore: layer mapping YAML.")
@click.option("--compat", type=click.Choice(["msprobe-1.1"]), default=None,
              help="Reproduce msprobe 1.1.0 cell for cell, its bugs included.")
@click.option("--format", "formats", default="xlsx", show_default=True,
              help="Comma-separated outputs: xlsx, csv, parquet, html (a report).")
@click.option("--db", "db_path", type=click.Path(path_type=Path), envvar="MSQ_DB",
              help="History database (default: msq.duckdb in the output directory).")
@click.option("--no-history", is_flag=True, help="Do not record this compare in a history database.")
@click.option("--label", default=None, help="A label for this compare in the history (e.g. a build).")
@click.option("--workers", type=click.IntRange(1, 512), default=None,
              help="Processes for tensor metrics (default: all cores).")
@click.option("--sql-dir", type=click.Path(path_type=Path), default=None,
              help="Folder of SQL views that replace msq's own by name, laid out like sql/ "
                   "(e.g. DIR/compare/rules/marks.sql).")
@click.option("--noise", "noise", type=click.Path(path_type=Path), default=None,
              help="compare.json of a reference noise run (two bench-side runs of the same "
                   "model): blame's floors come from it (docs/blame.md).")
@click.option("--noise-label", default=None,
              help="A reference noise run recorded in the history with this --label.")
@click.option("--no-blame", is_flag=True, help="Do not work out where the error enters (blame).")
@click.option("--fail-on", type=click.Choice(["red", "suspect"]), default=None,
              help="Exit with status 3 if any row is red, or if the advisor names a suspect.")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Directories: compare the rank x step pairs here, or as tasks on a Ray cluster.")
@click.option("--ray-address", default=None,
              help="--engine ray: the cluster to join (default: $RAY_ADDRESS, else this machine's).")
@click.option("--ray-place", multiple=True, metavar="PREFIX=NODE",
              help="--engine ray: pairs whose NPU rank directory is under PREFIX run on the node "
                   "labelled msq-node=NODE (node-local dumps); repeatable.")
@click.option("--resume", is_flag=True,
              help="Directories: skip the pairs this run already recorded in the history.")
@click.option("-q", "--quiet", is_flag=True,
              help="No summary on stdout; stderr keeps warnings, errors and the gate's line.")
@click.option("-v", "--verbose", count=True,
              help="Log lines on stderr (-vv: also the time of each stage).")
@click.pass_context
@handle_errors
def compare_cmd(ctx: click.Context, compare_json: Path | None, input_path: Path | None,
                output_path: Path, stack_mode: bool, compare_only: bool, fuzzy_match: bool,
                data_mapping: Path | None, api_mapping: str | None, cell_mapping: str | None,
                layer_mapping: Path | None, compat: str | None, formats: str, db_path: Path | None,
                no_history: bool, label: str | None, workers: int | None, sql_dir: Path | None,
                noise: Path | None, noise_label: str | None, no_blame: bool,
                fail_on: str | None, engine: str, ray_address: str | None,
                ray_place: tuple[str, ...], resume: bool, quiet: bool, verbose: int) -> None:
    """Compare the two dumps that COMPARE_JSON names and write the workbook into -o."""
    setup_logging(verbose, quiet)
    source = input_path or compare_json
    if source is None:
        raise click.UsageError("give compare.json as an argument or with -i")
    if input_path and compare_json and input_path != compare_json:
        raise click.UsageError("compare.json given twice (argument and -i); give it once")
    started = time.monotonic()
    results = run_from_compare_json(
        source, output_path, framework=ctx.obj.get("framework"), stack_mode=stack_mode,
        auto_analyze=not compare_only, fuzzy_match=fuzzy_match, data_mapping=data_mapping,
        api_mapping=_mapping_flag(api_mapping), cell_mapping=_mapping_flag(cell_mapping),
        layer_mapping=layer_mapping, compat=compat, formats=formats, db=db_path,
        record=not no_history, label=label, workers=workers, sql_dir=sql_dir, engine=engine,
        ray_address=ray_address, ray_place=list(ray_place) or None, resume=resume or None,
        noise=noise, noise_label=noise_label, blame=not no_blame)
    print_summary(results, quiet=quiet, seconds=time.monotonic() - started)
    empty = [r for r in results if r.nothing_compared]
    for res in empty:  # not a pass (the default mode): say so, and exit 1
        title = res.title
        click.echo(f"msq: error: {title + ': ' if title else ''}{printable(res.nothing_compared)}",
                   err=True)
    failed = failed_pairs(results)
    if failed:  # a pair that could not be compared: the run is not a pass either (exit 1)
        click.echo(f"msq: error: {printable(failed_message(failed, len(results)))}", err=True)
    if empty:
        sys.exit(int(ExitStatus.ERROR))
    tripped = gate_line(results, fail_on) if fail_on else None
    if tripped is not None:  # on stderr even with -q: the one line a CI log must show
        click.echo(tripped, err=True)
    if failed:  # an error outranks the gate: the gate saw only the pairs compared
        sys.exit(int(ExitStatus.ERROR))
    if tripped is not None:
        sys.exit(int(ExitStatus.ACCURACY_GATE))


_DB_OPTION = click.option(
    "--db", "db_path", type=click.Path(path_type=Path), envvar="MSQ_DB",
    help="History database (default: $MSQ_DB, else msq.duckdb in the working directory).")
_FORMAT_OPTION = click.option(
    "--format", "fmt", type=click.Choice(["table", "csv", "json", "parquet"]), default="table",
    show_default=True, help="table (fixed-width text), csv, json (an array) or parquet (needs -o).")
_OUTPUT_OPTION = click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
                              help="Write the result to this file instead of printing it.")


@main.command("sql")
@click.argument("query")
@_DB_OPTION
@_FORMAT_OPTION
@_OUTPUT_OPTION
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors on stderr.")
@click.option("-v", "--verbose", count=True, help="More log lines.")
@handle_errors
def sql_cmd(query: str, db_path: Path | None, fmt: str, output: Path | None, quiet: bool,
            verbose: int) -> None:
    """Query the history database with read-only SQL.

    QUERY may read the tables compares and result_rows and the views runs, op_trend,
    first_divergence and regressions (docs/schema.md).
    """
    setup_logging(verbose, quiet)
    _print_query(db_path, query, fmt, output)


@main.command("runs")
@_DB_OPTION
@click.option("--label", default=None, help="Only the compares recorded with this label.")
@_FORMAT_OPTION
@_OUTPUT_OPTION
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors on stderr.")
@click.option("-v", "--verbose", count=True, help="More log lines.")
@handle_errors
def runs_cmd(db_path: Path | None, label: str | None, fmt: str, output: Path | None, quiet: bool,
             verbose: int) -> None:
    """List the compares recorded in the history database.

    One line per compare: id, time, label, mode, rank, step, rows, red, yellow, first suspect.
    """
    with interrupts.deferred():
        from msq.history import runs_sql  # lazy: as in _print_query

    setup_logging(verbose, quiet)
    _print_query(db_path, runs_sql(label), fmt, output)


@main.command("show")
@click.argument("target", required=False)
@_DB_OPTION
@click.option("--limit", type=click.IntRange(0), default=20, show_default=True,
              help="Red and yellow rows shown per compare (0: all of them).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors on stderr.")
@click.option("-v", "--verbose", count=True, help="More log lines.")
@handle_errors
def show_cmd(target: str | None, db_path: Path | None, limit: int, quiet: bool,
             verbose: int) -> None:
    """Show a compare: its summary, its red and yellow rows and the rules that fired; for a
    directory run, a line per rank and step first.

    TARGET is a compare id of the history, or an output folder (its history, else its CSV or
    Parquet outputs); without it, the latest run of the history.
    """
    from msq import history  # lazy: as in _print_query
    from msq.history.show import show_compare, show_latest_run

    setup_logging(verbose, quiet)
    cap = limit or None
    if target is not None and target.isdigit():
        run = show_compare(history.resolve_db_path(db_path), int(target), cap)
    elif target is None or Path(target).suffix == ".duckdb":
        run = show_latest_run(Path(target) if target else history.resolve_db_path(db_path),
                              None, cap)
    else:
        run = _show_folder(Path(target), db_path, cap)
    click.echo(render_show(run), nl=False)


def _show_folder(folder: Path, db_path: Path | None, limit: int | None) -> Any:
    """An output folder: the history it was recorded in (--db / MSQ_DB, else its own), else
    its CSV or Parquet outputs."""
    from msq import history  # lazy: as in _print_query
    from msq.export.readback import show_folder
    from msq.history.show import show_latest_run

    if not folder.is_dir():
        raise click.UsageError(f"{folder}: not a compare id, a history file or an output folder")
    db = history.resolve_db_path(db_path, folder)
    if db.is_file():
        return show_latest_run(db, folder, limit)
    return show_folder(folder, limit)


def _print_query(db_path: Path | None, query: str, fmt: str, output: Path | None) -> None:
    """Run a read-only query on the history database; print it, or write it to ``output``."""
    with interrupts.deferred():  # a Ctrl-C inside duckdb's initialisation aborts Python
        from msq import history  # lazy: duckdb loads after msq compare's early tensor pool starts

    path = history.resolve_db_path(db_path)
    if output is not None:
        history.check_output(path, output)  # before the query runs
    if fmt == "table":
        text = render_table(history.query(path, query))
        if output is None:
            click.echo(text, nl=False)
        else:
            history.write_text(path, output, text)
    elif output is None:
        click.echo(terminal_text(history.export_text(path, query, fmt)), nl=False)
    else:
        history.export(path, query, fmt, output)


@main.command("report")
@_DB_OPTION
@click.option("--compare", "compare_id", type=int, default=None,
              help="One compare: its id, as msq runs lists it.")
@click.option("--label", default=None,
              help="One run: the newest compare of each step and rank recorded with this label.")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="The HTML file to write.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors on stderr.")
@click.option("-v", "--verbose", count=True, help="More log lines.")
@handle_errors
def report_cmd(db_path: Path | None, compare_id: int | None, label: str | None, output: Path,
               quiet: bool, verbose: int) -> None:
    """Write a self-contained HTML report from the history database.

    One compare (--compare), one run (--label: every step and rank), or by default the newest
    compare's run. The file opens offline in a browser (docs/report.md).
    """
    from msq import history  # lazy: as in _print_query
    from msq.report import write_history_report  # lazy: the report loads pyarrow and numpy

    setup_logging(verbose, quiet)
    if compare_id is not None and label is not None:
        raise click.UsageError("give --compare or --label, not both")
    shown = write_history_report(history.resolve_db_path(db_path), output,
                                 compare_id=compare_id, label=label)
    if not quiet:
        click.echo(f"wrote {output} ({shown} compare{'' if shown == 1 else 's'})")


def _mapping_flag(value: str | None) -> str | bool | None:
    if value is None:
        return None
    return True if value == "__builtin__" else value


if __name__ == "__main__":  # pragma: no cover
    main()
