-- description: Op pairs made by the user api mapping (default mode): among the ops op_pairs_default left unmatched, the k-th NPU op of a key meets the k-th bench op of that key when the entry's positions agree; one pair per op.
WITH base AS (SELECT * FROM op_pairs_default),
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
  SEMI JOIN ms_user_api_candidates c
    ON c.entry = n.entry AND c.npu_op = n.op_seq AND c.bench_op = b.op_seq
),
-- an op reached through two entries keeps the first entry; a bench op the first NPU op
one_per_npu AS (
  SELECT * FROM paired QUALIFY row_number() OVER (PARTITION BY npu_op ORDER BY entry) = 1
)
SELECT entry, npu_op, bench_op
FROM one_per_npu
QUALIFY row_number() OVER (PARTITION BY bench_op ORDER BY npu_op) = 1
