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
-- A blame row's reason by its kind (sql/compare/blame/blame_judged.sql): the reason itself, or
-- the text it starts with where the row's via, err_kind or amp_limit completes it. A batch of
-- pairs stores this byte a row (msq.blame.compute.batch_rows_select), not the ~70-byte texts
-- that DuckDB stored, checked and scanned back for every row (bench/README "Session 29: blame");
-- blame_reason_text makes the text where it is read.
CREATE TYPE IF NOT EXISTS blame_reason AS ENUM (
  'explained by its input ', 'within the floor', 'not comparable (', 'produced by ',
  'in-place op: msprobe records this input after the op; see its output',
  'no producing op recorded; errors before this op explain it',
  'no producing op recorded (parameter, data or an op the dump lacks) and nothing before it explains it',
  'through the collective: the error comes from another rank (or the collective itself); compare every rank',
  'inside the module, in code the dump does not record: its ops and inputs do not explain it',
  'error enters here: its inputs are equal', 'error enters here: beyond ');
-- A blame row's reason as its text, from its kind (blame_reason) and what the kind names: the
-- commonest kind first
CREATE OR REPLACE MACRO blame_reason_text(reason, err_kind, via, amp_limit) AS (
  CASE WHEN reason = 'explained by its input ' THEN 'explained by its input ' || coalesce(via, '?')
       WHEN reason = 'not comparable (' THEN 'not comparable (' || err_kind || ')'
       WHEN reason = 'produced by ' THEN 'produced by ' || via
       WHEN reason = 'error enters here: beyond ' THEN 'error enters here: beyond '
            || printf('%g', amp_limit) || ' x the error of its input ' || coalesce(via, '?')
       ELSE reason::VARCHAR END);
-- A blame row's floor_source (sql/compare/blame/blame_judged.sql) as a batch of pairs stores it
-- (msq.blame.compute.batch_rows_select): a byte a row, not a text. Its texts are 'noise run',
-- 'md5 (equal or not)' and 'dtype ' with every dtype of row_dtype (00_types.sql) less its
-- 'torch.'; another dtype's fails the cast (blame_floor_code), and the batch then stores texts.
CREATE TYPE IF NOT EXISTS blame_floor AS ENUM ('dtype float32', 'dtype float16', 'dtype bfloat16',
  'dtype float64', 'dtype int64', 'dtype int32', 'dtype int16', 'dtype int8', 'dtype uint8',
  'dtype bool', 'dtype complex64', 'dtype complex128', 'dtype <class ''int''>',
  'dtype <class ''float''>', 'dtype <class ''bool''>', 'dtype <class ''str''>',
  'dtype <class ''NoneType''>', 'dtype Size', 'dtype slice', 'noise run', 'md5 (equal or not)');
-- floor_source's text as a blame_floor: the commonest as constants (a cast looks every text up
-- in a hash table), another cast (an error where the ENUM lacks it)
CREATE OR REPLACE MACRO blame_floor_code(source) AS (
  CASE source WHEN 'dtype float32' THEN 'dtype float32'::blame_floor
              WHEN 'dtype <class ''int''>' THEN 'dtype <class ''int''>'::blame_floor
              WHEN 'dtype float16' THEN 'dtype float16'::blame_floor
              WHEN 'dtype bfloat16' THEN 'dtype bfloat16'::blame_floor
              ELSE source::blame_floor END);
