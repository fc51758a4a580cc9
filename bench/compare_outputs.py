#!/usr/bin/env python3
"""Check that msq's and msprobe's outputs for a benchmark workload agree.

    bench/.venv-msprobe/bin/python bench/compare_outputs.py stat          # newest run of each tool
    bench/.venv-msprobe/bin/python bench/compare_outputs.py DIR_A DIR_B   # two output directories

Compares the workbooks cell by cell (values as read by pandas, as text), the fill of each data
row (openpyxl), and the advisor files byte for byte (timestamps are only in the file names).
Needs pandas + openpyxl (the msprobe venv has both). Exit 0 when identical, 1 otherwise.
"""
from __future__ import annotations

import collections
import glob
import sys
from pathlib import Path

import openpyxl
import pandas as pd

WORK = Path(__file__).resolve().parent / "work"


def newest_out(workload: str, tool: str) -> Path:
    runs = sorted((WORK / workload.replace("-", "_") / "runs").glob(f"{tool}-*"))
    for r in reversed(runs):
        if glob.glob(str(r / "out" / "compare_result_*.xlsx")):
            return r / "out"
    raise SystemExit(f"no {tool} run with a workbook for {workload}")


def fills(path: str) -> list:
    ws = openpyxl.load_workbook(path).active
    out = []
    for row in ws.iter_rows(min_row=2, max_col=1):
        c = row[0]
        out.append(c.fill.fgColor.rgb if c.fill is not None and c.fill.fill_type else None)
    return out


def main(argv: list[str]) -> int:
    if len(argv) == 1:
        a, b = newest_out(argv[0], "msprobe"), newest_out(argv[0], "msq")
    elif len(argv) == 2:
        a, b = Path(argv[0]), Path(argv[1])
    else:
        print(__doc__)
        return 2
    print(f"A = {a}\nB = {b}")
    pa = glob.glob(str(a / "compare_result_*.xlsx"))[0]
    pb = glob.glob(str(b / "compare_result_*.xlsx"))[0]
    da, db = pd.read_excel(pa), pd.read_excel(pb)
    ok = True
    print(f"rows/cols: {da.shape} vs {db.shape}")
    if list(da.columns) != list(db.columns):
        print(f"columns differ: {list(da.columns)} vs {list(db.columns)}")
        ok = False
    elif da.shape == db.shape:
        diff = da.fillna("<NA>").astype(str) != db.fillna("<NA>").astype(str)
        n = int(diff.values.sum())
        print(f"cells differing: {n}")
        ok &= n == 0
        for col in da.columns[diff.any()]:
            for i in diff[col].to_numpy().nonzero()[0][:3]:
                print(f"  {col} row {i}: {da[col][i]!r} vs {db[col][i]!r}")
    else:
        ok = False
    fa, fb = fills(pa), fills(pb)
    print(f"fills: {dict(collections.Counter(fa))} vs {dict(collections.Counter(fb))}")
    if fa != fb:
        ok = False
        bad = [i for i, (x, y) in enumerate(zip(fa, fb)) if x != y][:5]
        print(f"  first differing fill rows (0-based data rows): {bad}")
    adv = [sorted(glob.glob(str(d / "advisor_*.txt"))) for d in (a, b)]
    if adv[0] or adv[1]:
        same = bool(adv[0] and adv[1]) and Path(adv[0][0]).read_bytes() == Path(adv[1][0]).read_bytes()
        print(f"advisor identical: {same}")
        ok &= same
    print("IDENTICAL" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
