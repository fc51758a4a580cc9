-- description: result_statistics' rows with each relative error as a number (in percent, or its fixed text's code: stat_rows' <stat>_rel_pct) and each of the twelve statistics and differences as its cell's plain columns ("<cell>" the number; on the rows that have any, the texts in the list cell_texts and a statistic's booleans in cell_bools; plain_cell makes the cell), what the default mode materialises: its texts are printed and its cells made only for the readers that ask (result_statistics by rel_text and plain_cell; the workbook's C renderer, msq/export/_sheetxml.c, and the history's SELECT read the plain columns), and has_cell_text: whether a row has any cell's text (cell_texts is NULL where it has none); Result, Err_message and Reason made of stat_judged's kind, warn and reasons.
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
  "NPU max", "NPU min", "NPU mean", "NPU l2norm",
  "Bench max", "Bench min", "Bench mean", "Bench l2norm",
  CASE kind WHEN 'matched' THEN CASE WHEN warn THEN 'Warning' ELSE '' END ELSE 'N/A' END AS "Result",
  CASE kind WHEN 'matched' THEN CASE WHEN warn THEN 'Need double check api accuracy.' ELSE '' END
            -- the unmatched reason (NULL under --compat: stat_judged) after a colon
            WHEN 'bench_only' THEN 'No NPU data matched' || coalesce(': ' || unmatched_reason, '') || '.'
            ELSE 'No bench data matched' || coalesce(': ' || unmatched_reason, '') || '.'
  END AS "Err_message",
  stack AS "NPU_Stack_Info",
  coalesce(reason, '') AS "Reason",
  -- the cells' texts and booleans, NULL on ~94 % of root-8x8-5000's rows, as two lists on the
  -- rows that have any (stat_rows: cell_texts where has_cell_text, in PLAIN_CELLS' order,
  -- msq/export/outputs.py; cell_bools where a statistic is a boolean), not as twenty columns:
  -- the table's insert appended each NULL, and every reader scanned them. has_cell_text: the
  -- workbook's C renderer reads the texts of those rows alone, by a filter DuckDB pushes into
  -- its scan of the materialised table (msq.export.xlsx), the history's rows likewise.
  has_cell_text, cell_texts, cell_bools
FROM stat_judged
