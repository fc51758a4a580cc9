"""Tensor metrics started before matching (msq.tensors_bridge.EarlyMetrics).

The early run guesses the pairs (same file name on both sides); the rows the compare uses must be
exactly those computed for the pairs the match made, whatever was guessed, and a failure of the
early run must never fail a compare that does not need the failing file.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import duckdb
import numpy as np
import pytest
import torch  # noqa: TID253  (tests write real .pt files)

from msq.config import Options, SingleInput
from msq.errors import TensorFileError
from msq.tensors.pool import TensorJob, compute_metrics
from msq.tensors_bridge import EarlyMetrics, _ext_sql, fill_from_jobs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tensor"
ROWS_SCHEMA = Path(__file__).resolve().parents[1] / "sql" / "compare" / "schema" / "30_rows.sql"


def _fill(jobs: list[TensorJob], opts: Options, early: EarlyMetrics | None, nd: Path,
          bd: Path) -> list[dict]:  # fmt: skip
    """``tensor_metrics`` as the compare fills it for these jobs (a DuckDB table of them), by
    out_seq, with the column names of compute_metrics's table."""
    con = duckdb.connect()
    con.execute(ROWS_SCHEMA.read_text())
    con.execute("CREATE TABLE jobs (out_seq BIGINT, npu_file VARCHAR, bench_file VARCHAR, "
                "npu_data VARCHAR)")
    con.executemany("INSERT INTO jobs VALUES (?, ?, ?, ?)",
                    [(j.job_id, j.npu_file, j.bench_file, j.data_name) for j in jobs])
    fill_from_jobs(con, "jobs", nd, bd, opts, early)
    got = con.sql("SELECT * RENAME (out_seq AS job_id) FROM tensor_metrics ORDER BY out_seq")
    return got.to_arrow_table().to_pylist()


def _want(jobs: list[TensorJob], opts: Options, nd: Path, bd: Path) -> list[dict]:
    """The rows of the jobs computed from scratch, in one process, by job id."""
    jobs = [j._replace(npu_dir=str(nd), bench_dir=str(bd)) for j in jobs]
    return compute_metrics(jobs, compat=opts.is_compat, workers=1).sort_by("job_id").to_pylist()


def _dump_dirs(tmp_path: Path, count: int = 80) -> tuple[SingleInput, Path, Path]:
    """Two tensor directories with ``count`` same-named pairs, one file only on each side."""
    rng = np.random.default_rng(5)
    nd = tmp_path / "npu" / "dump_tensor_data"
    bd = tmp_path / "bench" / "dump_tensor_data"
    nd.mkdir(parents=True)
    bd.mkdir(parents=True)
    for i in range(count):
        b = rng.standard_normal(int(rng.integers(50, 3000))).astype(np.float32)
        b[::9] = 0
        torch.save(torch.from_numpy(b + np.float32(1e-3) * b * (i % 5)), nd / f"t{i}.pt")
        torch.save(torch.from_numpy(b), bd / f"t{i}.pt")
    torch.save(torch.ones(10), nd / "only_npu.pt")
    torch.save(torch.ones(10), bd / "only_bench.pt")
    inp = SingleInput(tmp_path / "npu" / "dump.json", tmp_path / "bench" / "dump.json", None)
    return inp, nd, bd


def _jobs(nd: Path, bd: Path) -> list[TensorJob]:
    """What a match could ask for: same-named pairs, cross-named pairs, missing files, none."""
    n, b = str(nd), str(bd)
    jobs = [TensorJob(1000 + i, f"t{i}.pt", f"t{i}.pt", n, b) for i in range(0, 80, 3)]
    jobs += [
        TensorJob(7, "t1.pt", "t2.pt", n, b),  # a pair the guess did not make
        TensorJob(8, "only_npu.pt", "only_bench.pt", n, b),
        TensorJob(9, "t4.pt", "absent.pt", n, b, data_name="t4.pt"),
        TensorJob(10, None, None),
        TensorJob(11, "t5.pt", "t5.pt", n, b),  # the same pair twice
        TensorJob(12, "t5.pt", "t5.pt", n, b),
    ]
    return jobs


