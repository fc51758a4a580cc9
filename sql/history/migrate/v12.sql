-- History schema version 11 -> 12: what an output row is (its kind, npu_dtype, bench_dtype,
-- result, verdict, failing, err_message, mark, mark_rules and severity: eight keys into terms, a
-- boolean and a SMALLINT in result_data of versions 8-11) is kept once each distinct combination
-- in the new table result_classes, with the texts themselves, and the rows hold its key
-- (class_id); the view result_rows reads them back (same columns, same order, same rows). The
-- same DDL as sql/history/schema/10_tables.sql (result_data's named compressions too). Rewrites
-- every result row once, in compare and row order; the combinations are keyed in the order of
-- their first row. Those texts stay in terms (nothing reads them there any more).
CREATE TABLE result_classes (
  class_id INTEGER,               -- 1, 2, 3, ...
  kind VARCHAR,                   -- matched | npu_only | bench_only | npu_extra | mapped
  npu_dtype VARCHAR,
  bench_dtype VARCHAR,
  result VARCHAR,                 -- Result (statistics, md5) or Accuracy Reached or Not (tensor), as written
  verdict VARCHAR,                -- pass | warning | fail | unmatched | none
  failing BOOLEAN,                -- the advisor's test: Warning (statistics), Different (md5), No (tensor)
  err_message VARCHAR,
  mark VARCHAR,                   -- red | yellow | NULL
  mark_rules VARCHAR,             -- the highlight rules that fired
  severity SMALLINT               -- 0 pass, 1 yellow, 2 red or failing; NULL when not compared
);
-- each combination of keys once, with its key (a table of the file, dropped below: one write
-- transaction writes to one database)
CREATE TABLE result_classes_v12 AS
SELECT (row_number() OVER (ORDER BY compare_id, out_seq))::INTEGER AS class_id, kind_id,
       npu_dtype_id, bench_dtype_id, result_id, verdict_id, failing, err_message_id, mark_id,
       mark_rules_id, severity
FROM (SELECT compare_id, out_seq, kind_id, npu_dtype_id, bench_dtype_id, result_id, verdict_id,
             failing, err_message_id, mark_id, mark_rules_id, severity
      FROM result_data
      QUALIFY row_number() OVER (PARTITION BY kind_id, npu_dtype_id, bench_dtype_id, result_id,
                                              verdict_id, failing, err_message_id, mark_id,
                                              mark_rules_id, severity
                                 ORDER BY compare_id, out_seq) = 1);
INSERT INTO result_classes
SELECT c.class_id, t_kind.term, t_npu_dtype.term, t_bench_dtype.term, t_result.term,
       t_verdict.term, c.failing, t_err_message.term, t_mark.term, t_mark_rules.term, c.severity
FROM result_classes_v12 c
LEFT JOIN terms t_kind ON t_kind.term_id = c.kind_id
LEFT JOIN terms t_npu_dtype ON t_npu_dtype.term_id = c.npu_dtype_id
LEFT JOIN terms t_bench_dtype ON t_bench_dtype.term_id = c.bench_dtype_id
LEFT JOIN terms t_result ON t_result.term_id = c.result_id
LEFT JOIN terms t_verdict ON t_verdict.term_id = c.verdict_id
LEFT JOIN terms t_err_message ON t_err_message.term_id = c.err_message_id
LEFT JOIN terms t_mark ON t_mark.term_id = c.mark_id
LEFT JOIN terms t_mark_rules ON t_mark_rules.term_id = c.mark_rules_id
ORDER BY c.class_id;
CREATE TABLE result_data_v12 (
  compare_id BIGINT USING COMPRESSION rle,
  out_seq BIGINT USING COMPRESSION bitpacking,  -- 0-based line in the workbook (the advisor's "Line")
  -- result_classes.class_id of the row's kind, dtypes, result, verdict, failing, err_message,
  -- mark, mark_rules and severity (schema version 12; their terms' keys, a boolean and a
  -- SMALLINT in versions 8-11; ~21 of them a 24,500-row pair)
  class_id INTEGER USING COMPRESSION bitpacking,
  op_id INTEGER,                                -- names.name_id of op_name (0: NULL)
  -- of npu_name and bench_name (0 on the absent side)
  npu_id INTEGER USING COMPRESSION bitpacking, bench_id INTEGER USING COMPRESSION bitpacking,
  -- terms.term_id of the shapes (schema version 8)
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
  reason VARCHAR USING COMPRESSION dict_fsst  -- Reason (default mode, schema version 2): the rule that marked the
                                  -- row and its numbers, a dtype note, or why it is unmatched
);
-- (IS NOT DISTINCT FROM: a NULL key or value equal to a NULL one)
INSERT INTO result_data_v12 BY NAME
SELECT d.* EXCLUDE (kind_id, npu_dtype_id, bench_dtype_id, result_id, verdict_id, failing,
                    err_message_id, mark_id, mark_rules_id, severity), c.class_id
FROM result_data d
JOIN result_classes_v12 c
  ON c.kind_id IS NOT DISTINCT FROM d.kind_id
 AND c.npu_dtype_id IS NOT DISTINCT FROM d.npu_dtype_id
 AND c.bench_dtype_id IS NOT DISTINCT FROM d.bench_dtype_id
 AND c.result_id IS NOT DISTINCT FROM d.result_id AND c.verdict_id IS NOT DISTINCT FROM d.verdict_id
 AND c.failing IS NOT DISTINCT FROM d.failing
 AND c.err_message_id IS NOT DISTINCT FROM d.err_message_id
 AND c.mark_id IS NOT DISTINCT FROM d.mark_id AND c.mark_rules_id IS NOT DISTINCT FROM d.mark_rules_id
 AND c.severity IS NOT DISTINCT FROM d.severity
ORDER BY d.compare_id, d.out_seq;
DROP TABLE result_classes_v12;
DROP VIEW result_rows;
DROP TABLE result_data;
ALTER TABLE result_data_v12 RENAME TO result_data;
CREATE VIEW result_rows AS
-- the shapes are joined from terms by key (schema version 12; read from a list of every term by
-- a scalar subquery in versions 8-11, which DuckDB, with the small result_classes to join, put
-- into that join's build side and copied into each row: a SELECT * of 4 compares of a 64-pair
-- run took 11 s, 1.2 s joined; bench/README, "Session 23: hist")
SELECT r.compare_id, r.out_seq, r.kind,
       o.name AS op_name, n.name AS npu_name, b.name AS bench_name, r.npu_dtype, r.bench_dtype,
       ns.term AS npu_shape, bs.term AS bench_shape,
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
       r.result, r.verdict, r.failing, r.err_message, r.mark, r.mark_rules, r.severity,
       r.mode_texts[3] AS npu_stack, r.mode_texts[4] AS data_name, r.reason,
       -- a column a later version adds to result_data (none in version 12)
       r.* EXCLUDE (compare_id, out_seq, class_id, op_id, npu_id, bench_id, npu_shape_id,
                   bench_shape_id, max_diff, min_diff, mean_diff, norm_diff, max_rel_pct,
                   min_rel_pct, mean_rel_pct, norm_rel_pct, npu_max, npu_min, npu_mean, npu_norm,
                   bench_max, bench_min, bench_mean, bench_norm, texts, tensor_metrics,
                   mode_texts, reason, kind, npu_dtype, bench_dtype, result, verdict, failing,
                   err_message, mark, mark_rules, severity)
-- the row's texts (schema version 10: by key) joined from the small table texts, not read from a
-- list of every list as the terms are (which made queries of a 64-pair run 1.5-6x slower, those
-- that read no text too; bench/README, "Session 21: hist"); its class (schema version 12) joined
-- from result_classes likewise
FROM (SELECT d.* EXCLUDE (texts_id), t.texts, c.* EXCLUDE (class_id)
      FROM result_data d LEFT JOIN texts t ON t.texts_id = d.texts_id
      JOIN result_classes c ON c.class_id = d.class_id) r
JOIN names o ON o.name_id = r.op_id
JOIN names n ON n.name_id = r.npu_id
JOIN names b ON b.name_id = r.bench_id
LEFT JOIN terms ns ON ns.term_id = r.npu_shape_id
LEFT JOIN terms bs ON bs.term_id = r.bench_shape_id;
