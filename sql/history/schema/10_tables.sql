-- The history database (schema version 3): every compare msq recorded, and every output row.
-- Executed inside the history file (USE) in one transaction; see docs/schema.md.
CREATE TABLE IF NOT EXISTS meta (
  key VARCHAR PRIMARY KEY,   -- schema_version | created_at | created_by
  value VARCHAR
);
-- One row per compare (one step/rank pair of a directory compare is one compare).
CREATE TABLE IF NOT EXISTS compares (
  compare_id BIGINT PRIMARY KEY,  -- 1, 2, 3, ... in recording order
  started_at TIMESTAMPTZ,
  seconds DOUBLE,                 -- compare time, outputs included
  label VARCHAR,                  -- --label
  mode VARCHAR,                   -- statistics | md5 | tensor
  framework VARCHAR,              -- pytorch | mindspore
  compat VARCHAR,                 -- msprobe-1.1 | NULL
  fuzzy BOOLEAN,
  stack BOOLEAN,
  auto_analyze BOOLEAN,
  cross_framework BOOLEAN,
  data_mapping VARCHAR,           -- path, or the mapping as JSON; NULL when not given
  api_mapping VARCHAR,            -- 'builtin', a path, or NULL
  cell_mapping VARCHAR,
  layer_mapping VARCHAR,
  npu_path VARCHAR,               -- absolute path of the NPU dump.json
  bench_path VARCHAR,
  stack_path VARCHAR,
  rank INTEGER,                   -- from .../rank<R>/dump.json; NULL when absent
  step INTEGER,                   -- from .../step<S>/rank<R>/dump.json; NULL when absent
  msq_version VARCHAR,
  output_dir VARCHAR,
  files VARCHAR[],                -- outputs written (workbook, csv, parquet, advisor)
  n_rows BIGINT,
  n_matched BIGINT,
  n_npu_only BIGINT,
  n_bench_only BIGINT,
  n_red BIGINT,
  n_yellow BIGINT,
  suspect_line BIGINT,            -- the advisor's first failing row (out_seq); NULL when none
  suspect VARCHAR                 -- its NPU name; NULL when none
);
-- One row per output line of each compare: names, every metric as a typed column, the verdict
-- and the colour. A metric cell that is text in the workbook ("N/A", "None", "nan", "unsupported")
-- keeps its number column NULL (or NaN/inf for non-finite values) and its text in <metric>_text.
CREATE TABLE IF NOT EXISTS result_rows (
  compare_id BIGINT,
  out_seq BIGINT,                 -- 0-based line in the workbook (the advisor's "Line")
  kind VARCHAR,                   -- matched | npu_only | bench_only | npu_extra | mapped
  op_name VARCHAR,                -- the dump.json entry (NPU side; bench side for bench-only rows)
  npu_name VARCHAR, bench_name VARCHAR,  -- NULL on the absent side
  npu_dtype VARCHAR, bench_dtype VARCHAR,
  npu_shape VARCHAR, bench_shape VARCHAR,
  -- statistics mode
  max_diff DOUBLE, max_diff_text VARCHAR,
  min_diff DOUBLE, min_diff_text VARCHAR,
  mean_diff DOUBLE, mean_diff_text VARCHAR,
  norm_diff DOUBLE, norm_diff_text VARCHAR,
  max_rel_pct DOUBLE, max_rel_pct_text VARCHAR,   -- MaxRelativeErr "12.5%" -> 12.5
  min_rel_pct DOUBLE, min_rel_pct_text VARCHAR,
  mean_rel_pct DOUBLE, mean_rel_pct_text VARCHAR,
  norm_rel_pct DOUBLE, norm_rel_pct_text VARCHAR,
  -- tensor (real-data) mode
  cosine DOUBLE, cosine_text VARCHAR,
  max_abs_err DOUBLE, max_abs_err_text VARCHAR,
  max_rel_err DOUBLE, max_rel_err_text VARCHAR,
  one_thousandth_err_ratio DOUBLE, one_thousandth_err_ratio_text VARCHAR,
  five_thousandths_err_ratio DOUBLE, five_thousandths_err_ratio_text VARCHAR,
  -- statistics of each side (statistics and tensor modes)
  npu_max DOUBLE, npu_max_text VARCHAR,
  npu_min DOUBLE, npu_min_text VARCHAR,
  npu_mean DOUBLE, npu_mean_text VARCHAR,
  npu_norm DOUBLE, npu_norm_text VARCHAR,
  bench_max DOUBLE, bench_max_text VARCHAR,
  bench_min DOUBLE, bench_min_text VARCHAR,
  bench_mean DOUBLE, bench_mean_text VARCHAR,
  bench_norm DOUBLE, bench_norm_text VARCHAR,
  -- md5 mode
  npu_md5 VARCHAR, bench_md5 VARCHAR,
  -- verdict
  result VARCHAR,                 -- Result (statistics, md5) or Accuracy Reached or Not (tensor), as written
  verdict VARCHAR,                -- pass | warning | fail | unmatched | none
  failing BOOLEAN,                -- the advisor's test: Warning (statistics), Different (md5), No (tensor)
  err_message VARCHAR,
  mark VARCHAR,                   -- red | yellow | NULL
  mark_rules VARCHAR,             -- the highlight rules that fired
  severity SMALLINT,              -- 0 pass, 1 yellow, 2 red or failing; NULL when not compared
  npu_stack VARCHAR,              -- NPU_Stack_Info (stack mode only)
  data_name VARCHAR,              -- Data_name (tensor mode)
  reason VARCHAR                  -- Reason (default mode, schema version 2): the rule that marked the
                                  -- row and its numbers, a dtype note, or why it is unmatched
);
