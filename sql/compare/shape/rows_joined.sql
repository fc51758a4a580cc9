-- description: Each output row with the NPU and bench argument it pairs, side by side.
SELECT
  r.out_seq, r.kind, r.stack_here,
  n.disp_name AS npu_name, b.disp_name AS bench_name,
  n.dtype AS npu_dtype, b.dtype AS bench_dtype,
  n.shape AS npu_shape, b.shape AS bench_shape,
  n.md5 AS npu_md5, b.md5 AS bench_md5,
  n.data_name AS npu_data_name, b.data_name AS bench_data_name,
  n.op_seq AS npu_op, b.op_seq AS bench_op,
  n.max_num AS n_max, n.max_kind AS n_max_k, n.max_str AS n_max_s,
  n.min_num AS n_min, n.min_kind AS n_min_k, n.min_str AS n_min_s,
  n.mean_num AS n_mean, n.mean_kind AS n_mean_k, n.mean_str AS n_mean_s,
  n.norm_num AS n_norm, n.norm_kind AS n_norm_k, n.norm_str AS n_norm_s,
  b.max_num AS b_max, b.max_kind AS b_max_k, b.max_str AS b_max_s,
  b.min_num AS b_min, b.min_kind AS b_min_k, b.min_str AS b_min_s,
  b.mean_num AS b_mean, b.mean_kind AS b_mean_k, b.mean_str AS b_mean_s,
  b.norm_num AS b_norm, b.norm_kind AS b_norm_k, b.norm_str AS b_norm_s,
  CASE WHEN r.stack_here THEN coalesce(st.stack, 'None') ELSE 'None' END AS stack
FROM compare_rows r
LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
-- each NPU op's stack (-s): ops and stacks joined first, so that without -s (stacks empty) the
-- rows join nothing instead of every NPU op's name
LEFT JOIN (SELECT o.op_seq, s.stack FROM ops o JOIN stacks s ON s.op_name = o.op_name
           WHERE o.side = 'npu') st ON st.op_seq = n.op_seq
