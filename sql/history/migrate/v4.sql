-- History schema version 3 -> 4: the op dictionary. Each name is stored once in names; the
-- table result_rows becomes result_data, which holds the names' keys, and the view result_rows
-- joins them back (same columns, same order, same rows). The same DDL as
-- sql/history/schema/10_tables.sql. Rewrites every result row once (a 20-run history of 31M
-- rows: minutes); the file does not shrink, DuckDB reuses the old table's blocks.
CREATE TABLE names (
  name_id INTEGER,                -- 0: NULL; then 1, 2, 3, ... as the names were first recorded
  name VARCHAR                    -- an op_name, npu_name or bench_name; each name once
);
INSERT INTO names VALUES (0, NULL);
-- the names in the order of the compare that recorded each first (then by row, then by name)
INSERT INTO names
SELECT (row_number() OVER (ORDER BY first_compare, first_seq, name))::INTEGER, name
FROM (
  SELECT name, min(compare_id) AS first_compare, min(out_seq) AS first_seq
  FROM (SELECT compare_id, out_seq, unnest([op_name, npu_name, bench_name]) AS name
        FROM result_rows)
  WHERE name IS NOT NULL
  GROUP BY name
);
CREATE TABLE result_data (
  compare_id BIGINT,
  out_seq BIGINT,                 -- 0-based line in the workbook (the advisor's "Line")
  kind VARCHAR,                   -- matched | npu_only | bench_only | npu_extra | mapped
  op_id INTEGER,                  -- names.name_id of op_name (0: NULL)
  npu_id INTEGER, bench_id INTEGER,  -- of npu_name and bench_name (0 on the absent side)
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

INSERT INTO result_data BY NAME
SELECT r.* EXCLUDE (op_name, npu_name, bench_name),
       coalesce(o.name_id, 0) AS op_id, coalesce(n.name_id, 0) AS npu_id,
       coalesce(b.name_id, 0) AS bench_id
FROM result_rows r
LEFT JOIN names o ON o.name = r.op_name
LEFT JOIN names n ON n.name = r.npu_name
LEFT JOIN names b ON b.name = r.bench_name;
DROP TABLE result_rows;
CREATE VIEW result_rows AS
SELECT r.compare_id, r.out_seq, r.kind, o.name AS op_name, n.name AS npu_name, b.name AS bench_name,
       r.* EXCLUDE (compare_id, out_seq, kind, op_id, npu_id, bench_id)
FROM result_data r
JOIN names o ON o.name_id = r.op_id
JOIN names n ON n.name_id = r.npu_id
JOIN names b ON b.name_id = r.bench_id;
