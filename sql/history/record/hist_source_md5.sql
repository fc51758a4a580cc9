-- description: The md5-mode workbook rows with each row's op and colour: what hist_rows_md5 reads (the recorder connection's temp view hist_result).
SELECT r.*, o.op_name, NULL::VARCHAR AS mark, NULL::VARCHAR AS mark_rules
FROM result_md5 r
LEFT JOIN hist_row_ops o USING (out_seq)
