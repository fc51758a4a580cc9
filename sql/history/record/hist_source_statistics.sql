-- description: The statistics-mode workbook rows (stat_result's: each statistic and difference as its cell's plain columns, the number, "<cell> (text)" and a statistic's "<cell> (bool)") with each row's op and colour, and each side's four statistics as numbers (what the relative errors are computed from): what hist_rows_statistics reads (the recorder connection's temp view hist_result; msq.history.recorder.prepare_rows reads hist_source_statistics_cells.sql instead where result_statistics is a table: --compat's, a user's).
-- The plain columns, not result_statistics' cells: making the twelve cells of every row again
-- (plain_cell) and reading them back cost ~85 M instructions a 24,500-row pair more.
SELECT r.*, o.op_name, m.mark, m.rules AS mark_rules,
       o.n_max, o.n_min, o.n_mean, o.n_norm, o.b_max, o.b_min, o.b_mean, o.b_norm
FROM stat_result r
LEFT JOIN hist_row_ops o USING (out_seq)
LEFT JOIN marks m USING (out_seq)
