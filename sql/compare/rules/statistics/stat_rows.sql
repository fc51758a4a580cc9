-- description: Statistics mode: each row's displayed cells (names, dtypes, shapes, the eight statistics), its four differences, its four relative errors (numbers in percent, or their fixed texts' codes, which rel_text prints; N/A on an unmatched row) and its Warning flag (spec §4.1, §5.4; --compat only, NULL in the default mode).
-- Only what result_statistics shows: the default mode makes this view a table (beside the
-- verdicts), and copying the raw columns of display_rows too took a fifth of its time.
-- The differences and relative errors are shown_diff's and shown_rel's cases
-- (sql/compare/schema/10_macros.sql) written out, with whether both sides of a statistic are
-- numbers (is_num) tested once a row in d, not in each of the two macros and their branches:
-- DuckDB repeats an IN list in every CASE that holds it (each use of a macro is its own
-- expression), and those sixteen tests a row were ~19 M instructions of a 24,524-row pair.
-- tests/sql/test_stat_rows.py checks these columns against the macros.
SELECT
  out_seq, kind, stack,
  "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
  "NPU max", "NPU min", "NPU mean", "NPU l2norm",
  "Bench max", "Bench min", "Bench mean", "Bench l2norm",
  -- shown_diff: N/A unmatched, the finite difference, else its text (None where a side is not
  -- a number)
  CASE WHEN matched AND max_nums AND isfinite(n_max - b_max) THEN union_value(n := n_max - b_max)::cell
       WHEN NOT matched THEN union_value(s := 'N/A')::cell
       ELSE union_value(s := CASE WHEN NOT coalesce(max_nums, false) OR n_max - b_max IS NULL THEN 'None'
                                  WHEN isnan(n_max - b_max) THEN 'nan' || chr(9)
                                  WHEN n_max - b_max > 0 THEN 'inf' || chr(9)
                                  ELSE '-inf' || chr(9) END)::cell END AS max_diff,
  CASE WHEN matched AND min_nums AND isfinite(n_min - b_min) THEN union_value(n := n_min - b_min)::cell
       WHEN NOT matched THEN union_value(s := 'N/A')::cell
       ELSE union_value(s := CASE WHEN NOT coalesce(min_nums, false) OR n_min - b_min IS NULL THEN 'None'
                                  WHEN isnan(n_min - b_min) THEN 'nan' || chr(9)
                                  WHEN n_min - b_min > 0 THEN 'inf' || chr(9)
                                  ELSE '-inf' || chr(9) END)::cell END AS min_diff,
  CASE WHEN matched AND mean_nums AND isfinite(n_mean - b_mean) THEN union_value(n := n_mean - b_mean)::cell
       WHEN NOT matched THEN union_value(s := 'N/A')::cell
       ELSE union_value(s := CASE WHEN NOT coalesce(mean_nums, false) OR n_mean - b_mean IS NULL THEN 'None'
                                  WHEN isnan(n_mean - b_mean) THEN 'nan' || chr(9)
                                  WHEN n_mean - b_mean > 0 THEN 'inf' || chr(9)
                                  ELSE '-inf' || chr(9) END)::cell END AS mean_diff,
  CASE WHEN matched AND norm_nums AND isfinite(n_norm - b_norm) THEN union_value(n := n_norm - b_norm)::cell
       WHEN NOT matched THEN union_value(s := 'N/A')::cell
       ELSE union_value(s := CASE WHEN NOT coalesce(norm_nums, false) OR n_norm - b_norm IS NULL THEN 'None'
                                  WHEN isnan(n_norm - b_norm) THEN 'nan' || chr(9)
                                  WHEN n_norm - b_norm > 0 THEN 'inf' || chr(9)
                                  ELSE '-inf' || chr(9) END)::cell END AS norm_diff,
  -- shown_rel as a number (rel_text prints it, sql/compare/schema/10_macros.sql): the relative
  -- error in percent, or its fixed text's code (-1 N/A: unmatched, or bench is 0; -2 ' ': a side is not a
  -- number; -3 0.0%: both are equal). result_statistics prints it (rel_text), the workbook's C
  -- renderer too (msq/export/_sheetxml.c): DuckDB's CAST(x AS VARCHAR) took ~1,400 instructions
  -- a number, and a text column more to write than a DOUBLE.
  CASE WHEN NOT matched THEN -1 WHEN NOT max_nums THEN -2 WHEN b_max = 0 THEN -1
       WHEN n_max = b_max AND isfinite(b_max) THEN -3
       ELSE abs(((n_max - b_max) / b_max) * 100) END AS max_rel_pct,
  CASE WHEN NOT matched THEN -1 WHEN NOT min_nums THEN -2 WHEN b_min = 0 THEN -1
       WHEN n_min = b_min AND isfinite(b_min) THEN -3
       ELSE abs(((n_min - b_min) / b_min) * 100) END AS min_rel_pct,
  CASE WHEN NOT matched THEN -1 WHEN NOT mean_nums THEN -2 WHEN b_mean = 0 THEN -1
       WHEN n_mean = b_mean AND isfinite(b_mean) THEN -3
       ELSE abs(((n_mean - b_mean) / b_mean) * 100) END AS mean_rel_pct,
  CASE WHEN NOT matched THEN -1 WHEN NOT norm_nums THEN -2 WHEN b_norm = 0 THEN -1
       WHEN n_norm = b_norm AND isfinite(b_norm) THEN -3
       ELSE abs(((n_norm - b_norm) / b_norm) * 100) END AS norm_rel_pct,
  -- msprobe's Warning flag, which only --compat shows (the default mode warns on the rows its
  -- rules colour): NULL in the default mode, where its four tests per row cost ~40 M
  -- instructions of a 24,500-row pair (a CASE computes its THEN for the rows its WHEN selects)
  CASE WHEN (SELECT compat FROM settings) THEN
    stat_flag(n_max, n_max_k, b_max, b_max_k) OR stat_flag(n_min, n_min_k, b_min, b_min_k)
    OR stat_flag(n_mean, n_mean_k, b_mean, b_mean_k)
    OR stat_flag(n_norm, n_norm_k, b_norm, b_norm_k) END AS flagged
FROM (
  SELECT d.*, kind = 'matched' AS matched,
         is_num(n_max_k) AND is_num(b_max_k) AS max_nums,
         is_num(n_min_k) AND is_num(b_min_k) AS min_nums,
         is_num(n_mean_k) AND is_num(b_mean_k) AS mean_nums,
         is_num(n_norm_k) AND is_num(b_norm_k) AS norm_nums
  FROM display_rows d
)
