-- description: The statistics-mode workbook rows with each row's op and colour, and each side's four statistics as numbers (what the relative errors are computed from): what hist_rows_statistics reads (the recorder connection's temp view hist_result).
SELECT r.*, o.op_name, m.mark, m.rules AS mark_rules,
       o.n_max, o.n_min, o.n_mean, o.n_norm, o.b_max, o.b_min, o.b_mean, o.b_norm
FROM result_statistics r
LEFT JOIN hist_row_ops o USING (out_seq)
LEFT JOIN marks m USING (out_seq)
