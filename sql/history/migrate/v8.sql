-- History schema version 7 -> 8: the short texts that repeat from row to row (result_data's
-- kind, npu_dtype, bench_dtype, npu_shape, bench_shape, result, verdict, err_message, mark, mark_rules;
-- blame_data's io, role, direction, err_kind, floor_source, verdict, link) are
-- kept once each in the new table terms, and the rows hold their keys (<column>_id); the views
-- result_rows and blame_rows read the texts back (same columns, same order, same rows). The same
-- DDL as sql/history/schema/10_tables.sql and 20_blame.sql. Rewrites every result and blame row
-- once, in compare and row order; the terms are keyed in their sorted order.
CREATE TABLE terms (
  term_id INTEGER,                -- 1, 2, 3, ...
  term VARCHAR                    -- each text once
);
INSERT INTO terms
SELECT (row_number() OVER (ORDER BY term))::INTEGER, term
FROM (SELECT unnest([kind, npu_dtype, bench_dtype, npu_shape, bench_shape, result, verdict, err_message, mark, mark_rules]) AS term FROM result_data
      UNION
      SELECT unnest([io, role, direction, err_kind, floor_source, verdict, link]) FROM blame_data)
WHERE term IS NOT NULL;
CREATE TABLE result_data_v8 (
  compare_id BIGINT,
  out_seq BIGINT,                 -- 0-based line in the workbook (the advisor's "Line")
  -- terms.term_id of kind (schema version 8; so are every <column>_id below but the names'):
  kind_id INTEGER,                -- matched | npu_only | bench_only | npu_extra | mapped
  op_id INTEGER,                  -- names.name_id of op_name (0: NULL)
  npu_id INTEGER, bench_id INTEGER,  -- of npu_name and bench_name (0 on the absent side)
  npu_dtype_id INTEGER, bench_dtype_id INTEGER,
  npu_shape_id INTEGER, bench_shape_id INTEGER,
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
  result_id INTEGER,              -- Result (statistics, md5) or Accuracy Reached or Not (tensor), as written
  verdict_id INTEGER,             -- pass | warning | fail | unmatched | none
  failing BOOLEAN,                -- the advisor's test: Warning (statistics), Different (md5), No (tensor)
  err_message_id INTEGER,
  mark_id INTEGER,                -- red | yellow | NULL
  mark_rules_id INTEGER,          -- the highlight rules that fired
  severity SMALLINT,              -- 0 pass, 1 yellow, 2 red or failing; NULL when not compared
  reason VARCHAR                  -- Reason (default mode, schema version 2): the rule that marked the
                                  -- row and its numbers, a dtype note, or why it is unmatched
);

INSERT INTO result_data_v8 BY NAME
SELECT r.* EXCLUDE (kind, npu_dtype, bench_dtype, npu_shape, bench_shape, result, verdict, err_message, mark, mark_rules),
       t_kind.term_id AS kind_id,
       t_npu_dtype.term_id AS npu_dtype_id,
       t_bench_dtype.term_id AS bench_dtype_id,
       t_npu_shape.term_id AS npu_shape_id,
       t_bench_shape.term_id AS bench_shape_id,
       t_result.term_id AS result_id,
       t_verdict.term_id AS verdict_id,
       t_err_message.term_id AS err_message_id,
       t_mark.term_id AS mark_id,
       t_mark_rules.term_id AS mark_rules_id
FROM result_data r
LEFT JOIN terms t_kind ON t_kind.term = r.kind
LEFT JOIN terms t_npu_dtype ON t_npu_dtype.term = r.npu_dtype
LEFT JOIN terms t_bench_dtype ON t_bench_dtype.term = r.bench_dtype
LEFT JOIN terms t_npu_shape ON t_npu_shape.term = r.npu_shape
LEFT JOIN terms t_bench_shape ON t_bench_shape.term = r.bench_shape
LEFT JOIN terms t_result ON t_result.term = r.result
LEFT JOIN terms t_verdict ON t_verdict.term = r.verdict
LEFT JOIN terms t_err_message ON t_err_message.term = r.err_message
LEFT JOIN terms t_mark ON t_mark.term = r.mark
LEFT JOIN terms t_mark_rules ON t_mark_rules.term = r.mark_rules
ORDER BY r.compare_id, r.out_seq;
DROP VIEW result_rows;
DROP TABLE result_data;
ALTER TABLE result_data_v8 RENAME TO result_data;
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
       -- a column a later version adds to result_data (none in version 8)
       r.* EXCLUDE (compare_id, out_seq, kind_id, op_id, npu_id, bench_id, npu_dtype_id,
                   bench_dtype_id, npu_shape_id, bench_shape_id, max_diff, min_diff, mean_diff,
                   norm_diff, max_rel_pct, min_rel_pct, mean_rel_pct, norm_rel_pct, npu_max,
                   npu_min, npu_mean, npu_norm, bench_max, bench_min, bench_mean, bench_norm,
                   texts, tensor_metrics, mode_texts, result_id, verdict_id, failing,
                   err_message_id, mark_id, mark_rules_id, severity, reason)
FROM result_data r
JOIN names o ON o.name_id = r.op_id
JOIN names n ON n.name_id = r.npu_id
JOIN names b ON b.name_id = r.bench_id;
CREATE TABLE blame_data_v8 (
  compare_id BIGINT,
  out_seq BIGINT,                 -- the row (result_rows.out_seq)
  op_seq INTEGER,                 -- the NPU op's place in its dump (execution order)
  op_id INTEGER,                  -- names.name_id of op_name, the dump.json entry (0: NULL)
  npu_id INTEGER,                 -- names.name_id of npu_name (0: NULL)
  -- terms.term_id of io (schema version 8; so are role_id, direction_id, err_kind_id,
  -- floor_source_id, verdict_id and link_id: NULL for NULL)
  io_id INTEGER,                  -- input | output
  role_id INTEGER,                -- output | linked input | external input | in-place input | constant input
  direction_id INTEGER,           -- forward | backward | '' (neither)
  is_module BOOLEAN,
  collective BOOLEAN,             -- a Distributed.* op (weighed across ranks by the view blame)
  err_kind_id INTEGER,            -- how output_err was computed (row_error.err_kind)
  input_err DOUBLE,               -- what the inputs bring (an output: its op's worst input)
  output_err DOUBLE,              -- the row's own error (row_error.err)
  floor DOUBLE,                   -- the error its dtype (or the noise run) explains
  floor_source_id INTEGER,        -- 'dtype <name>', 'noise run', 'md5 (equal or not)'
  amplification DOUBLE,           -- output_err / input_err (inf: equal inputs, different output)
  verdict_id INTEGER,             -- local | inherited | clean, on its own rank (see the view blame)
  reason VARCHAR,
  link_id INTEGER,                -- an input's link to its producer: hash, md5, statistics, reshape, external, constant
  candidates INTEGER,             -- earlier outputs with that content (the nearest one is taken)
  via VARCHAR,                    -- the producer of an input, or the worst input of an output
  band DOUBLE                     -- what the row adds over its inputs: its noise band when this compare is a noise run
);

INSERT INTO blame_data_v8 BY NAME
SELECT d.* EXCLUDE (io, role, direction, err_kind, floor_source, verdict, link),
       t_io.term_id AS io_id,
       t_role.term_id AS role_id,
       t_direction.term_id AS direction_id,
       t_err_kind.term_id AS err_kind_id,
       t_floor_source.term_id AS floor_source_id,
       t_verdict.term_id AS verdict_id,
       t_link.term_id AS link_id
FROM blame_data d
LEFT JOIN terms t_io ON t_io.term = d.io
LEFT JOIN terms t_role ON t_role.term = d.role
LEFT JOIN terms t_direction ON t_direction.term = d.direction
LEFT JOIN terms t_err_kind ON t_err_kind.term = d.err_kind
LEFT JOIN terms t_floor_source ON t_floor_source.term = d.floor_source
LEFT JOIN terms t_verdict ON t_verdict.term = d.verdict
LEFT JOIN terms t_link ON t_link.term = d.link
ORDER BY d.compare_id, d.out_seq;
DROP VIEW blame_rows;
DROP TABLE blame_data;
ALTER TABLE blame_data_v8 RENAME TO blame_data;
CREATE VIEW blame_rows AS
SELECT d.compare_id, r.run_id, d.out_seq, d.op_seq, o.name AS op_name, n.name AS npu_name,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.io_id] AS io,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.role_id] AS role,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.direction_id] AS direction,
       d.is_module, d.collective,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.err_kind_id] AS err_kind,
       d.input_err, d.output_err, d.floor,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.floor_source_id] AS floor_source,
       r.floor_factor, r.amp_limit, d.amplification,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.verdict_id] AS verdict, d.reason,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.link_id] AS link,
       d.candidates, d.via, d.band, r.noise_source
FROM blame_data d
JOIN blame_runs r ON r.compare_id = d.compare_id
JOIN names o ON o.name_id = d.op_id
JOIN names n ON n.name_id = d.npu_id;
