-- One row per flattened argument of each side (spec §2), in execution order (row_seq).
CREATE TABLE IF NOT EXISTS tensors (
  side VARCHAR, row_seq BIGINT, op_seq INTEGER, row_in_op INTEGER,
  name VARCHAR,          -- statistics-style name (drives the input/output struct split)
  disp_name VARCHAR,     -- displayed / matched name (real-data mode: the data_name stem)
  match_name VARCHAR,    -- name used for matching (MindSpore mappings rewrite the NPU side)
  io VARCHAR, disp_io VARCHAR,
  dtype VARCHAR, shape VARCHAR, md5 VARCHAR, data_name VARCHAR,
  is_tensor BOOLEAN, numel BIGINT,
  max_num DOUBLE, max_kind VARCHAR, max_str VARCHAR,
  min_num DOUBLE, min_kind VARCHAR, min_str VARCHAR,
  mean_num DOUBLE, mean_kind VARCHAR, mean_str VARCHAR,
  norm_num DOUBLE, norm_kind VARCHAR, norm_str VARCHAR,
  -- the row's place among its op's rows of the same disp_io, from 1 (row_pairs' k; the readers
  -- count it as they emit the rows)
  io_k INTEGER,
  pair INTEGER DEFAULT 0  -- the op's pair (ops.pair)
);
-- Output rows in order: which NPU row meets which bench row.
CREATE TABLE IF NOT EXISTS compare_rows (
  out_seq BIGINT, ord INTEGER, npu_row BIGINT, bench_row BIGINT,
  kind VARCHAR,          -- matched | npu_only | bench_only | npu_extra | mapped
  stack_here BOOLEAN
);
-- Real-data metrics per output row (filled by the tensor engine).
CREATE TABLE IF NOT EXISTS tensor_metrics (
  out_seq BIGINT,
  cosine DOUBLE, cosine_text VARCHAR,
  max_abs_err DOUBLE, max_abs_err_text VARCHAR,
  max_rel_err DOUBLE, max_rel_err_text VARCHAR,
  one_thousandth DOUBLE, one_thousandth_text VARCHAR,
  five_thousandth DOUBLE, five_thousandth_text VARCHAR,
  accuracy VARCHAR, err_message VARCHAR, status VARCHAR,
  -- blame: sums of squares (difference, each side) and content hashes, from the same pass
  sq_diff DOUBLE, npu_sq DOUBLE, bench_sq DOUBLE, npu_hash UBIGINT, bench_hash UBIGINT
);
-- Highlight windows: which rows are weighed against which (spec §5.5.1).
CREATE TABLE IF NOT EXISTS hl_windows (out_seq BIGINT, win BIGINT, is_input BOOLEAN);
