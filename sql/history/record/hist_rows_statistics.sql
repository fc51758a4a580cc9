-- description: Statistics-mode output rows as typed history columns, from hist_result (inserted into result_rows by name).
WITH v AS (
  SELECT r.*,
         CASE r."Result" WHEN '' THEN 'pass' WHEN 'Warning' THEN 'warning' ELSE 'unmatched' END
           AS verdict
  FROM hist_result r
)
SELECT
  out_seq, kind, op_name,
  CASE WHEN kind <> 'bench_only' THEN "NPU Name" END AS npu_name,
  CASE WHEN kind <> 'npu_only' THEN "Bench Name" END AS bench_name,
  CASE WHEN kind <> 'bench_only' THEN "NPU Dtype" END AS npu_dtype,
  CASE WHEN kind <> 'npu_only' THEN "Bench Dtype" END AS bench_dtype,
  CASE WHEN kind <> 'bench_only' THEN "NPU Tensor Shape" END AS npu_shape,
  CASE WHEN kind <> 'npu_only' THEN "Bench Tensor Shape" END AS bench_shape,
  hist_num("Max diff") AS max_diff, hist_text("Max diff") AS max_diff_text,
  hist_num("Min diff") AS min_diff, hist_text("Min diff") AS min_diff_text,
  hist_num("Mean diff") AS mean_diff, hist_text("Mean diff") AS mean_diff_text,
  hist_num("L2norm diff") AS norm_diff, hist_text("L2norm diff") AS norm_diff_text,
  hist_pct("MaxRelativeErr") AS max_rel_pct, hist_pct_text("MaxRelativeErr") AS max_rel_pct_text,
  hist_pct("MinRelativeErr") AS min_rel_pct, hist_pct_text("MinRelativeErr") AS min_rel_pct_text,
  hist_pct("MeanRelativeErr") AS mean_rel_pct, hist_pct_text("MeanRelativeErr") AS mean_rel_pct_text,
  hist_pct("NormRelativeErr") AS norm_rel_pct, hist_pct_text("NormRelativeErr") AS norm_rel_pct_text,
  hist_num("NPU max") AS npu_max, hist_text("NPU max") AS npu_max_text,
  hist_num("NPU min") AS npu_min, hist_text("NPU min") AS npu_min_text,
  hist_num("NPU mean") AS npu_mean, hist_text("NPU mean") AS npu_mean_text,
  hist_num("NPU l2norm") AS npu_norm, hist_text("NPU l2norm") AS npu_norm_text,
  hist_num("Bench max") AS bench_max, hist_text("Bench max") AS bench_max_text,
  hist_num("Bench min") AS bench_min, hist_text("Bench min") AS bench_min_text,
  hist_num("Bench mean") AS bench_mean, hist_text("Bench mean") AS bench_mean_text,
  hist_num("Bench l2norm") AS bench_norm, hist_text("Bench l2norm") AS bench_norm_text,
  "Result" AS result,
  verdict,
  verdict = 'warning' AS failing,
  "Err_message" AS err_message,
  mark, mark_rules,
  -- the default mode's verdict is its mark (a yellow row fails too, and stays severity 1)
  hist_severity(mark, verdict = 'warning' AND s.compat_mode, verdict) AS severity,
  CASE WHEN s.stack_mode THEN "NPU_Stack_Info" END AS npu_stack,
  nullif("Reason", '') AS reason
-- the settings joined, not read by scalar subqueries: ~5 ms less to plan, on every compare
FROM v LEFT JOIN (SELECT stack AS stack_mode, compat AS compat_mode FROM settings) s ON true
