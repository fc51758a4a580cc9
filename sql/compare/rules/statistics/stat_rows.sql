-- description: Statistics mode: each row's displayed cells (names, dtypes, shapes, the eight statistics and the four differences, each cell as plain columns: "<cell>" its number, and on the rows that have any, its text in the list cell_texts (has_cell_text) and a statistic's boolean in cell_bools; at most one not NULL), its four relative errors (numbers in percent, or their fixed texts' codes, which rel_text prints; N/A on an unmatched row) and its Warning flag (spec §4.1, §5.4; --compat only, NULL in the default mode).
-- Only what result_statistics shows: the default mode makes this view a table (beside the
-- verdicts), and copying the raw columns of display_rows too took a fifth of its time. It reads
-- display_names (display_rows without its statistics' cells, which this view makes anew).
-- The differences and relative errors are shown_diff's and shown_rel's cases
-- (sql/compare/schema/10_macros.sql) written out, with whether both sides of a statistic are
-- numbers (is_num) tested once a row in d, not in each of the two macros and their branches:
-- DuckDB repeats an IN list in every CASE that holds it (each use of a macro is its own
-- expression), and those sixteen tests a row were ~19 M instructions of a 24,524-row pair.
-- The cells as plain columns, not the cell union (plain_cell makes the cell again,
-- sql/compare/schema/10_macros.sql; result_statistics does): a CASE whose result is a union copies
-- its struct at each level and the table insert appends four vectors a cell; the plain columns
-- cost ~54 M instructions less a 24,500-row pair (bench/README, "Session 19: rows"), and the
-- history and the workbook's C renderer read them directly. Each number first (a statistic:
-- shown_stat's finite number of kind f or i, its boolean of kind b; a difference: shown_diff's
-- finite difference), each text from whether they are NULL (shown_stat's and shown_diff's other
-- branches, in their order). The texts and booleans are NULL on most rows (~94 % of
-- root-8x8-5000's): they are two lists, NULL on a row without any, not twenty columns (each NULL
-- was appended to the table and scanned by every reader), and the texts are made on the rows
-- that have one alone (has_cell_text, tested on the numbers): ~190 M instructions less a 6-pair
-- root batch (bench/README, "Session 25: sparse").
-- tests/sql/test_stat_rows.py checks these columns against the macros.
SELECT
  out_seq, kind, stack,
  "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
  -- shown_stat: N/A on the absent side, the finite number (f, i), the boolean (b), else its text
  -- (a boolean statistic without a number: all three NULL, plain_cell's boolean NULL)
  n_max_v AS "NPU max", n_min_v AS "NPU min", n_mean_v AS "NPU mean", n_norm_v AS "NPU l2norm",
  b_max_v AS "Bench max", b_min_v AS "Bench min", b_mean_v AS "Bench mean",
  b_norm_v AS "Bench l2norm",
  -- shown_diff: N/A unmatched, the finite difference, else its text (None where a side is not
  -- a number)
  max_diff, min_diff, mean_diff, norm_diff,
  max_rel_pct, min_rel_pct, mean_rel_pct, norm_rel_pct, flagged,
  has_cell_text,
  -- the twelve cells' texts (plain_diff_text, plain_stat_text), made on the rows that have one
  -- alone (a CASE computes its THEN for the rows its WHEN selects)
  CASE WHEN has_cell_text THEN [
    plain_diff_text(max_diff, matched, max_nums, max_d),
    plain_diff_text(min_diff, matched, min_nums, min_d),
    plain_diff_text(mean_diff, matched, mean_nums, mean_d),
    plain_diff_text(norm_diff, matched, norm_nums, norm_d),
    plain_stat_text(n_max_v, n_absent, n_max, n_max_k, n_max_s, n_max_fi, n_max_b),
    plain_stat_text(n_min_v, n_absent, n_min, n_min_k, n_min_s, n_min_fi, n_min_b),
    plain_stat_text(n_mean_v, n_absent, n_mean, n_mean_k, n_mean_s, n_mean_fi, n_mean_b),
    plain_stat_text(n_norm_v, n_absent, n_norm, n_norm_k, n_norm_s, n_norm_fi, n_norm_b),
    plain_stat_text(b_max_v, b_absent, b_max, b_max_k, b_max_s, b_max_fi, b_max_b),
    plain_stat_text(b_min_v, b_absent, b_min, b_min_k, b_min_s, b_min_fi, b_min_b),
    plain_stat_text(b_mean_v, b_absent, b_mean, b_mean_k, b_mean_s, b_mean_fi, b_mean_b),
    plain_stat_text(b_norm_v, b_absent, b_norm, b_norm_k, b_norm_s, b_norm_fi, b_norm_b)]
  END AS cell_texts,
  -- the eight statistics' booleans (plain_stat_bool), made on the rows that have one (a
  -- statistic of kind b: plain_stat_has_bool) alone
  CASE WHEN plain_stat_has_bool(n_absent, n_max, n_max_b)
            OR plain_stat_has_bool(n_absent, n_min, n_min_b)
            OR plain_stat_has_bool(n_absent, n_mean, n_mean_b)
            OR plain_stat_has_bool(n_absent, n_norm, n_norm_b)
            OR plain_stat_has_bool(b_absent, b_max, b_max_b)
            OR plain_stat_has_bool(b_absent, b_min, b_min_b)
            OR plain_stat_has_bool(b_absent, b_mean, b_mean_b)
            OR plain_stat_has_bool(b_absent, b_norm, b_norm_b)
       THEN [plain_stat_bool(n_absent, n_max, n_max_b),
             plain_stat_bool(n_absent, n_min, n_min_b),
             plain_stat_bool(n_absent, n_mean, n_mean_b),
             plain_stat_bool(n_absent, n_norm, n_norm_b),
             plain_stat_bool(b_absent, b_max, b_max_b),
             plain_stat_bool(b_absent, b_min, b_min_b),
             plain_stat_bool(b_absent, b_mean, b_mean_b),
             plain_stat_bool(b_absent, b_norm, b_norm_b)] END AS cell_bools
FROM (
-- whether any of the twelve cells has a text: a difference where it is not a finite number
-- (plain_diff_text's), a statistic where plain_stat_text gives one (plain_stat_has_text),
-- tested on the numbers, not on the texts (made above on those rows alone)
SELECT d.*,
  max_diff IS NULL OR min_diff IS NULL OR mean_diff IS NULL OR norm_diff IS NULL
  OR plain_stat_has_text(n_max_v, n_absent, n_max_b)
  OR plain_stat_has_text(n_min_v, n_absent, n_min_b)
  OR plain_stat_has_text(n_mean_v, n_absent, n_mean_b)
  OR plain_stat_has_text(n_norm_v, n_absent, n_norm_b)
  OR plain_stat_has_text(b_max_v, b_absent, b_max_b)
  OR plain_stat_has_text(b_min_v, b_absent, b_min_b)
  OR plain_stat_has_text(b_mean_v, b_absent, b_mean_b)
  OR plain_stat_has_text(b_norm_v, b_absent, b_norm_b) AS has_cell_text
FROM (
  SELECT d.*,
    plain_stat_num(n_absent, n_max, n_max_fi) AS n_max_v,
    plain_stat_num(n_absent, n_min, n_min_fi) AS n_min_v,
    plain_stat_num(n_absent, n_mean, n_mean_fi) AS n_mean_v,
    plain_stat_num(n_absent, n_norm, n_norm_fi) AS n_norm_v,
    plain_stat_num(b_absent, b_max, b_max_fi) AS b_max_v,
    plain_stat_num(b_absent, b_min, b_min_fi) AS b_min_v,
    plain_stat_num(b_absent, b_mean, b_mean_fi) AS b_mean_v,
    plain_stat_num(b_absent, b_norm, b_norm_fi) AS b_norm_v,
    CASE WHEN matched AND max_nums AND isfinite(max_d) THEN max_d END AS max_diff,
    CASE WHEN matched AND min_nums AND isfinite(min_d) THEN min_d END AS min_diff,
    CASE WHEN matched AND mean_nums AND isfinite(mean_d) THEN mean_d END AS mean_diff,
    CASE WHEN matched AND norm_nums AND isfinite(norm_d) THEN norm_d END AS norm_diff,
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
    SELECT d.*, kind = 'matched' AS matched, kind = 'bench_only' AS n_absent,
           kind = 'npu_only' AS b_absent,
           n_max IS NOT NULL AND b_max IS NOT NULL AS max_nums,
           n_min IS NOT NULL AND b_min IS NOT NULL AS min_nums,
           n_mean IS NOT NULL AND b_mean IS NOT NULL AS mean_nums,
           n_norm IS NOT NULL AND b_norm IS NOT NULL AS norm_nums,
           n_max - b_max AS max_d, n_min - b_min AS min_d, n_mean - b_mean AS mean_d,
           n_norm - b_norm AS norm_d,
           NOT n_max_b AND n_max IS NOT NULL AS n_max_fi,
           NOT n_min_b AND n_min IS NOT NULL AS n_min_fi,
           NOT n_mean_b AND n_mean IS NOT NULL AS n_mean_fi,
           NOT n_norm_b AND n_norm IS NOT NULL AS n_norm_fi,
           NOT b_max_b AND b_max IS NOT NULL AS b_max_fi,
           NOT b_min_b AND b_min IS NOT NULL AS b_min_fi,
           NOT b_mean_b AND b_mean IS NOT NULL AS b_mean_fi,
           NOT b_norm_b AND b_norm IS NOT NULL AS b_norm_fi
    -- each statistic's kind tested once a side, for a boolean (b); the rest from its number:
    -- the readers give a <stat>_num exactly for kinds i, f and b (msq/flatten.py's _kind,
    -- msq/_flatten.c's stat_cols; tests/sql/test_stat_rows.py reads a dump of every kind with
    -- both), so a number shown as such (kind f or i: fi) is a number of another kind than b,
    -- and is_num is its number's not being NULL
    FROM (SELECT d.*,
             n_max_k = 'b' AS n_max_b,
             n_min_k = 'b' AS n_min_b,
             n_mean_k = 'b' AS n_mean_b,
             n_norm_k = 'b' AS n_norm_b,
             b_max_k = 'b' AS b_max_b,
             b_min_k = 'b' AS b_min_b,
             b_mean_k = 'b' AS b_mean_b,
             b_norm_k = 'b' AS b_norm_b
          FROM display_names d) d
  ) d
) d
)
