-- description: The md5-mode workbook rows with each row's op and colour: what hist_rows_md5 reads (materialised as the temp table hist_result, so the result views bind once).
SELECT r.*, o.op_name, NULL::VARCHAR AS mark, NULL::VARCHAR AS mark_rules
FROM result_md5 r
LEFT JOIN hist_row_ops o USING (out_seq)
