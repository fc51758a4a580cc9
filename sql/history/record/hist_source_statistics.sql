-- description: The statistics-mode workbook rows with each row's op and colour: what hist_rows_statistics reads (the recorder connection's temp view hist_result).
SELECT r.*, o.op_name, m.mark, m.rules AS mark_rules
FROM result_statistics r
LEFT JOIN hist_row_ops o USING (out_seq)
LEFT JOIN marks m USING (out_seq)
