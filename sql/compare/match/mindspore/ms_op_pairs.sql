-- description: The op_pairs table put back in output order after the user api mapping added its pairs (how = 'api_user'): NPU ops in execution order, each bench-only op after the NPU op paired with the bench op that precedes it, as op_pairs_default orders them.
WITH paired AS (
  SELECT npu_op, bench_op FROM op_pairs WHERE npu_op IS NOT NULL AND bench_op IS NOT NULL
),
npu_side AS (
  SELECT npu_op, bench_op, how, npu_op AS anchor, 0 AS sub, 0 AS bench_order
  FROM op_pairs
  WHERE npu_op IS NOT NULL
),
bench_only AS (
  SELECT NULL::INTEGER AS npu_op, b.bench_op, b.how,
         coalesce((SELECT max_by(p.npu_op, p.bench_op) FROM paired p WHERE p.bench_op < b.bench_op),
                  -1) AS anchor,
         1 AS sub, b.bench_op AS bench_order
  FROM op_pairs b
  WHERE b.npu_op IS NULL
)
SELECT (row_number() OVER (ORDER BY anchor, sub, bench_order) - 1)::INTEGER AS ord,
       npu_op, bench_op, how
FROM (SELECT * FROM npu_side UNION ALL SELECT * FROM bench_only)
