-- description: Op pairs made by the user api mapping (default mode): among the ops the default pairing left unmatched (op_pairs, filled from op_pairs_default), the k-th NPU op of a key meets the k-th bench op of that key when every listed NPU position meets an existing bench position of the same shape and a compatible dtype (MindSpore dtype names read as PyTorch's); one pair per op.
WITH base AS (SELECT * FROM op_pairs),
ranked AS (
  SELECT k.*, row_number() OVER (PARTITION BY k.entry, k.side, k.key ORDER BY k.op_seq) AS k
  FROM ms_user_api_keys k
  WHERE (k.side = 'npu' AND k.op_seq IN (SELECT npu_op FROM base WHERE bench_op IS NULL))
     OR (k.side = 'bench' AND k.op_seq IN (SELECT bench_op FROM base WHERE npu_op IS NULL))
),
paired AS (
  SELECT n.entry, n.op_seq AS npu_op, b.op_seq AS bench_op
  FROM ranked n
  JOIN ranked b
    ON n.side = 'npu' AND b.side = 'bench' AND n.entry = b.entry AND n.key = b.key AND n.k = b.k
),
checked AS (
  SELECT p.entry, p.npu_op, p.bench_op
  FROM paired p
  JOIN ms_user_api_args a ON a.entry = p.entry
  LEFT JOIN ms_user_api_rows n
    ON n.side = 'npu' AND n.op_seq = p.npu_op AND n.io = a.io AND n.pos = a.ms_pos
  LEFT JOIN ms_user_api_rows b
    ON b.side = 'bench' AND b.op_seq = p.bench_op AND b.io = a.io AND b.pos = a.pt_pos
  GROUP BY ALL
  HAVING bool_and(n.row_seq IS NOT NULL AND b.row_seq IS NOT NULL
                  AND n.shape IS NOT DISTINCT FROM b.shape
                  AND dtype_compatible(ms_to_torch_dtype(n.dtype), ms_to_torch_dtype(b.dtype),
                                       false))
),
-- an op reached through two entries keeps the first entry; a bench op the first NPU op
one_per_npu AS (
  SELECT * FROM checked QUALIFY row_number() OVER (PARTITION BY npu_op ORDER BY entry) = 1
)
SELECT entry, npu_op, bench_op
FROM one_per_npu
QUALIFY row_number() OVER (PARTITION BY bench_op ORDER BY npu_op) = 1
