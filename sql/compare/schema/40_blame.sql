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
