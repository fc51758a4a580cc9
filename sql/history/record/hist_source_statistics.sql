-- description: The statistics-mode workbook rows (stat_result's: each statistic and difference as its cell's plain columns, the number, and on the rows that have any the texts' list cell_texts and the statistics' booleans' cell_bools) with each row's op and colour, and its relative errors as history columns (max_rel_pct, max_rel_pct_text, ...): what hist_rows_statistics reads (the recorder connection's temp view hist_result; msq.history.recorder.prepare_rows reads hist_source_statistics_cells.sql instead where result_statistics is a table: --compat's, a user's).
-- The plain columns, not result_statistics' cells: making the twelve cells of every row again
-- (plain_cell) and reading them back cost ~85 M instructions a 24,500-row pair more.
-- The relative errors from stat_result's numbers of them (hist_code_pct, hist_code_pct_text).
SELECT r.*, o.op_name, m.mark, m.rules AS mark_rules,
       hist_code_pct("MaxRelativeErr") AS max_rel_pct,
       hist_code_pct("MinRelativeErr") AS min_rel_pct,
       hist_code_pct("MeanRelativeErr") AS mean_rel_pct,
       hist_code_pct("NormRelativeErr") AS norm_rel_pct,
       hist_code_pct_text("MaxRelativeErr") AS max_rel_pct_text,
       hist_code_pct_text("MinRelativeErr") AS min_rel_pct_text,
       hist_code_pct_text("MeanRelativeErr") AS mean_rel_pct_text,
       hist_code_pct_text("NormRelativeErr") AS norm_rel_pct_text
FROM stat_result r
LEFT JOIN hist_row_ops o USING (out_seq)
LEFT JOIN marks m USING (out_seq)
