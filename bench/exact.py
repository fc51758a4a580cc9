#!/usr/bin/env python3
"""Do two msq builds write the same outputs? The check every performance change runs before it lands.

    python bench/exact.py --base /work/wt/base/.venv/bin/msq --cand .venv/bin/msq
    python bench/exact.py --base B --cand C --cases fx_stat,root4 --work /tmp/me/exact

Each case is one ``msq compare`` (the same command for both builds, each into a fresh folder);
then every file the two wrote is compared with the timestamps of its name taken out:
- workbooks member by member (the xlsx zip's XML), byte for byte, but docProps' dates;
- advisor, CSV and blame files byte for byte, with timestamps and the output folder's path
  replaced by placeholders;
- the history database (msq.duckdb): every table and view of the main schema, all its rows in
  one order (ORDER BY ALL), but the columns that record when, how long and where (started_at,
  seconds, output_dir, files, stack_path, npu_path, bench_path are compared with the output
  folder replaced).
Prints one line a case (identical, or the first differences found) and exits 1 if any differ.

Cases: fx_stat, fx_ranks, fx_tensor (the shipped fixtures/), stat and stat_compat (a generated
20,000-op statistics workload), root4 (a generated 2 ranks x 2 steps root of 5,000 ops a pair),
golden (every ../shared/golden case's npu/bench, default mode), root64 (bench/work/root-8x8-5000,
opt-in: ~40 s a build; --root64 names another place). Generated workloads are made once under --work and kept.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
GOLDEN = REPO.parent / "shared" / "golden"
STAMP = re.compile(rb"\d{14}|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}(:?\d{2})?|Z)?")
NAME_STAMP = re.compile(r"_\d{14}")
#: history columns that say when, how long or which folder: compared with those taken out
VOLATILE = {"started_at", "seconds", "recorded_at", "created_at", "run_id"}
DEFAULT_CASES = "fx_stat,fx_ranks,fx_tensor,stat,stat_compat,root4,golden"


@dataclass(frozen=True)
class Case:
    name: str
    cwd: Path
    args: tuple[str, ...]


def generated(work: Path, name: str, cmd: list[str]) -> Path:
    """A generated workload under ``work``, made once (its generator's command) and kept."""
    out = work / "workloads" / name
    if not (out / "compare.json").is_file():
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, *cmd, "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def cases(names: list[str], work: Path, root64: Path) -> list[Case]:
    out: list[Case] = []
    for name in names:
        if name.startswith("fx_"):
            out.append(Case(name, REPO / "fixtures" / name[3:], ("compare.json",)))
        elif name in ("stat", "stat_compat"):
            d = generated(work, "stat", [str(HERE / "gen_stat.py"), "--ops", "20000"])
            extra = ("--compat", "msprobe-1.1") if name == "stat_compat" else ()
            out.append(Case(name, d, ("compare.json", *extra)))
        elif name == "root4":
            d = generated(work, "root4", [str(HERE / "gen_root.py"), "--ranks", "2",
                                          "--steps", "2", "--ops", "5000"])
            out.append(Case(name, d, ("compare.json",)))
        elif name == "root64":
            if not (root64 / "compare.json").is_file():
                raise SystemExit(f"root64: {root64} has no compare.json; make it with "
                                 "python bench/gen_root.py --ranks 8 --steps 8 --ops 5000 --out "
                                 f"{root64}, or pass --root64 with where it is")
            out.append(Case(name, root64, ("compare.json",)))
        elif name == "golden":
            if not GOLDEN.is_dir():  # refused, not skipped: a skipped case read as a pass
                others = ",".join(c for c in DEFAULT_CASES.split(",") if c != "golden")
                raise SystemExit(f"golden: {GOLDEN} is not here; link ../shared beside the "
                                 f"checkout, or pass --cases without it (e.g. --cases {others})")
            for case in sorted(p for p in GOLDEN.iterdir() if (p / "expected").is_dir()):
                cj = case / "expected" / "default" / "compare.json"
                if cj.is_file():
                    out.append(Case(f"golden/{case.name}", case, (str(cj.relative_to(case)),)))
        else:
            raise SystemExit(f"unknown case {name!r}; known: {DEFAULT_CASES},root64")
    return out


def run(msq: str, case: Case, out: Path) -> tuple[int, str]:
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([msq, "compare", *case.args, "-o", str(out), "-q"], cwd=case.cwd, check=False,
                       capture_output=True, text=True)
    return p.returncode, p.stderr.replace(str(out), "<OUT>")


def normal(data: bytes, out: Path) -> bytes:
    return STAMP.sub(b"<TS>", data.replace(str(out).encode(), b"<OUT>"))


def files(out: Path) -> dict[str, Path]:
    return {NAME_STAMP.sub("_<TS>", str(p.relative_to(out))): p
            for p in sorted(out.rglob("*")) if p.is_file() and not p.name.endswith(".wal")}


def xlsx_diff(a: Path, b: Path, out_a: Path, out_b: Path) -> str | None:
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        if za.namelist() != zb.namelist():
            return f"members {za.namelist()} vs {zb.namelist()}"
        for member in za.namelist():
            x, y = normal(za.read(member), out_a), normal(zb.read(member), out_b)
            if x != y:
                return f"{member} differs at byte {first_diff(x, y)}"
    return None


def first_diff(x: bytes, y: bytes) -> int:
    return next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))


