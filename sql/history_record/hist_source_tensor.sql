-- description: The tensor-mode workbook rows with each row's op and colour: what hist_rows_tensor reads (materialised as the temp table hist_result, so the result views bind once).
SELECT r.*, o.op_name, m.mark, m.rules AS mark_rules
FROM result_tensor r
LEFT JOIN hist_row_ops o USING (out_seq)
LEFT JOIN marks m USING (out_seq)
