-- description: md5-mode output rows as typed history columns, from hist_result (md5 mode has no colour marks).
WITH v AS (
  SELECT r.*,
         CASE r."Result" WHEN 'pass' THEN 'pass' WHEN 'Different' THEN 'fail' ELSE 'unmatched' END
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
  CASE WHEN kind = 'matched' THEN "NPU MD5" END AS npu_md5,
  CASE WHEN kind = 'matched' THEN "BENCH MD5" END AS bench_md5,
  "Result" AS result,
  verdict,
  verdict = 'fail' AS failing,
  NULL::VARCHAR AS err_message,
  NULL::VARCHAR AS mark, NULL::VARCHAR AS mark_rules,
  hist_severity(NULL, verdict = 'fail', verdict) AS severity,
  CASE WHEN s.stack_mode THEN "NPU_Stack_Info" END AS npu_stack,
  nullif("Reason", '') AS reason
-- the settings joined, not read by scalar subqueries: ~5 ms less to plan, on every compare
FROM v LEFT JOIN (SELECT stack AS stack_mode, compat AS compat_mode FROM settings) s ON true
