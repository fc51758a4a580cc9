-- description: result_statistics' rows with each relative error as a number (in percent, or its fixed text's code: stat_rows' <stat>_rel_pct) and each of the twelve statistics and differences as its cell's plain columns ("<cell>" the number, "<cell> (text)" the text, a statistic's "<cell> (bool)" the boolean; plain_cell makes the cell), what the default mode materialises: its texts are printed and its cells made only for the readers that ask (result_statistics by rel_text and plain_cell; the workbook's C renderer, msq/export/_sheetxml.c, and the history's SELECT read the plain columns), and has_cell_text: whether a row has any cell's text.
SELECT
  out_seq,
  kind,
  "NPU Name",
  "Bench Name",
  "NPU Dtype",
  "Bench Dtype",
  "NPU Tensor Shape",
  "Bench Tensor Shape",
  max_diff AS "Max diff", max_diff_text AS "Max diff (text)",
  min_diff AS "Min diff", min_diff_text AS "Min diff (text)",
  mean_diff AS "Mean diff", mean_diff_text AS "Mean diff (text)",
  norm_diff AS "L2norm diff", norm_diff_text AS "L2norm diff (text)",
  max_rel_pct AS "MaxRelativeErr",
  min_rel_pct AS "MinRelativeErr",
  mean_rel_pct AS "MeanRelativeErr",
  norm_rel_pct AS "NormRelativeErr",
  "NPU max", "NPU max (text)", "NPU max (bool)",
  "NPU min", "NPU min (text)", "NPU min (bool)",
  "NPU mean", "NPU mean (text)", "NPU mean (bool)",
  "NPU l2norm", "NPU l2norm (text)", "NPU l2norm (bool)",
  "Bench max", "Bench max (text)", "Bench max (bool)",
  "Bench min", "Bench min (text)", "Bench min (bool)",
  "Bench mean", "Bench mean (text)", "Bench mean (bool)",
  "Bench l2norm", "Bench l2norm (text)", "Bench l2norm (bool)",
  CASE kind WHEN 'matched' THEN CASE WHEN warn THEN 'Warning' ELSE '' END ELSE 'N/A' END AS "Result",
  CASE kind WHEN 'matched' THEN CASE WHEN warn THEN 'Need double check api accuracy.' ELSE '' END
            WHEN 'bench_only' THEN 'No NPU data matched' || unmatched_why
            ELSE 'No bench data matched' || unmatched_why END AS "Err_message",
  stack AS "NPU_Stack_Info",
  coalesce(reason, '') AS "Reason",
  -- whether any of the twelve "<cell> (text)" columns holds a text (~6 % of root-8x8-5000's
  -- rows): the workbook's C renderer reads the texts of those rows alone, by a filter DuckDB
  -- pushes into its scan of the materialised table (msq.export.xlsx: ~10 M instructions a
  -- 24,500-row pair less than reading every row's twelve mostly-NULL texts); tests of NULL
  -- alone: a coalesce of the texts copied them (~28 M instructions a 96,623-row batch, ~0.3)
  (max_diff_text IS NOT NULL OR min_diff_text IS NOT NULL OR mean_diff_text IS NOT NULL
   OR norm_diff_text IS NOT NULL OR "NPU max (text)" IS NOT NULL
   OR "NPU min (text)" IS NOT NULL OR "NPU mean (text)" IS NOT NULL
   OR "NPU l2norm (text)" IS NOT NULL OR "Bench max (text)" IS NOT NULL
   OR "Bench min (text)" IS NOT NULL OR "Bench mean (text)" IS NOT NULL
   OR "Bench l2norm (text)" IS NOT NULL) AS has_cell_text
FROM (
  -- msprobe's Warning flag under --compat; the default mode warns on the rows its rules colour
  SELECT s.*, v.reason,
         CASE WHEN (SELECT compat FROM settings) THEN flagged ELSE v.mark IS NOT NULL END AS warn,
         CASE WHEN (SELECT compat FROM settings) OR v.unmatched_reason IS NULL THEN '.'
              ELSE ': ' || v.unmatched_reason || '.' END AS unmatched_why
  -- only the verdicts that say something: a verdict with an empty (or NULL) reason, no mark and
  -- no unmatched reason (most rows) makes the same columns as no verdict ("Reason" '', no
  -- Warning, "." after Err_message), and the join's right side holds ~1 % of the rows, not all
  -- (tests/sql/test_stat_rows.py holds stat_result to the join of every verdict)
  FROM stat_rows s LEFT JOIN (
    SELECT out_seq, reason, mark, unmatched_reason FROM verdicts
    WHERE reason <> '' OR mark IS NOT NULL OR unmatched_reason IS NOT NULL) v USING (out_seq)
)
