-- description: The dump.json entry (op) of each output row: the NPU op, or the bench op of a bench-only row; and each side's four statistics as numbers (<stat>_num; NULL on an absent side), which the statistics mode's relative errors are computed from.
SELECT r.out_seq, coalesce(no.op_name, bo.op_name) AS op_name,
       n.max_num AS n_max, n.min_num AS n_min, n.mean_num AS n_mean, n.norm_num AS n_norm,
       b.max_num AS b_max, b.min_num AS b_min, b.mean_num AS b_mean, b.norm_num AS b_norm
FROM compare_rows r
LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
LEFT JOIN ops no ON no.side = 'npu' AND no.op_seq = n.op_seq
LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
LEFT JOIN ops bo ON bo.side = 'bench' AND bo.op_seq = b.op_seq
