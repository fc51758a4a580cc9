-- Blame (docs/blame.md): its parameters, the noise bands of a reference noise run and the
-- module nesting of construct.json. Filled by msq/blame before the sql/compare/blame views are read.
CREATE TABLE IF NOT EXISTS blame_params (
  run_id VARCHAR,        -- the msq compare this one is part of (every rank and step of it)
  floor_factor DOUBLE,   -- local = beyond floor_factor x the row's floor ...
  amp_limit DOUBLE,      -- ... and beyond amp_limit x the error its inputs bring
  noise_source VARCHAR   -- the reference noise run (path or history label); NULL: dtype floors
);
-- What each row adds in the reference noise run (by NPU row name): the floor is at least this.
CREATE TABLE IF NOT EXISTS blame_bands (npu_name VARCHAR, band DOUBLE);
-- construct.json: every module (or cell) an op sits in, at any depth; pair: the op's pair in a
-- batch of pairs (msq.pipeline.compute_batch; 0, a single compare's).
CREATE TABLE IF NOT EXISTS blame_nesting (side VARCHAR, op_name VARCHAR, ancestor VARCHAR,
                                          pair INTEGER DEFAULT 0);
-- The closed sets of texts that blame computes itself (blame_ops' direction; blame_rows' io, role
-- and verdict; an input's link), as ENUMs in blame's own tables: a table's VARCHAR costs DuckDB
-- ~250 instructions a row to store, an ENUM's byte a few (bench/README "Session 20: blame"). The
-- readers outside blame get texts (the view blame and the history's SELECTs cast them ::VARCHAR);
-- the summary's fetches give Python strings either way. (err_kind stays a text: row_error's, which
-- a --sql-dir may replace with its own kinds.)
CREATE TYPE IF NOT EXISTS blame_io AS ENUM ('input', 'output');
CREATE TYPE IF NOT EXISTS blame_role AS ENUM ('output', 'in-place input', 'constant input',
                                              'external input', 'linked input');
CREATE TYPE IF NOT EXISTS blame_direction AS ENUM ('', 'forward', 'backward');
CREATE TYPE IF NOT EXISTS blame_verdict AS ENUM ('local', 'inherited', 'clean');
-- an input's link (blame_keys' chow, blame_edges' how, blame_tensors' and blame_rows' link), in the
-- texts' own order: a sort by it is theirs
CREATE TYPE IF NOT EXISTS blame_link AS ENUM ('constant', 'external', 'hash', 'md5', 'reshape',
                                              'statistics');
