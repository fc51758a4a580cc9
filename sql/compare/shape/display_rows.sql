-- description: Each output row with the cells every mode shows alike: names, dtypes, shapes (display_names') and the eight statistics (N/A on the missing side, None for a null value), spec §5.4.
SELECT
  d.*,
  shown_stat(kind = 'bench_only', n_max, n_max_k, n_max_s) AS "NPU max",
  shown_stat(kind = 'bench_only', n_min, n_min_k, n_min_s) AS "NPU min",
  shown_stat(kind = 'bench_only', n_mean, n_mean_k, n_mean_s) AS "NPU mean",
  shown_stat(kind = 'bench_only', n_norm, n_norm_k, n_norm_s) AS "NPU l2norm",
  shown_stat(kind = 'npu_only', b_max, b_max_k, b_max_s) AS "Bench max",
  shown_stat(kind = 'npu_only', b_min, b_min_k, b_min_s) AS "Bench min",
  shown_stat(kind = 'npu_only', b_mean, b_mean_k, b_mean_s) AS "Bench mean",
  shown_stat(kind = 'npu_only', b_norm, b_norm_k, b_norm_s) AS "Bench l2norm"
FROM display_names d
