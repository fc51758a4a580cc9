-- description: Real-data (tensor) mode output rows as typed history columns, from hist_result.
-- The cells' texts in one list (result_data.texts, NULL on a row of numbers alone).
WITH v AS (
  SELECT r.*,
         CASE r."Accuracy Reached or Not"
           WHEN 'Yes' THEN 'pass' WHEN 'No' THEN 'fail' WHEN 'Unmatched' THEN 'unmatched'
           ELSE CASE WHEN r.kind = 'matched' THEN 'none' ELSE 'unmatched' END
         END AS verdict,
         hist_text("Cosine") AS cosine_text,
         hist_text("MaxAbsErr") AS max_abs_err_text,
         hist_text("MaxRelativeErr") AS max_rel_err_text,
         hist_text("One Thousandth Err Ratio") AS one_thousandth_err_ratio_text,
         hist_text("Five Thousandths Err Ratio") AS five_thousandths_err_ratio_text,
         hist_text("NPU max") AS npu_max_text,
         hist_text("NPU min") AS npu_min_text,
         hist_text("NPU mean") AS npu_mean_text,
         hist_text("NPU l2norm") AS npu_norm_text,
         hist_text("Bench max") AS bench_max_text,
         hist_text("Bench min") AS bench_min_text,
         hist_text("Bench mean") AS bench_mean_text,
         hist_text("Bench l2norm") AS bench_norm_text
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
  -- cosine, max_abs_err, max_rel_err, one_thousandth_err_ratio, five_thousandths_err_ratio
  -- in one list (schema version 7)
  hist_metrics(hist_num("Cosine"), hist_num("MaxAbsErr"), hist_num("MaxRelativeErr"),
               hist_num("One Thousandth Err Ratio"), hist_num("Five Thousandths Err Ratio"))
    AS tensor_metrics,
  hist_num("NPU max") AS npu_max,
  hist_num("NPU min") AS npu_min,
  hist_num("NPU mean") AS npu_mean,
  hist_num("NPU l2norm") AS npu_norm,
  hist_num("Bench max") AS bench_max,
  hist_num("Bench min") AS bench_min,
  hist_num("Bench mean") AS bench_mean,
  hist_num("Bench l2norm") AS bench_norm,
  CASE WHEN coalesce(cosine_text, max_abs_err_text, max_rel_err_text,
                     one_thousandth_err_ratio_text, five_thousandths_err_ratio_text,
                     npu_max_text, npu_min_text, npu_mean_text, npu_norm_text, bench_max_text,
                     bench_min_text, bench_mean_text, bench_norm_text) IS NULL THEN NULL
       ELSE [NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, cosine_text, max_abs_err_text,
             max_rel_err_text, one_thousandth_err_ratio_text, five_thousandths_err_ratio_text,
             npu_max_text, npu_min_text, npu_mean_text, npu_norm_text, bench_max_text,
             bench_min_text, bench_mean_text, bench_norm_text]::VARCHAR[] END AS texts,
  "Accuracy Reached or Not" AS result,
  verdict,
  verdict = 'fail' AS failing,
  "Err_message" AS err_message,
  mark, mark_rules,
  -- the default mode's verdict is its mark (a yellow row fails too, and stays severity 1)
  hist_severity(mark, verdict = 'fail' AND s.compat_mode, verdict) AS severity,
  hist_mode_texts(NULL, NULL, CASE WHEN s.stack_mode THEN "NPU_Stack_Info" END,
                  CASE WHEN kind = 'matched' THEN "Data_name" END) AS mode_texts,
  nullif("Reason", '') AS reason
-- the settings joined, not read by scalar subqueries: ~5 ms less to plan, on every compare
FROM v LEFT JOIN (SELECT stack AS stack_mode, compat AS compat_mode FROM settings) s ON true
