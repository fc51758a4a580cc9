-- History schema version 6 -> 7: result_data's columns of other modes, nearly all NULL in a
-- statistics compare, become two lists: tensor_metrics (cosine, max_abs_err, max_rel_err,
-- one_thousandth_err_ratio, five_thousandths_err_ratio) and mode_texts (npu_md5, bench_md5,
-- npu_stack, data_name), each NULL when all its members are; the view result_rows spreads them
-- back (same columns, same order, same rows). The same DDL as sql/history/schema/10_tables.sql.
-- Rewrites every result row once.
CREATE TABLE result_data_v7 (
  compare_id BIGINT,
  out_seq BIGINT,                 -- 0-based line in the workbook (the advisor's "Line")
  kind VARCHAR,                   -- matched | npu_only | bench_only | npu_extra | mapped
  op_id INTEGER,                  -- names.name_id of op_name (0: NULL)
  npu_id INTEGER, bench_id INTEGER,  -- of npu_name and bench_name (0 on the absent side)
  npu_dtype VARCHAR, bench_dtype VARCHAR,
  npu_shape VARCHAR, bench_shape VARCHAR,
  -- statistics mode
  max_diff DOUBLE,
  min_diff DOUBLE,
  mean_diff DOUBLE,
  norm_diff DOUBLE,
  max_rel_pct DOUBLE,   -- MaxRelativeErr "12.5%" -> 12.5
  min_rel_pct DOUBLE,
  mean_rel_pct DOUBLE,
  norm_rel_pct DOUBLE,
  -- statistics of each side (statistics and tensor modes)
  npu_max DOUBLE,
  npu_min DOUBLE,
  npu_mean DOUBLE,
  npu_norm DOUBLE,
  bench_max DOUBLE,
  bench_min DOUBLE,
  bench_mean DOUBLE,
  bench_norm DOUBLE,
  -- the texts of a row's metric cells that are not numbers (the 21 <metric>_text columns of
  -- result_rows, in their order: "N/A", "None", "nan", "unsupported", ...); NULL when every
  -- cell of the row is a number
  texts VARCHAR[],
  -- tensor (real-data) mode (schema version 7): cosine, max_abs_err, max_rel_err,
  -- one_thousandth_err_ratio, five_thousandths_err_ratio, in that order; NULL when all five are
  tensor_metrics DOUBLE[],
  -- the texts of other modes and options (schema version 7): npu_md5, bench_md5 (md5 mode),
  -- npu_stack (NPU_Stack_Info, stack mode), data_name (Data_name, tensor mode), in that order;
  -- NULL when all four are
  mode_texts VARCHAR[],
  -- verdict
  result VARCHAR,                 -- Result (statistics, md5) or Accuracy Reached or Not (tensor), as written
  verdict VARCHAR,                -- pass | warning | fail | unmatched | none
  failing BOOLEAN,                -- the advisor's test: Warning (statistics), Different (md5), No (tensor)
  err_message VARCHAR,
  mark VARCHAR,                   -- red | yellow | NULL
  mark_rules VARCHAR,             -- the highlight rules that fired
  severity SMALLINT,              -- 0 pass, 1 yellow, 2 red or failing; NULL when not compared
  reason VARCHAR                  -- Reason (default mode, schema version 2): the rule that marked the
                                  -- row and its numbers, a dtype note, or why it is unmatched
);

INSERT INTO result_data_v7 BY NAME
SELECT * EXCLUDE (cosine, max_abs_err, max_rel_err, one_thousandth_err_ratio,
                  five_thousandths_err_ratio, npu_md5, bench_md5, npu_stack, data_name),
  CASE WHEN coalesce(cosine, max_abs_err, max_rel_err, one_thousandth_err_ratio,
                     five_thousandths_err_ratio) IS NULL THEN NULL
       ELSE [cosine, max_abs_err, max_rel_err, one_thousandth_err_ratio,
             five_thousandths_err_ratio]::DOUBLE[] END AS tensor_metrics,
  CASE WHEN coalesce(npu_md5, bench_md5, npu_stack, data_name) IS NULL THEN NULL
       ELSE [npu_md5, bench_md5, npu_stack, data_name]::VARCHAR[] END AS mode_texts
FROM result_data;
DROP VIEW result_rows;
DROP TABLE result_data;
ALTER TABLE result_data_v7 RENAME TO result_data;
CREATE VIEW result_rows AS
SELECT r.compare_id, r.out_seq, r.kind, o.name AS op_name, n.name AS npu_name,
       b.name AS bench_name, r.npu_dtype, r.bench_dtype, r.npu_shape, r.bench_shape, r.max_diff,
       r.texts[1] AS max_diff_text, r.min_diff,
       r.texts[2] AS min_diff_text, r.mean_diff,
       r.texts[3] AS mean_diff_text, r.norm_diff,
       r.texts[4] AS norm_diff_text, r.max_rel_pct,
       r.texts[5] AS max_rel_pct_text, r.min_rel_pct,
       r.texts[6] AS min_rel_pct_text, r.mean_rel_pct,
       r.texts[7] AS mean_rel_pct_text, r.norm_rel_pct,
       r.texts[8] AS norm_rel_pct_text, r.tensor_metrics[1] AS cosine,
       r.texts[9] AS cosine_text, r.tensor_metrics[2] AS max_abs_err,
       r.texts[10] AS max_abs_err_text, r.tensor_metrics[3] AS max_rel_err,
       r.texts[11] AS max_rel_err_text, r.tensor_metrics[4] AS one_thousandth_err_ratio,
       r.texts[12] AS one_thousandth_err_ratio_text,
       r.tensor_metrics[5] AS five_thousandths_err_ratio,
       r.texts[13] AS five_thousandths_err_ratio_text, r.npu_max,
       r.texts[14] AS npu_max_text, r.npu_min,
       r.texts[15] AS npu_min_text, r.npu_mean,
       r.texts[16] AS npu_mean_text, r.npu_norm,
       r.texts[17] AS npu_norm_text, r.bench_max,
       r.texts[18] AS bench_max_text, r.bench_min,
       r.texts[19] AS bench_min_text, r.bench_mean,
       r.texts[20] AS bench_mean_text, r.bench_norm,
       r.texts[21] AS bench_norm_text,
       r.mode_texts[1] AS npu_md5, r.mode_texts[2] AS bench_md5, r.result, r.verdict,
       r.failing, r.err_message, r.mark, r.mark_rules, r.severity,
       r.mode_texts[3] AS npu_stack, r.mode_texts[4] AS data_name, r.reason,
       -- a column a later version adds to result_data (none in version 7)
       r.* EXCLUDE (compare_id, out_seq, kind, op_id, npu_id, bench_id, npu_dtype, bench_dtype,
                   npu_shape, bench_shape, max_diff, min_diff, mean_diff, norm_diff, max_rel_pct,
                   min_rel_pct, mean_rel_pct, norm_rel_pct, npu_max, npu_min, npu_mean, npu_norm,
                   bench_max, bench_min, bench_mean, bench_norm, texts, tensor_metrics,
                   mode_texts, result, verdict, failing, err_message, mark, mark_rules, severity,
                   reason)
FROM result_data r
JOIN names o ON o.name_id = r.op_id
JOIN names n ON n.name_id = r.npu_id
JOIN names b ON b.name_id = r.bench_id;