@pytest.mark.parametrize("compat", [None, "msprobe-1.1"])
def test_early_rows_are_the_rows_of_the_matched_pairs(tmp_path: Path, compat: str | None) -> None:
    inp, nd, bd = _dump_dirs(tmp_path)
    opts = Options(compat=compat)
    early = EarlyMetrics.start(inp, opts)
    assert early is not None and len(early.names) == 80
    jobs = _jobs(nd, bd)
    assert _fill(jobs, opts, early, nd, bd) == _want(jobs, opts, nd, bd)


def test_file_extensions_come_from_each_sides_data_name() -> None:
    """The extension of a tensor file (SQL, tensors_bridge._JOBS_SQL): what follows the last dot
    of its data_name, else the fallback (NULL, empty, -1, no dot)."""

    def ext(data_name: str | None, fallback: str) -> str:  # the rule, in Python
        if data_name and data_name != "-1" and "." in data_name:
            return "." + data_name.rsplit(".", 1)[1]
        return fallback

    names = [None, "", "-1", "x", "a.pt", "a.b.npy", "x.", ".hidden", "Tensor.add.0.forward.pt",
             "a..b", "a.PT", "-1.pt", ".pt", ".npy", "pt", "npy", "a.pt.npy", "a.npy.pt", "a.ptx",
             "a.xpt", "a.npy.", "a.pt.", "-1.npy", "é.pt", "x.Pt"]
    con = duckdb.connect()
    expr = _ext_sql("d", "'.fb'")
    got = con.execute(f"SELECT {expr} FROM unnest(?::VARCHAR[]) t(d)", [names]).fetchall()
    assert [g[0] for g in got] == [ext(n, ".fb") for n in names]


def test_no_tensor_directory_starts_nothing(tmp_path: Path) -> None:
    inp = SingleInput(tmp_path / "a" / "dump.json", tmp_path / "b" / "dump.json", None)
    assert EarlyMetrics.start(inp, Options()) is None


def test_the_c_folder_scan_finds_what_scandir_finds(tmp_path: Path) -> None:
    """_fused.tensor_names (both folders scanned in a thread while the pool's modules import,
    tensors_bridge._Scan) gives the names of tensors_bridge._tensor_files: regular files and
    links to them ending in .pt or .npy; not directories, FIFOs, dangling links, links to
    directories or other suffixes; names that are not UTF-8 decoded as os.fsdecode does. A
    missing folder raises FileNotFoundError, as os.scandir; so do EarlyMetrics on it."""
    from msq.tensors import _fused
    from msq.tensors_bridge import _tensor_files

    if not hasattr(_fused, "tensor_names"):
        pytest.skip("C scan not built (not POSIX)")
    d = tmp_path / "dump_tensor_data"
    d.mkdir()
    for name in ("a.pt", "b.npy", "c.PT", "d.pth", "e.pt.bak", ".pt", "f g.pt", "ü.pt"):
        (d / name).write_bytes(b"x")
    (d / "dir.pt").mkdir()
    os.mkfifo(d / "fifo.pt")
    (d / "link.pt").symlink_to(d / "a.pt")
    (d / "abs_link.npy").symlink_to(tmp_path / "outside.bin")
    (tmp_path / "outside.bin").write_bytes(b"y")
    (d / "dangling.pt").symlink_to(d / "missing")
    (d / "dirlink.pt").symlink_to(d / "dir.pt")
    odd = os.fsencode(str(d)) + b"/\xff\xfe.pt"
    with open(odd, "wb") as fh:
        fh.write(b"z")
    got = _fused.tensor_names(str(d))
    assert got == _tensor_files(d)
    assert got == {"a.pt", "b.npy", ".pt", "f g.pt", "\u00fc.pt", "link.pt", "abs_link.npy",
                   os.fsdecode(b"\xff\xfe.pt")}
    with pytest.raises(FileNotFoundError):
        _fused.tensor_names(str(tmp_path / "nowhere"))
    with pytest.raises(NotADirectoryError):
        _fused.tensor_names(str(d / "a.pt"))
    big = tmp_path / "big"
    big.mkdir()
    for i in range(5000):  # more names than the first buffer holds
        (big / f"Tensor.op.{i}.forward.output.0.pt").write_bytes(b"")
    assert _fused.tensor_names(str(big)) == _tensor_files(big)


