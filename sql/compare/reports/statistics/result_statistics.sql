-- description: The statistics-mode workbook, one row per output line with msprobe's 25 columns (spec §5.2, §5.4).
SELECT
  out_seq,
  kind,
  "NPU Name",
  "Bench Name",
  "NPU Dtype",
  "Bench Dtype",
  "NPU Tensor Shape",
  "Bench Tensor Shape",
  CASE WHEN kind = 'matched' THEN max_diff ELSE text_cell('N/A') END AS "Max diff",
  CASE WHEN kind = 'matched' THEN min_diff ELSE text_cell('N/A') END AS "Min diff",
  CASE WHEN kind = 'matched' THEN mean_diff ELSE text_cell('N/A') END AS "Mean diff",
  CASE WHEN kind = 'matched' THEN norm_diff ELSE text_cell('N/A') END AS "L2norm diff",
  CASE WHEN kind = 'matched' THEN max_rel ELSE 'N/A' END AS "MaxRelativeErr",
  CASE WHEN kind = 'matched' THEN min_rel ELSE 'N/A' END AS "MinRelativeErr",
  CASE WHEN kind = 'matched' THEN mean_rel ELSE 'N/A' END AS "MeanRelativeErr",
  CASE WHEN kind = 'matched' THEN norm_rel ELSE 'N/A' END AS "NormRelativeErr",
  "NPU max",
  "NPU min",
  "NPU mean",
  "NPU l2norm",
  "Bench max",
  "Bench min",
  "Bench mean",
  "Bench l2norm",
  CASE kind WHEN 'matched' THEN CASE WHEN flagged THEN 'Warning' ELSE '' END ELSE 'N/A' END AS "Result",
  CASE kind WHEN 'matched' THEN CASE WHEN flagged THEN 'Need double check api accuracy.' ELSE '' END
            WHEN 'bench_only' THEN 'No NPU data matched.'
            ELSE 'No bench data matched.' END AS "Err_message",
  stack AS "NPU_Stack_Info"
FROM stat_rows
