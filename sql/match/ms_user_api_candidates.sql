-- description: NPU/bench op pairs a user api mapping entry can pair (default mode): same key, and every listed NPU position meets an existing bench position of the same shape and a compatible dtype (MindSpore dtype names read as PyTorch's).
WITH named AS (
  SELECT n.entry, n.op_seq AS npu_op, b.op_seq AS bench_op
  FROM ms_user_api_keys n
  JOIN ms_user_api_keys b
    ON n.side = 'npu' AND b.side = 'bench' AND n.entry = b.entry AND n.key = b.key
),
checked AS (
  SELECT p.entry, p.npu_op, p.bench_op,
         bool_and(n.row_seq IS NOT NULL AND b.row_seq IS NOT NULL
                  AND n.shape IS NOT DISTINCT FROM b.shape
                  AND (ms_to_torch_dtype(n.dtype) IS NOT DISTINCT FROM ms_to_torch_dtype(b.dtype)
                       OR dtype_tolerated(ms_to_torch_dtype(n.dtype), ms_to_torch_dtype(b.dtype))))
           AS ok
  FROM named p
  JOIN ms_user_api_args a ON a.entry = p.entry
  LEFT JOIN ms_user_api_rows n
    ON n.side = 'npu' AND n.op_seq = p.npu_op AND n.io = a.io AND n.pos = a.ms_pos
  LEFT JOIN ms_user_api_rows b
    ON b.side = 'bench' AND b.op_seq = p.bench_op AND b.io = a.io AND b.pos = a.pt_pos
  GROUP BY ALL
)
SELECT entry, npu_op, bench_op FROM checked WHERE ok
