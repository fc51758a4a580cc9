-- Blame (schema version 3; docs/blame.md): where the error enters, one row per compared row of
-- each compare, and its dataflow edges. The view blame weighs the ranks of a run together.
CREATE TABLE IF NOT EXISTS blame_rows (
  compare_id BIGINT,
  run_id VARCHAR,                 -- one msq compare: every rank and step it compared
  out_seq BIGINT,                 -- the row (result_rows.out_seq)
  op_seq INTEGER,                 -- the NPU op's place in its dump (execution order)
  op_name VARCHAR,                -- the dump.json entry
  npu_name VARCHAR,
  io VARCHAR,                     -- input | output
  role VARCHAR,                   -- output | linked input | external input | in-place input | constant input
  direction VARCHAR,              -- forward | backward | '' (neither)
  is_module BOOLEAN,
  collective BOOLEAN,             -- a Distributed.* op (weighed across ranks by the view blame)
  err_kind VARCHAR,               -- how output_err was computed (row_error.err_kind)
  input_err DOUBLE,               -- what the inputs bring (an output: its op's worst input)
  output_err DOUBLE,              -- the row's own error (row_error.err)
  floor DOUBLE,                   -- the error its dtype (or the noise run) explains
  floor_source VARCHAR,           -- 'dtype <name>', 'noise run', 'md5 (equal or not)'
  floor_factor DOUBLE,            -- local: output_err > floor_factor x floor ...
  amp_limit DOUBLE,               -- ... and > amp_limit x input_err
  amplification DOUBLE,           -- output_err / input_err (inf: equal inputs, different output)
  verdict VARCHAR,                -- local | inherited | clean, on its own rank (see the view blame)
  reason VARCHAR,
  link VARCHAR,                   -- an input's link to its producer: hash, md5, statistics, reshape, external, constant
  candidates INTEGER,             -- earlier outputs with that content (the nearest one is taken)
  via VARCHAR,                    -- the producer of an input, or the worst input of an output
  band DOUBLE,                    -- what the row adds over its inputs: its noise band when this compare is a noise run
  noise_source VARCHAR            -- the reference noise run the floors came from (NULL: dtype floors)
);
-- Each tensor input linked to the earlier output that produced it, per side (rows by out_seq;
-- NULL where a row is not in the compare's output, e.g. not matched).
CREATE TABLE IF NOT EXISTS blame_edges (
  compare_id BIGINT,
  side VARCHAR,                   -- npu | bench
  consumer_seq BIGINT,            -- the input's row
  producer_seq BIGINT,            -- the producing output's row (NULL: external)
  how VARCHAR,                    -- hash | md5 | statistics | reshape | external
  candidates INTEGER
);
