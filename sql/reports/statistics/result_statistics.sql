-- description: The statistics-mode workbook, one row per output line with msprobe's 25 columns (spec §5.2, §5.4).
SELECT
  out_seq,
  kind,
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE npu_name END AS "NPU Name",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE bench_name END AS "Bench Name",
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE coalesce(npu_dtype, 'None') END AS "NPU Dtype",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE coalesce(bench_dtype, 'None') END AS "Bench Dtype",
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE coalesce(npu_shape, 'None') END AS "NPU Tensor Shape",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE coalesce(bench_shape, 'None') END AS "Bench Tensor Shape",
  CASE WHEN kind = 'matched' THEN max_diff ELSE text_cell('N/A') END AS "Max diff",
  CASE WHEN kind = 'matched' THEN min_diff ELSE text_cell('N/A') END AS "Min diff",
  CASE WHEN kind = 'matched' THEN mean_diff ELSE text_cell('N/A') END AS "Mean diff",
  CASE WHEN kind = 'matched' THEN norm_diff ELSE text_cell('N/A') END AS "L2norm diff",
  CASE WHEN kind = 'matched' THEN max_rel ELSE 'N/A' END AS "MaxRelativeErr",
  CASE WHEN kind = 'matched' THEN min_rel ELSE 'N/A' END AS "MinRelativeErr",
  CASE WHEN kind = 'matched' THEN mean_rel ELSE 'N/A' END AS "MeanRelativeErr",
  CASE WHEN kind = 'matched' THEN norm_rel ELSE 'N/A' END AS "NormRelativeErr",
  CASE WHEN kind = 'bench_only' THEN text_cell('N/A') ELSE stat_cell(n_max, n_max_k, n_max_s) END AS "NPU max",
  CASE WHEN kind = 'bench_only' THEN text_cell('N/A') ELSE stat_cell(n_min, n_min_k, n_min_s) END AS "NPU min",
  CASE WHEN kind = 'bench_only' THEN text_cell('N/A') ELSE stat_cell(n_mean, n_mean_k, n_mean_s) END AS "NPU mean",
  CASE WHEN kind = 'bench_only' THEN text_cell('N/A') ELSE stat_cell(n_norm, n_norm_k, n_norm_s) END AS "NPU l2norm",
  CASE WHEN kind = 'npu_only' THEN text_cell('N/A') ELSE stat_cell(b_max, b_max_k, b_max_s) END AS "Bench max",
  CASE WHEN kind = 'npu_only' THEN text_cell('N/A') ELSE stat_cell(b_min, b_min_k, b_min_s) END AS "Bench min",
  CASE WHEN kind = 'npu_only' THEN text_cell('N/A') ELSE stat_cell(b_mean, b_mean_k, b_mean_s) END AS "Bench mean",
  CASE WHEN kind = 'npu_only' THEN text_cell('N/A') ELSE stat_cell(b_norm, b_norm_k, b_norm_s) END AS "Bench l2norm",
  CASE kind WHEN 'matched' THEN CASE WHEN flagged THEN 'Warning' ELSE '' END ELSE 'N/A' END AS "Result",
  CASE kind WHEN 'matched' THEN CASE WHEN flagged THEN 'Need double check api accuracy.' ELSE '' END
            WHEN 'bench_only' THEN 'No NPU data matched.'
            ELSE 'No bench data matched.' END AS "Err_message",
  stack AS "NPU_Stack_Info"
FROM stat_rows
