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
-- An op's direction by its name: forward or backward as the last field (or the last but a
-- number: Module.fc.Linear.forward.0), else ''. regexp_extract(name,
-- '\.(forward|backward)(\.\d+)?$', 1), but without running the regular expression where its
-- answer can only be one (~1,200 instructions a name; tests/sql/test_blame_names.py holds the
-- two equal): a name that ends in .forward or .backward, or that has no 'ward.' (what a
-- .forward.N or .backward.N would have)
CREATE OR REPLACE MACRO blame_op_direction(name) AS (
  CASE WHEN ends_with(name, '.forward') THEN 'forward'::blame_direction
       WHEN ends_with(name, '.backward') THEN 'backward'::blame_direction
       WHEN NOT contains(name, 'ward.') THEN ''::blame_direction
       ELSE regexp_extract(name, '\.(forward|backward)(\.\d+)?$', 1)::blame_direction END);
-- A backward op's forward record's name: regexp_replace(name, '\.backward(\.\d+)?$',
-- '.forward\1'), the regular expression run only on a name that does not end in .backward
CREATE OR REPLACE MACRO blame_forward_of(name) AS (
  CASE WHEN ends_with(name, '.backward') THEN left(name, -9) || '.forward'
       ELSE regexp_replace(name, '\.backward(\.\d+)?$', '.forward\1') END);
