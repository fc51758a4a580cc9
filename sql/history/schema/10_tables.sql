-- The history database (schema version 12): every compare msq recorded, and every output row.
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
-- The op dictionary (schema version 4): every op and row name the history holds, once, with its
-- key. result_data holds the keys; the view result_rows joins the names back, so a filter on a
-- name reads this small table and the scan of result_data compares integers. name_id 0 is the
-- absent name (NULL), so the view's joins are inner joins (DuckDB's fast perfect-hash join).
CREATE TABLE IF NOT EXISTS names (
  name_id INTEGER,                -- 0: NULL; then 1, 2, 3, ... as the names were first recorded
  name VARCHAR                    -- an op_name, npu_name or bench_name; each name once
);
INSERT INTO names SELECT 0, NULL WHERE NOT EXISTS (SELECT 1 FROM names WHERE name_id = 0);
-- The terms (schema version 8): the short texts that repeat from row to row (a row's shapes; in
-- versions 8-11 its kind, dtypes, result, verdict, error message, mark and its rules too, which
-- result_classes holds since 12; in versions 8-10 blame's io, role, direction, err_kind,
-- floor_source, verdict and link too, which blame_classes holds since 11), each once with its key.
-- result_data holds the keys (<column>_id; NULL: NULL), and the view result_rows reads the texts
-- back from one list of them all (a term's key is its place in that list; a file of versions 8-11
-- keeps the texts the classes took over here, and its older rows' keys): a directory compare's
-- driver appended, scanned back, analysed and dictionary-compressed each such cell, ~30 % of its
-- CPU. The keys run 1, 2, 3, ... without a gap: a compare's new terms take the next ones after
-- the largest, in their sorted (byte) order.
CREATE TABLE IF NOT EXISTS terms (
  term_id INTEGER,                -- 1, 2, 3, ...
  term VARCHAR                    -- each text once
);
-- The texts of a row's metric cells that are not numbers (schema version 10): each list of them
-- (result_rows' 21 <metric>_text columns, in their order: "N/A", "None", "nan", "unsupported",
-- ...) once, with its key; result_data holds the key (texts_id; NULL on a row of numbers alone)
-- and the view result_rows joins the list back. A 24,500-row pair of a directory compare holds
-- ~15 such lists over its ~3,300 rows with texts, whose ~70,000 list members DuckDB appended,
-- scanned back, analysed and compressed (~37 M instructions, 7.6 % of the driver's recording of
-- the pair; bench/README, "Session 21: hist"). The keys run 1, 2, 3, ... without a gap, a
-- compare's new lists after the largest in the order of their first row.
CREATE TABLE IF NOT EXISTS texts (
  texts_id INTEGER,               -- 1, 2, 3, ...
  texts VARCHAR[]                 -- each list once
);
-- What an output row is (schema version 12): its kind, dtypes, result, verdict, failing, error
-- message, mark, mark rules and severity together, each distinct combination once with its key;
-- result_data holds the key (class_id) and the view result_rows joins the columns back. A
-- 24,500-row pair of a directory compare holds ~21 such combinations, and its driver appended,
-- scanned back, analysed and compressed the ten columns of every row (their terms' keys since
-- version 8; ~58 M instructions, 13 % of its recording of the pair with their lookups;
-- bench/README, "Session 23: hist"). The keys run 1, 2, 3, ... without a gap, a compare's new
-- combinations after the largest in the order of their first row.
CREATE TABLE IF NOT EXISTS result_classes (
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
-- One row per output line of each compare: every metric as a typed column, the verdict and the
-- colour; its names are keys into names (read them through the view result_rows). A metric cell
-- that is text in the workbook ("N/A", "None", "nan", "unsupported") keeps its number column NULL
-- (or NaN/inf for non-finite values) and its text in <metric>_text. Since schema version 5 the
-- texts are one list column, texts (NULL on a row of numbers alone), which result_rows spreads
-- into the <metric>_text columns: 21 mostly-NULL VARCHAR columns cost DuckDB ~450 instructions
-- a NULL cell to append, scan, analyse and compress (a fifth of a directory compare's driver).
-- Since schema version 10 the list is a key into texts (texts_id), and since 12 the row's kind,
-- dtypes, verdict and colour are a key into result_classes (class_id).
-- USING COMPRESSION (new files since session 20; storage only, the same rows and types): the
-- method DuckDB picks for the column on every workload measured, named so that its checkpoint
-- skips analysing the others (~14 M instructions a 24,500-row pair in a directory compare's
-- driver; docs/schema.md, "Recording internals"). Columns whose best method depends on the data
-- (the other term keys, the numbers, the lists) are left to DuckDB.
CREATE TABLE IF NOT EXISTS result_data (
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
-- result_rows: result_data with its names, terms, texts and class (the table of schema versions 1-3,
-- same columns, same order): op_name is the dump.json entry (NPU side; bench side for bench-only
-- rows), npu_name and bench_name are NULL on the absent side. Stored in the file, like a table
-- (docs/schema.md).
CREATE VIEW IF NOT EXISTS result_rows AS
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
