-- History schema version 9 -> 10: the texts of a row's metric cells that are not numbers (the
-- list result_data.texts) are kept once each distinct list in the new table texts, and the rows
-- hold its key (texts_id); the view result_rows reads the lists back (same columns, same order,
-- same rows). The same DDL as sql/history/schema/10_tables.sql (result_data's named compressions
-- too). Rewrites every result row once, in compare and row order; the lists are keyed in the
-- order of their first row.
CREATE TABLE texts (
  texts_id INTEGER,               -- 1, 2, 3, ...
  texts VARCHAR[]                 -- each list once
);
INSERT INTO texts
SELECT (row_number() OVER (ORDER BY compare_id, out_seq))::INTEGER, texts
FROM (SELECT compare_id, out_seq, texts FROM result_data WHERE texts IS NOT NULL
      QUALIFY row_number() OVER (PARTITION BY texts ORDER BY compare_id, out_seq) = 1);
CREATE TABLE result_data_v10 (
  compare_id BIGINT USING COMPRESSION rle,
  out_seq BIGINT USING COMPRESSION bitpacking,  -- 0-based line in the workbook (the advisor's "Line")
  -- terms.term_id of kind (schema version 8; so are every <column>_id below but the names'):
  kind_id INTEGER USING COMPRESSION rle,        -- matched | npu_only | bench_only | npu_extra | mapped
  op_id INTEGER,                                -- names.name_id of op_name (0: NULL)
  -- of npu_name and bench_name (0 on the absent side)
  npu_id INTEGER USING COMPRESSION bitpacking, bench_id INTEGER USING COMPRESSION bitpacking,
  npu_dtype_id INTEGER USING COMPRESSION bitpacking, bench_dtype_id INTEGER USING COMPRESSION bitpacking,
  npu_shape_id INTEGER USING COMPRESSION bitpacking, bench_shape_id INTEGER USING COMPRESSION bitpacking,
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
  -- texts.texts_id of the texts of the row's metric cells that are not numbers (schema version
  -- 10; a list in result_data of versions 5-9); NULL when every cell of the row is a number
  texts_id INTEGER,
  -- tensor (real-data) mode (schema version 7): cosine, max_abs_err, max_rel_err,
  -- one_thousandth_err_ratio, five_thousandths_err_ratio, in that order; NULL when all five are
  tensor_metrics DOUBLE[],
  -- the texts of other modes and options (schema version 7): npu_md5, bench_md5 (md5 mode),
  -- npu_stack (NPU_Stack_Info, stack mode), data_name (Data_name, tensor mode), in that order;
  -- NULL when all four are
  mode_texts VARCHAR[],
  -- verdict
  result_id INTEGER,              -- Result (statistics, md5) or Accuracy Reached or Not (tensor), as written
  verdict_id INTEGER,             -- pass | warning | fail | unmatched | none
  failing BOOLEAN,                -- the advisor's test: Warning (statistics), Different (md5), No (tensor)
  err_message_id INTEGER,
  mark_id INTEGER USING COMPRESSION rle,        -- red | yellow | NULL
  mark_rules_id INTEGER USING COMPRESSION rle,  -- the highlight rules that fired
  severity SMALLINT,              -- 0 pass, 1 yellow, 2 red or failing; NULL when not compared
  reason VARCHAR USING COMPRESSION dict_fsst  -- Reason (default mode, schema version 2): the rule that marked the
                                  -- row and its numbers, a dtype note, or why it is unmatched
);

-- (DuckDB compares lists member by member, a NULL member equal to a NULL member)
INSERT INTO result_data_v10 BY NAME
SELECT r.* EXCLUDE (texts), t.texts_id
FROM result_data r
LEFT JOIN texts t ON t.texts = r.texts
ORDER BY r.compare_id, r.out_seq;
DROP VIEW result_rows;
DROP TABLE result_data;
ALTER TABLE result_data_v10 RENAME TO result_data;
CREATE VIEW result_rows AS
-- a term is read from the list of every term at its key's place (the keys have no gap): one
-- scalar subquery a column, which DuckDB runs once a query, and not at all for a column the
-- query does not read (a join, or a cross join of the list, cost a lookup a row either way)
SELECT r.compare_id, r.out_seq,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.kind_id] AS kind,
       o.name AS op_name, n.name AS npu_name, b.name AS bench_name,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.npu_dtype_id] AS npu_dtype,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.bench_dtype_id] AS bench_dtype,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.npu_shape_id] AS npu_shape,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.bench_shape_id] AS bench_shape,
       r.max_diff,
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
       r.mode_texts[1] AS npu_md5, r.mode_texts[2] AS bench_md5,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.result_id] AS result,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.verdict_id] AS verdict, r.failing,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.err_message_id] AS err_message,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.mark_id] AS mark,
       (SELECT list(term ORDER BY term_id) FROM terms)[r.mark_rules_id] AS mark_rules, r.severity,
       r.mode_texts[3] AS npu_stack, r.mode_texts[4] AS data_name, r.reason,
       -- a column a later version adds to result_data (none in version 10)
       r.* EXCLUDE (compare_id, out_seq, kind_id, op_id, npu_id, bench_id, npu_dtype_id,
                   bench_dtype_id, npu_shape_id, bench_shape_id, max_diff, min_diff, mean_diff,
                   norm_diff, max_rel_pct, min_rel_pct, mean_rel_pct, norm_rel_pct, npu_max,
                   npu_min, npu_mean, npu_norm, bench_max, bench_min, bench_mean, bench_norm,
                   texts, tensor_metrics, mode_texts, result_id, verdict_id, failing,
                   err_message_id, mark_id, mark_rules_id, severity, reason)
-- the row's texts (schema version 10: by key) joined from the small table texts, not read from a
-- list of every list as the terms are (which made queries of a 64-pair run 1.5-6x slower, those
-- that read no text too; bench/README, "Session 21: hist")
FROM (SELECT d.* EXCLUDE (texts_id), t.texts
      FROM result_data d LEFT JOIN texts t ON t.texts_id = d.texts_id) r
JOIN names o ON o.name_id = r.op_id
JOIN names n ON n.name_id = r.npu_id
JOIN names b ON b.name_id = r.bench_id;
