-- description: Statistics mode: the four differences, relative errors and the Warning flag of each row (spec §4.1).
SELECT
  j.*,
  stat_diff(n_max, n_max_k, b_max, b_max_k) AS max_diff,
  stat_diff(n_min, n_min_k, b_min, b_min_k) AS min_diff,
  stat_diff(n_mean, n_mean_k, b_mean, b_mean_k) AS mean_diff,
  stat_diff(n_norm, n_norm_k, b_norm, b_norm_k) AS norm_diff,
  stat_rel(n_max, n_max_k, b_max, b_max_k) AS max_rel,
  stat_rel(n_min, n_min_k, b_min, b_min_k) AS min_rel,
  stat_rel(n_mean, n_mean_k, b_mean, b_mean_k) AS mean_rel,
  stat_rel(n_norm, n_norm_k, b_norm, b_norm_k) AS norm_rel,
  stat_flag(n_max, n_max_k, b_max, b_max_k) OR stat_flag(n_min, n_min_k, b_min, b_min_k)
    OR stat_flag(n_mean, n_mean_k, b_mean, b_mean_k)
    OR stat_flag(n_norm, n_norm_k, b_norm, b_norm_k) AS flagged
FROM display_rows j