def history_digest(db: Path, out: Path) -> dict[str, tuple[int, int, int]]:
    """Each table and view of the history: its row count and two order-free hashes of its rows
    (sum and xor of DuckDB's hash of each row's text), computed in DuckDB: a root64 history is
    ~1.6M rows a table, which Python's repr of every row took over an hour to digest under load.
    Texts have the output folder and timestamps replaced first; VOLATILE columns are left out."""
    import duckdb
    con = duckdb.connect(str(db), read_only=True)
    try:
        objs = con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                           "UNION SELECT view_name FROM duckdb_views() WHERE schema_name = 'main' "
                           "AND NOT internal ORDER BY 1").fetchall()
        digests = {}
        for (name,) in objs:
            parts = [_cell_text(col, typ, out) for col, typ, *_ in
                     con.execute(f'DESCRIBE SELECT * FROM "{name}"').fetchall()
                     if col not in VOLATILE]
            row = f"CAST(ROW({', '.join(parts)}) AS VARCHAR)"
            count, total, xor = con.execute(
                f'SELECT count(*), sum(hash({row})::HUGEINT), bit_xor(hash({row})) '
                f'FROM "{name}"').fetchall()[0]
            digests[name] = (count, int(total or 0), int(xor or 0))
        return digests
    finally:
        con.close()


def _cell_text(col: str, typ: str, out: Path) -> str:
    """A column as it enters a row's digest: a text (or a list of them) with the output folder
    and timestamps replaced, anything else as it is."""
    quoted = '"' + col.replace('"', '""') + '"'
    if "VARCHAR" not in typ:
        return quoted
    stamp = STAMP.pattern.decode().replace("'", "''")
    folder = str(out).replace("'", "''")
    return (f"regexp_replace(replace(CAST({quoted} AS VARCHAR), '{folder}', '<OUT>'), "
            f"'{stamp}', '<TS>', 'g')")


def compare_outputs(out_a: Path, out_b: Path) -> list[str]:
    fa, fb = files(out_a), files(out_b)
    diffs = []
    if fa.keys() != fb.keys():
        diffs.append(f"files: only base {sorted(fa.keys() - fb.keys())}, "
                     f"only cand {sorted(fb.keys() - fa.keys())}")
    for name in sorted(fa.keys() & fb.keys()):
        a, b = fa[name], fb[name]
        if name.endswith(".xlsx"):
            why = xlsx_diff(a, b, out_a, out_b)
        elif name.endswith(".duckdb"):
            da, db = history_digest(a, out_a), history_digest(b, out_b)
            why = None if da == db else "; ".join(
                f"{k}: {da.get(k)} vs {db.get(k)}" for k in sorted(da.keys() | db.keys())
                if da.get(k) != db.get(k))
        else:
            x, y = normal(a.read_bytes(), out_a), normal(b.read_bytes(), out_b)
            why = None if x == y else f"differs at byte {first_diff(x, y)}"
        if why:
            diffs.append(f"{name}: {why}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the msq executable to compare against")
    ap.add_argument("--cand", required=True, help="the msq executable under test")
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--work", type=Path, default=Path("/tmp/msq-exact"))
    ap.add_argument("--root64", type=Path, default=HERE / "work" / "root-8x8-5000",
                    help="the root64 case's dump root (a worktree can name main's)")
    args = ap.parse_args(argv)
    bad = 0
    for case in cases(args.cases.split(","), args.work, args.root64.resolve()):
        slug = case.name.replace("/", "_")
        out_a, out_b = args.work / "base" / slug, args.work / "cand" / slug
        (rc_a, err_a), (rc_b, err_b) = run(args.base, case, out_a), run(args.cand, case, out_b)
        diffs = [] if rc_a == rc_b else [f"exit {rc_a} vs {rc_b}"]
        if err_a != err_b:
            diffs.append(f"stderr differs: {err_a[-300:]!r} vs {err_b[-300:]!r}")
        diffs += compare_outputs(out_a, out_b)
        bad += bool(diffs)
        print(f"{case.name}: " + ("identical" if not diffs else "DIFFERS\n  " + "\n  ".join(
            d[:400] for d in diffs[:12])), flush=True)
    print(json.dumps({"cases_differing": bad}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
