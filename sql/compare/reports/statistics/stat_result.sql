-- description: result_statistics' rows with each relative error as a number (in percent, or its fixed text's code: stat_rows' <stat>_rel_pct), what the default mode materialises: its text is printed only for the readers that ask (result_statistics by rel_text; the workbook's C renderer, msq/export/_sheetxml.c).
SELECT
  out_seq,
  kind,
  "NPU Name",
  "Bench Name",
  "NPU Dtype",
  "Bench Dtype",
  "NPU Tensor Shape",
  "Bench Tensor Shape",
  max_diff AS "Max diff",
  min_diff AS "Min diff",
  mean_diff AS "Mean diff",
  norm_diff AS "L2norm diff",
  max_rel_pct AS "MaxRelativeErr",
  min_rel_pct AS "MinRelativeErr",
  mean_rel_pct AS "MeanRelativeErr",
  norm_rel_pct AS "NormRelativeErr",
  "NPU max",
  "NPU min",
  "NPU mean",
  "NPU l2norm",
  "Bench max",
  "Bench min",
  "Bench mean",
  "Bench l2norm",
  CASE kind WHEN 'matched' THEN CASE WHEN warn THEN 'Warning' ELSE '' END ELSE 'N/A' END AS "Result",
  CASE kind WHEN 'matched' THEN CASE WHEN warn THEN 'Need double check api accuracy.' ELSE '' END
            WHEN 'bench_only' THEN 'No NPU data matched' || unmatched_why
            ELSE 'No bench data matched' || unmatched_why END AS "Err_message",
  stack AS "NPU_Stack_Info",
  coalesce(reason, '') AS "Reason"
FROM (
  -- msprobe's Warning flag under --compat; the default mode warns on the rows its rules colour
  SELECT s.*, v.reason,
         CASE WHEN (SELECT compat FROM settings) THEN flagged ELSE v.mark IS NOT NULL END AS warn,
         CASE WHEN (SELECT compat FROM settings) OR v.unmatched_reason IS NULL THEN '.'
              ELSE ': ' || v.unmatched_reason || '.' END AS unmatched_why
  FROM stat_rows s LEFT JOIN verdicts v USING (out_seq)
)
