-- description: Statistics-mode output rows as typed history columns, from hist_result (inserted into result_rows by name).
-- The cells' texts once each (the number columns read them too), in one list (result_data.texts,
-- NULL on a row of numbers alone), from each cell's plain columns (hist_source_statistics:
-- stat_result's: the number, the texts' list cell_texts and the booleans' cell_bools, the latter
-- read where the number is NULL alone, hist_plain_num's coalesce); the relative errors
-- (max_rel_pct, max_rel_pct_text, ...) as hist_result gives
-- them: from stat_result's numbers of them (hist_code_pct), or the statistics' numbers
-- (hist_rel_pct, hist_source_statistics_cells.sql), not from their texts.
-- has_cell_text (whether any of the twelve cells holds a text, the list cell_texts: ~6 % of
-- root-8x8-5000's rows) gates the texts: a row without one reads none of them (hist_row_text),
-- and its list is made where it has a cell's text or a relative error's text, tested on that
-- flag and the four relative errors' texts, not by a coalesce of all sixteen texts (which copies
-- them): ~13 M instructions a 24,500-row pair less, the same rows.
WITH v AS (
  SELECT r.*,
         CASE r."Result" WHEN '' THEN 'pass' WHEN 'Warning' THEN 'warning' ELSE 'unmatched' END
           AS verdict,
         hist_row_text(has_cell_text, cell_texts[1]) AS max_diff_text,
         hist_row_text(has_cell_text, cell_texts[2]) AS min_diff_text,
         hist_row_text(has_cell_text, cell_texts[3]) AS mean_diff_text,
         hist_row_text(has_cell_text, cell_texts[4]) AS norm_diff_text,
         hist_row_text(has_cell_text, cell_texts[5]) AS npu_max_text,
         hist_row_text(has_cell_text, cell_texts[6]) AS npu_min_text,
         hist_row_text(has_cell_text, cell_texts[7]) AS npu_mean_text,
         hist_row_text(has_cell_text, cell_texts[8]) AS npu_norm_text,
         hist_row_text(has_cell_text, cell_texts[9]) AS bench_max_text,
         hist_row_text(has_cell_text, cell_texts[10]) AS bench_min_text,
         hist_row_text(has_cell_text, cell_texts[11]) AS bench_mean_text,
         hist_row_text(has_cell_text, cell_texts[12]) AS bench_norm_text
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
  hist_plain_num("Max diff", NULL, max_diff_text) AS max_diff,
  hist_plain_num("Min diff", NULL, min_diff_text) AS min_diff,
  hist_plain_num("Mean diff", NULL, mean_diff_text) AS mean_diff,
  hist_plain_num("L2norm diff", NULL, norm_diff_text) AS norm_diff,
  max_rel_pct,
  min_rel_pct,
  mean_rel_pct,
  norm_rel_pct,
  hist_plain_num("NPU max", cell_bools[1], npu_max_text) AS npu_max,
  hist_plain_num("NPU min", cell_bools[2], npu_min_text) AS npu_min,
  hist_plain_num("NPU mean", cell_bools[3], npu_mean_text) AS npu_mean,
  hist_plain_num("NPU l2norm", cell_bools[4], npu_norm_text) AS npu_norm,
  hist_plain_num("Bench max", cell_bools[5], bench_max_text) AS bench_max,
  hist_plain_num("Bench min", cell_bools[6], bench_min_text) AS bench_min,
  hist_plain_num("Bench mean", cell_bools[7], bench_mean_text) AS bench_mean,
  hist_plain_num("Bench l2norm", cell_bools[8], bench_norm_text) AS bench_norm,
  -- NULL where every member would be: no cell's text (has_cell_text) and no relative error's
  CASE WHEN has_cell_text OR max_rel_pct_text IS NOT NULL OR min_rel_pct_text IS NOT NULL
            OR mean_rel_pct_text IS NOT NULL OR norm_rel_pct_text IS NOT NULL
       THEN [max_diff_text, min_diff_text, mean_diff_text, norm_diff_text, max_rel_pct_text,
             min_rel_pct_text, mean_rel_pct_text, norm_rel_pct_text, NULL, NULL, NULL, NULL,
             NULL, npu_max_text, npu_min_text, npu_mean_text, npu_norm_text, bench_max_text,
             bench_min_text, bench_mean_text, bench_norm_text]::VARCHAR[] END AS texts,
  "Result" AS result,
  verdict,
  verdict = 'warning' AS failing,
  "Err_message" AS err_message,
  mark, mark_rules,
  -- the default mode's verdict is its mark (a yellow row fails too, and stays severity 1)
  hist_severity(mark, verdict = 'warning' AND s.compat_mode, verdict) AS severity,
  -- npu_md5, bench_md5, npu_stack, data_name (schema version 7): a statistics row has a stack
  CASE WHEN s.stack_mode AND "NPU_Stack_Info" IS NOT NULL
       THEN [NULL, NULL, "NPU_Stack_Info", NULL]::VARCHAR[] END AS mode_texts,
  nullif("Reason", '') AS reason
-- the settings joined, not read by scalar subqueries: ~5 ms less to plan, on every compare
FROM v LEFT JOIN (SELECT stack AS stack_mode, compat AS compat_mode FROM settings) s ON true
