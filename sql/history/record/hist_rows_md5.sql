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
  "Result" AS result,
  verdict,
  verdict = 'fail' AS failing,
  NULL::VARCHAR AS err_message,
  NULL::VARCHAR AS mark, NULL::VARCHAR AS mark_rules,
  hist_severity(NULL, verdict = 'fail', verdict) AS severity,
  -- npu_md5, bench_md5, npu_stack, data_name in one list (schema version 7)
  hist_mode_texts(CASE WHEN kind = 'matched' THEN "NPU MD5" END,
                  CASE WHEN kind = 'matched' THEN "BENCH MD5" END,
                  CASE WHEN s.stack_mode THEN "NPU_Stack_Info" END, NULL) AS mode_texts,
  nullif("Reason", '') AS reason
-- the settings joined, not read by scalar subqueries: ~5 ms less to plan, on every compare
FROM v LEFT JOIN (SELECT stack AS stack_mode, compat AS compat_mode FROM settings) s ON true