def _evil(path: Path, marker: Path) -> None:
    class Evil:
        def __reduce__(self) -> tuple:
            return (os.system, (f"touch {marker}",))

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle.dumps(Evil(), protocol=2))
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")


def test_an_unsafe_file_the_match_does_not_use_fails_nothing(tmp_path: Path) -> None:
    inp, nd, bd = _dump_dirs(tmp_path)
    marker = tmp_path / "pwned"
    _evil(nd / "evil.pt", marker)
    _evil(bd / "evil.pt", marker)
    opts = Options()
    early = EarlyMetrics.start(inp, opts)
    assert early is not None and "evil.pt" in early.names
    jobs = _jobs(nd, bd)
    assert _fill(jobs, opts, early, nd, bd) == _want(jobs, opts, nd, bd)
    # ... but one the match does use is refused, as without the early run
    early = EarlyMetrics.start(inp, opts)
    with pytest.raises(TensorFileError, match="refused"):
        _fill([*jobs, TensorJob(99, "evil.pt", "evil.pt", str(nd), str(bd))], opts, early, nd, bd)
    assert not marker.exists()


def test_a_failing_compare_stops_the_early_run_and_exits(tmp_path: Path) -> None:
    work = tmp_path / "t"
    shutil.copytree(FIXTURE, work)
    (work / "npu" / "step0" / "rank" / "dump.json").write_text('{"task": "tensor", "data": {')
    proc = subprocess.run(
        [sys.executable, "-m", "msq.cli", "compare", "compare.json", "-o", str(tmp_path / "o")],
        cwd=work, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "dump.json" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_taking_the_early_rows_does_not_import_pyarrow_compute(tmp_path: Path) -> None:
    """Issue 15 #1: a pyarrow take() of the early rows imported pyarrow.compute, ~0.15 s of CPU
    of every real-data compare; the rows are joined in DuckDB. Nor is pyarrow imported (~20 ms)."""
    _, nd, bd = _dump_dirs(tmp_path)  # enough pairs for the early pool to start
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "import duckdb\n"
        "from msq.config import Options, SingleInput\n"
        "from msq.tensors_bridge import EarlyMetrics, fill_from_jobs\n"
        f"root = Path({str(tmp_path)!r})\n"
        "inp = SingleInput(root / 'npu' / 'dump.json', root / 'bench' / 'dump.json', None)\n"
        "early = EarlyMetrics.start(inp, Options(workers=2))\n"
        "assert early is not None\n"
        "con = duckdb.connect()\n"
        f"con.execute(Path({str(ROWS_SCHEMA)!r}).read_text())\n"
        "con.execute(\"CREATE TABLE jobs AS SELECT * FROM (VALUES (53, 't3.pt', 't3.pt', NULL), "
        "(51, 't1.pt', 't1.pt', NULL), (52, 't1.pt', 't1.pt', NULL), (57, 't7.pt', 't7.pt', NULL))"
        " j(out_seq, npu_file, bench_file, npu_data)\")\n"
        f"fill_from_jobs(con, 'jobs', Path({str(nd)!r}), Path({str(bd)!r}), Options(), early)\n"
        "ids = [r[0] for r in con.execute('SELECT out_seq FROM tensor_metrics').fetchall()]\n"
        "print(ids, 'pyarrow.compute' in sys.modules, 'pyarrow' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    # nor pyarrow at all: the workers pack the rows, DuckDB reads them through msq.flatten.Columns
    assert out.stdout.split() == ["[51,", "52,", "53,", "57]", "False", "False"]


@pytest.mark.parametrize("compat", [False, True])
def test_the_early_table_made_batch_by_batch_is_the_table_of_all_rows(tmp_path: Path,
                                                                      compat: bool) -> None:
    """The pool's thread makes the early table as the batches come in, in any order; the same
    table (every cell, bit for bit: IPC bytes) as from all the rows at once; a row that did not
    come in a batch (a large pair's, merged from its ranges) makes it from all the rows."""
    import pyarrow as pa

    from msq.tensors.pool import DEFAULT_CHUNK, Measure, _run_batch, range_size
    from msq.tensors_bridge import _early_table, _EarlyTable

    _, nd, bd = _dump_dirs(tmp_path)
    names = sorted(p.name for p in nd.iterdir() if (bd / p.name).exists())
    jobs = [TensorJob(i, name, name, str(nd), str(bd)) for i, name in enumerate(names)]
    batches = [_run_batch(jobs[s : s + 7], Measure(compat), DEFAULT_CHUNK,
                          range_size(DEFAULT_CHUNK))[0] for s in range(0, len(jobs), 7)]

    def ipc(table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.combine_chunks())
        return sink.getvalue().to_pybytes()

    rows = [row for batch in batches for row in batch]
    want = ipc(_early_table(names, list(rows)))
    made = _EarlyTable(names)
    for batch in [*batches[1::2], *batches[::2]]:
        made.add(batch)
    assert len(made.parts) == len(batches) and ipc(made.table(list(rows))) == want
    late = _EarlyTable(names)
    for batch in batches:
        late.add(batch[1:] if batch is batches[3] else batch)
    assert ipc(late.table(list(rows))) == want


@pytest.mark.parametrize("compat", [False, True])
def test_packed_batches_are_the_early_table(tmp_path: Path, compat: bool) -> None:
    """The workers' packed batches (pool.pack_rows, read by DuckDB through msq.flatten.Columns
    without pyarrow) hold the early table of the rows, cell for cell and bit for bit: computed
    rows, and made-up ones with every kind of cell (a NaN with a payload, -0.0, texts, None in
    every nullable column, the largest hash, non-ASCII and empty texts); a large pair's rows
    (tuples among the batches) go in one more batch; the rows' order does not matter."""
    import pyarrow as pa

    from msq.tensors.pool import DEFAULT_CHUNK, Measure, _run_batch, _run_batch_packed, range_size
    from msq.tensors_bridge import _columns, _early_table, _PackedTable

    assert _columns() is not None  # the C reader is built here
    _, nd, bd = _dump_dirs(tmp_path)
    names = sorted(p.name for p in nd.iterdir() if (bd / p.name).exists())
    jobs = [TensorJob(i, name, name, str(nd), str(bd)) for i, name in enumerate(names)][:-3]
    packed = [_run_batch_packed(jobs[s : s + 7], Measure(compat), DEFAULT_CHUNK,
                                range_size(DEFAULT_CHUNK))[0] for s in range(0, len(jobs), 7)]
    nan = np.frombuffer(np.uint64(0x7FF8_0000_0000_0ABC).tobytes(), np.float64)[0].item()
    made_up = [
        (len(names) - 3, nan, -0.0, "Nan", 1, 0.0, "No", "", "ok", nan, -0.0, None, 2**64 - 1, 0),
        (len(names) - 2, "None", "None", "None", "None", "None", "None", "Dump file: é.pt", "no_data",
         None, None, None, None, None),
        (len(names) - 1, 1.0, 1e-308, float("inf"), 0.5, 1.0, "Yes", "ü" * 40, "ok", 0.0, 5e-324,
         -float("inf"), 12345, 2**63),
    ]
    rows = [r for s in range(0, len(jobs), 7) for r in _run_batch(
        jobs[s : s + 7], Measure(compat), DEFAULT_CHUNK, range_size(DEFAULT_CHUNK))[0]]

    def ipc(table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.combine_chunks())
        return sink.getvalue().to_pybytes()

    want = _early_table(names, rows + made_up)
    early = _PackedTable(names)
    got = early.table([packed[2], *made_up, *packed[:2], *packed[3:]])
    assert ipc(pa.table(got).sort_by("job_id").cast(want.schema)) == ipc(want)

    def cells(table: object) -> list[tuple]:  # as fill_from_jobs reads them; floats by their bits
        con = duckdb.connect()
        con.register("early", table)
        return [tuple(np.float64(c).tobytes() if isinstance(c, float) else c for c in row)
                for row in con.execute("SELECT * FROM early ORDER BY job_id").fetchall()]

    assert cells(got) == cells(want)
    assert np.float64(nan).tobytes() in cells(got)[-3]
    assert early.table([]).num_rows == 0


def test_forked_workers_take_their_jobs_from_the_parent(tmp_path: Path) -> None:
    """A forked pool's batch tasks name a slice of the jobs the workers inherited (no jobs are
    pickled), with the same rows; the parent drops the list once the pool is done. In a fresh
    process: one holding a DuckDB connection (this test run's) starts its pools from a
    forkserver, whose tasks carry their jobs."""
    _, nd, bd = _dump_dirs(tmp_path)
    code = (
        "import pickle, sys\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from msq.tensors import pool\n"
        "from msq.tensors.pool import TensorJob, compute_metrics\n"
        f"jobs = [TensorJob(100 + i, f't{{i}}.pt', f't{{i}}.pt', {str(nd)!r}, {str(bd)!r}) "
        "for i in range(80)]\n"
        "sent = []\n"
        "submit = ProcessPoolExecutor.submit\n"
        "def spy(self, fn, /, *args, **kwargs):\n"
        "    sent.append((getattr(fn, '__name__', ''), args))\n"
        "    return submit(self, fn, *args, **kwargs)\n"
        "ProcessPoolExecutor.submit = spy\n"
        "got = compute_metrics(jobs, compat=False, workers=2, progress=False)\n"
        "ProcessPoolExecutor.submit = submit\n"
        "want = compute_metrics(jobs, compat=False, workers=1, progress=False)\n"
        "print(bool(sent), all(name == '_run_inherited' for name, _ in sent),\n"
        "      any(isinstance(a, (list, TensorJob)) for _, args in sent for a in args),\n"
        "      pool._INHERITED == {}, got.equals(want))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "False", "True", "True"]


def test_same_named_jobs_are_the_list_they_stand_for() -> None:
    from msq.tensors.pool import SameNamedJobs

    names = [f"t{i}.pt" for i in range(11)]
    jobs = SameNamedJobs(names, "/n", "/b")
    want = [TensorJob(i, n, n, "/n", "/b") for i, n in enumerate(names)]
    assert len(jobs) == 11 and list(jobs) == want
    assert [jobs[i] for i in range(-11, 11)] == [want[i] for i in range(-11, 11)]
    for cut in (slice(None), slice(3, 8), slice(8, 3), slice(-4, None), slice(0, 99), slice(1, 9, 3)):
        assert jobs[cut] == want[cut]
    for bad in (11, -12):
        with pytest.raises(IndexError):
            jobs[bad]


@pytest.mark.parametrize("rows", [
    # no text cell in any metric column, one text throughout the others, ints as metric cells
    [(i, 1, 0.5 * i, np.float64(2.0), 0, 1.0, "Yes", "", "ok", 0.0, 1.0, 2.0, i, 2**64 - 1)
     for i in range(9)],
    # every metric cell a text, every blame cell None, one err_message throughout
    [(i, "None", "None", "None", "None", "None", "None", "No bench data matched.", "no_data",
      None, None, None, None, None) for i in range(17)],
    # texts and numbers in one column, a null in every text column but the metric texts
    [(2, 0.25, "N/A", 3.0, 1.0, 0.0, None, None, None, 1.5, None, -0.0, None, 5),
     (0, "Nan", 1e300, float("-inf"), 0.5, 1.0, "No", "ü", "nanpos", None, 2.5, 0.0, 7, None),
     (1, 0.5, 0.0, "unsupported", 1.0, 1.0, "Yes", "", "ok", 0.0, 0.0, 0.0, 0, 0)],
    [],
], ids=["numbers", "texts", "mixed", "empty"])
def test_packed_rows_are_the_table_of_the_rows(rows: list[tuple]) -> None:
    """pack_rows' shortcuts (a column of numbers, of one text, of nulls) give the cells of
    metrics_table's pyarrow table, bit for bit."""
    import pyarrow as pa

    from msq.tensors.pool import pack_rows
    from msq.tensors_bridge import _columns, _early_table

    names = [f"n{i}" for i in range(len(rows))]
    want = _early_table(names, list(rows))
    columns = _columns()
    got = pa.table(columns([pack_rows(list(rows), names.__getitem__).columns]))
    assert got.cast(want.schema).equals(want)
    for name in want.column_names:  # every float by its bits, nulls where they are
        a, b = want.column(name).to_pylist(), got.column(name).to_pylist()
        assert [np.float64(x).tobytes() if isinstance(x, float) else x for x in a] == \
               [np.float64(x).tobytes() if isinstance(x, float) else x for x in b], name
