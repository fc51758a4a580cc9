-- description: The dump.json entry (op) of each output row: the NPU op, or the bench op of a bench-only row.
SELECT r.out_seq, coalesce(no.op_name, bo.op_name) AS op_name
FROM compare_rows r
LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
LEFT JOIN ops no ON no.side = 'npu' AND no.op_seq = n.op_seq
LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
LEFT JOIN ops bo ON bo.side = 'bench' AND bo.op_seq = b.op_seq
