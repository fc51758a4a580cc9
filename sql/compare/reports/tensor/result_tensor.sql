-- description: The real-data (tensor) workbook: metrics from tensor_metrics, 23 columns (spec §4.3, §5.2, §5.4), and the default mode's Reason; the default mode's Accuracy follows its colour rules and its Err_message says why a row is unmatched (docs/rules.md).
WITH m AS (
  SELECT j.*, tm.*, v.reason, v.mark, v.unmatched_reason,
         j.kind = 'matched' AND tm.out_seq IS NOT NULL AS has_metrics,
         (SELECT compat FROM settings) AS compat
  FROM display_rows j LEFT JOIN tensor_metrics tm USING (out_seq)
  LEFT JOIN verdicts v USING (out_seq)
)
SELECT
  out_seq,
  kind,
  "NPU Name",
  "Bench Name",
  "NPU Dtype",
  "Bench Dtype",
  "NPU Tensor Shape",
  "Bench Tensor Shape",
  CASE WHEN has_metrics THEN metric_cell(cosine, cosine_text) ELSE text_cell('None') END AS "Cosine",
  CASE WHEN has_metrics THEN metric_cell(max_abs_err, max_abs_err_text) ELSE text_cell('None') END AS "MaxAbsErr",
  CASE WHEN has_metrics THEN metric_cell(max_rel_err, max_rel_err_text) ELSE text_cell('None') END AS "MaxRelativeErr",
  CASE WHEN has_metrics THEN metric_cell(one_thousandth, one_thousandth_text) ELSE text_cell('None') END AS "One Thousandth Err Ratio",
  CASE WHEN has_metrics THEN metric_cell(five_thousandth, five_thousandth_text) ELSE text_cell('None') END AS "Five Thousandths Err Ratio",
  "NPU max",
  "NPU min",
  "NPU mean",
  "NPU l2norm",
  "Bench max",
  "Bench min",
  "Bench mean",
  "Bench l2norm",
  CASE WHEN compat THEN CASE WHEN has_metrics THEN accuracy ELSE 'None' END
       -- the default mode: No on the rows its rules colour; Yes on the other judged rows
       WHEN mark IS NOT NULL THEN 'No'
       WHEN has_metrics AND accuracy IN ('Yes', 'No') THEN 'Yes'
       WHEN has_metrics THEN accuracy
       ELSE 'None' END AS "Accuracy Reached or Not",
  CASE WHEN has_metrics THEN err_message
       WHEN kind = 'matched' AND NOT compat THEN 'No tensor data: compared by the dump.json values.'
       WHEN kind = 'bench_only' THEN 'No NPU data matched'
            || CASE WHEN compat OR unmatched_reason IS NULL THEN '.'
                    ELSE ': ' || unmatched_reason || '.' END
       ELSE 'No bench data matched'
            || CASE WHEN compat OR unmatched_reason IS NULL THEN '.'
                    ELSE ': ' || unmatched_reason || '.' END END
    || CASE WHEN kind = 'matched' AND npu_name <> bench_name
            THEN ' Fuzzy matching data, the comparison accuracy may be affected.' ELSE '' END
    AS "Err_message",
  stack AS "NPU_Stack_Info",
  CASE WHEN kind = 'matched' THEN npu_data_name ELSE '-1' END AS "Data_name",
  coalesce(reason, '') AS "Reason",
  -- raw numbers for the highlight rules (before non-finite values become text)
  max_abs_err AS _max_abs_err, one_thousandth AS _one_thousandth, cosine AS _cosine
FROM m
