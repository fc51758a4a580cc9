-- description: op_pairs_default plus the pairs of the user api mapping, in output order (NPU ops in execution order, each bench-only op after the op that precedes it on the bench side, as in op_pairs_default).
WITH base AS (SELECT * FROM op_pairs_default),
paired AS (
  SELECT npu_op, bench_op FROM base WHERE npu_op IS NOT NULL AND bench_op IS NOT NULL
  UNION ALL
  SELECT npu_op, bench_op FROM ms_user_api_pairs
),
npu_side AS (
  SELECT b.npu_op, p.bench_op,
         CASE WHEN p.bench_op IS NULL THEN 'unmatched_npu' ELSE 'matched' END AS how,
         b.npu_op AS anchor, 0 AS sub, 0 AS bench_order
  FROM base b LEFT JOIN paired p ON p.npu_op = b.npu_op
  WHERE b.npu_op IS NOT NULL
),
bench_only AS (
  SELECT NULL::INTEGER AS npu_op, b.bench_op, 'unmatched_bench' AS how,
         coalesce((SELECT max_by(p.npu_op, p.bench_op) FROM paired p WHERE p.bench_op < b.bench_op),
                  -1) AS anchor,
         1 AS sub, b.bench_op AS bench_order
  FROM base b
  WHERE b.npu_op IS NULL AND b.bench_op NOT IN (SELECT bench_op FROM paired)
)
SELECT (row_number() OVER (ORDER BY anchor, sub, bench_order) - 1)::INTEGER AS ord,
       npu_op, bench_op, how
FROM (SELECT * FROM npu_side UNION ALL SELECT * FROM bench_only)
