#!/usr/bin/env python3
"""Benchmark the HTML report on the 100k-row statistics workload (bench/work/stat).

    .venv/bin/python bench/report_bench.py                 # 5 runs of each figure
    .venv/bin/python bench/report_bench.py --repeat 9 --wait-idle 600

Targets (issue 14): the HTML file under 15 MB, written in under 1.5 s, first chart drawn in
under 3 s in headless Chromium. Measured:

- compare: ``msq compare compare.json -o OUT --format xlsx,html -vv`` once (it records the
  history that ``msq report`` reads); its log line ``report: N rows, X MB in T s`` is the time
  the compare spent on the HTML file (payload and write);
- write: ``msq.report.write_history_report`` in this process (payload from the history file,
  and the write), ``--repeat`` times, wall and CPU time (all threads: the steadier figure on a
  shared machine); and the whole ``msq report`` command once per run;
- open: the file opened in a fresh page of headless Chromium from its file:// URL: the time of
  the chart's first draw since navigation started (``window.msqReport.firstChartAt``, which
  includes reading and parsing the file), and the time until the whole page (table too) is
  ready, from Python.

Needs the repository's .venv (msq and playwright) and Debian's chromium. Appends the figures to
bench/work/report_results.jsonl. Do not run it while others run heavy jobs; the 1-minute load
average is printed with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import run as bench_run  # bench/run.py: workload generation, idle wait

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def load() -> float:
    return os.getloadavg()[0]


def compare_once(wdir: Path, out: Path) -> float | None:
    """Run the compare with --format xlsx,html; return the seconds it logged for the report."""
    cmd = bench_run.default_msq_cmd() + ["compare", "compare.json", "-o", str(out),
                                         "--format", "xlsx,html", "-vv"]
    proc = subprocess.run(cmd, cwd=wdir, capture_output=True, text=True, check=True)
    found = re.search(r"report: (\d+) rows, ([\d.]+) MB in ([\d.]+)s", proc.stderr)
    return float(found.group(3)) if found else None


def cpu_seconds() -> float:
    """User + system CPU time of this process, all its threads (DuckDB's and zlib's too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_times(db: Path, html: Path, repeat: int,
                wait: float) -> tuple[list[float], list[float], list[float]]:
    from msq.report import write_history_report

    calls, cpus, commands = [], [], []
    for _ in range(repeat):
        if wait:
            bench_run.wait_idle(wait)
        started, cpu = time.perf_counter(), cpu_seconds()
        write_history_report(db, html)
        calls.append(time.perf_counter() - started)
        cpus.append(cpu_seconds() - cpu)
        cmd = bench_run.default_msq_cmd() + ["report", "--db", str(db), "-o", str(html), "-q"]
        started = time.perf_counter()
        subprocess.run(cmd, check=True)
        commands.append(time.perf_counter() - started)
    return calls, cpus, commands


def open_times(html: Path, chromium: str, repeat: int,
               wait: float) -> tuple[list[float], list[float]]:
    from playwright.sync_api import sync_playwright

    first, ready = [], []
    with sync_playwright() as play:
        browser = play.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        for _ in range(repeat):
            if wait:
                bench_run.wait_idle(wait)
            context = browser.new_context(viewport={"width": 1440, "height": 1000})
            page = context.new_page()
            errors: list[str] = []

            def on_error(err: object, errors: list[str] = errors) -> None:
                errors.append(str(err))

            page.on("pageerror", on_error)
            started = time.perf_counter()
            page.goto(html.resolve().as_uri(), wait_until="commit")
            page.wait_for_selector("body[data-ready='true'], #fatal:not([hidden])", timeout=60_000)
            ready.append(time.perf_counter() - started)
            first.append(page.evaluate("window.msqReport.firstChartAt") / 1000)
            if errors or page.is_visible("#fatal"):
                raise SystemExit(f"the page failed: {errors[:1] or page.text_content('#fatal')}")
            context.close()
        browser.close()
    return first, ready


def summary(values: list[float]) -> str:
    return (f"median {statistics.median(values):.2f} s (min {min(values):.2f}, "
            f"max {max(values):.2f}, n={len(values)})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ops", type=int, default=20000,
                    help="statistics workload size (ops per side)")
    ap.add_argument("--wait-idle", type=float, default=0,
                    help="wait up to S seconds for load average < 0.7 before each measurement")
    ap.add_argument("--chromium", default=os.environ.get("MSQ_CHROMIUM", "/usr/bin/chromium"))
    a = ap.parse_args(argv)
    meta = bench_run.ensure_workload("stat", a.ops, False, sys.executable)
    wdir = bench_run.WORK / "stat"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = wdir / "runs" / f"report-{stamp}" / "out"
    out.mkdir(parents=True)
    bench_run.warm_cache(wdir)
    load_before = load()
    if a.wait_idle:
        bench_run.wait_idle(a.wait_idle)
    in_compare = compare_once(wdir, out)
    db, html = out / "msq.duckdb", out / "report.html"
    calls, cpus, commands = write_times(db, html, a.repeat, a.wait_idle)
    size = html.stat().st_size
    first, ready = open_times(html, a.chromium, a.repeat, a.wait_idle)
    load_after = load()
    rows = meta["rows"]["npu"]
    print(f"HTML report, statistics workload: {rows:,} NPU rows, file {size / 1e6:.2f} MB "
          f"(target < 15 MB)")
    print(f"  written by the compare (--format html): "
          f"{'n/a' if in_compare is None else f'{in_compare:.2f} s'}")
    print(f"  written (write_history_report):  {summary(calls)}   target < 1.5 s")
    print(f"    its CPU time (all threads):    {summary(cpus)}")
    print(f"  msq report, whole command:       {summary(commands)}")
    print(f"  first chart drawn in Chromium:   {summary(first)}   target < 3 s")
    print(f"  page ready (table too):          {summary(ready)}")
    print(f"  load average (1 min): {load_before:.2f} before, {load_after:.2f} after; "
          f"{os.cpu_count()} cores")
    record = {"when": stamp, "rows": rows, "bytes": size, "compare_write_s": in_compare,
              "write_s": calls, "write_cpu_s": cpus, "command_s": commands, "first_chart_s": first, "ready_s": ready,
              "load_before": load_before, "load_after": load_after}
    with open(bench_run.WORK / "report_results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
