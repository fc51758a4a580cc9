-- description: The real-data (tensor) workbook: metrics from tensor_metrics, 23 columns (spec §4.3, §5.2, §5.4).
WITH m AS (
  SELECT j.*, tm.*,
         j.kind = 'matched' AND tm.out_seq IS NOT NULL AS has_metrics
  FROM rows_joined j LEFT JOIN tensor_metrics tm USING (out_seq)
)
SELECT
  out_seq,
  kind,
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE npu_name END AS "NPU Name",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE bench_name END AS "Bench Name",
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE coalesce(npu_dtype, 'None') END AS "NPU Dtype",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE coalesce(bench_dtype, 'None') END AS "Bench Dtype",
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE coalesce(npu_shape, 'None') END AS "NPU Tensor Shape",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE coalesce(bench_shape, 'None') END AS "Bench Tensor Shape",
  CASE WHEN has_metrics THEN metric_cell(cosine, cosine_text) ELSE text_cell('None') END AS "Cosine",
  CASE WHEN has_metrics THEN metric_cell(max_abs_err, max_abs_err_text) ELSE text_cell('None') END AS "MaxAbsErr",
  CASE WHEN has_metrics THEN metric_cell(max_rel_err, max_rel_err_text) ELSE text_cell('None') END AS "MaxRelativeErr",
  CASE WHEN has_metrics THEN metric_cell(one_thousandth, one_thousandth_text) ELSE text_cell('None') END AS "One Thousandth Err Ratio",
  CASE WHEN has_metrics THEN metric_cell(five_thousandth, five_thousandth_text) ELSE text_cell('None') END AS "Five Thousandths Err Ratio",
  CASE WHEN kind = 'bench_only' THEN text_cell('N/A') ELSE stat_cell(n_max, n_max_k, n_max_s) END AS "NPU max",
  CASE WHEN kind = 'bench_only' THEN text_cell('N/A') ELSE stat_cell(n_min, n_min_k, n_min_s) END AS "NPU min",
  CASE WHEN kind = 'bench_only' THEN text_cell('N/A') ELSE stat_cell(n_mean, n_mean_k, n_mean_s) END AS "NPU mean",
  CASE WHEN kind = 'bench_only' THEN text_cell('N/A') ELSE stat_cell(n_norm, n_norm_k, n_norm_s) END AS "NPU l2norm",
  CASE WHEN kind = 'npu_only' THEN text_cell('N/A') ELSE stat_cell(b_max, b_max_k, b_max_s) END AS "Bench max",
  CASE WHEN kind = 'npu_only' THEN text_cell('N/A') ELSE stat_cell(b_min, b_min_k, b_min_s) END AS "Bench min",
  CASE WHEN kind = 'npu_only' THEN text_cell('N/A') ELSE stat_cell(b_mean, b_mean_k, b_mean_s) END AS "Bench mean",
  CASE WHEN kind = 'npu_only' THEN text_cell('N/A') ELSE stat_cell(b_norm, b_norm_k, b_norm_s) END AS "Bench l2norm",
  CASE WHEN has_metrics THEN accuracy ELSE 'None' END AS "Accuracy Reached or Not",
  CASE WHEN has_metrics THEN err_message
       WHEN kind = 'bench_only' THEN 'No NPU data matched.'
       ELSE 'No bench data matched.' END
    || CASE WHEN kind = 'matched' AND npu_name <> bench_name
            THEN ' Fuzzy matching data, the comparison accuracy may be affected.' ELSE '' END
    AS "Err_message",
  stack AS "NPU_Stack_Info",
  CASE WHEN kind = 'matched' THEN npu_data_name ELSE '-1' END AS "Data_name",
  -- raw numbers for the highlight rules (before non-finite values become text)
  max_abs_err AS _max_abs_err, one_thousandth AS _one_thousandth, cosine AS _cosine
FROM m
