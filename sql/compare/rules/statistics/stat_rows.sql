-- description: Statistics mode: each row's displayed cells (names, dtypes, shapes, the eight statistics), its four differences and relative errors (N/A on an unmatched row) and its Warning flag (spec §4.1, §5.4; --compat only, NULL in the default mode).
-- Only what result_statistics shows: the default mode makes this view a table (beside the
-- verdicts), and copying the raw columns of display_rows too took a fifth of its time.
SELECT
  out_seq, kind, stack,
  "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
  "NPU max", "NPU min", "NPU mean", "NPU l2norm",
  "Bench max", "Bench min", "Bench mean", "Bench l2norm",
  shown_diff(kind = 'matched', n_max, n_max_k, b_max, b_max_k) AS max_diff,
  shown_diff(kind = 'matched', n_min, n_min_k, b_min, b_min_k) AS min_diff,
  shown_diff(kind = 'matched', n_mean, n_mean_k, b_mean, b_mean_k) AS mean_diff,
  shown_diff(kind = 'matched', n_norm, n_norm_k, b_norm, b_norm_k) AS norm_diff,
  shown_rel(kind = 'matched', n_max, n_max_k, b_max, b_max_k) AS max_rel,
  shown_rel(kind = 'matched', n_min, n_min_k, b_min, b_min_k) AS min_rel,
  shown_rel(kind = 'matched', n_mean, n_mean_k, b_mean, b_mean_k) AS mean_rel,
  shown_rel(kind = 'matched', n_norm, n_norm_k, b_norm, b_norm_k) AS norm_rel,
  -- msprobe's Warning flag, which only --compat shows (the default mode warns on the rows its
  -- rules colour): NULL in the default mode, where its four tests per row cost ~40 M
  -- instructions of a 24,500-row pair (a CASE computes its THEN for the rows its WHEN selects)
  CASE WHEN (SELECT compat FROM settings) THEN
    stat_flag(n_max, n_max_k, b_max, b_max_k) OR stat_flag(n_min, n_min_k, b_min, b_min_k)
    OR stat_flag(n_mean, n_mean_k, b_mean, b_mean_k)
    OR stat_flag(n_norm, n_norm_k, b_norm, b_norm_k) END AS flagged
FROM display_rows
