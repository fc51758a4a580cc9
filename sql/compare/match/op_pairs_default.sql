-- description: msq's default op pairing: the k-th NPU op of a key pairs with the k-th bench op of that key when structures match; unmatched ops on either side are kept, bench-only ops placed after the op that precedes them on the bench side.
WITH keyed AS (  -- each op's k: its place among its side's ops of the same key
  -- each key's ops listed in op_seq order and unnested with their place: the same k as
  -- row_number() OVER (PARTITION BY side, match_key ORDER BY op_seq), whose sort carried every
  -- op's long key (~23 M instructions of ~87 on a 24,500-row pair)
  -- (within each pair of dumps: ops.pair)
  SELECT side, pair, match_key, unnest(ops) AS op_seq, generate_subscripts(ops, 1) AS k
  FROM (SELECT side, pair, match_key, list(op_seq ORDER BY op_seq) AS ops FROM op_keys
        GROUP BY side, pair, match_key)
),
paired AS (
  SELECT n.pair, n.op_seq AS npu_op, b.op_seq AS bench_op
  FROM keyed n JOIN keyed b
    ON n.side = 'npu' AND b.side = 'bench' AND n.pair = b.pair AND n.match_key = b.match_key
       AND n.k = b.k
  SEMI JOIN op_candidates c ON c.npu_op = n.op_seq AND c.bench_op = b.op_seq
),
npu_side AS (
  SELECT n.pair, n.op_seq AS npu_op, p.bench_op,
         CASE WHEN p.bench_op IS NULL THEN 'unmatched_npu' ELSE 'matched' END AS how,
         n.op_seq AS anchor, 0 AS sub, 0 AS bench_order
  FROM keyed n LEFT JOIN paired p ON p.npu_op = n.op_seq
  WHERE n.side = 'npu'
),
bench_only AS (
  SELECT b.pair, NULL::INTEGER AS npu_op, b.op_seq AS bench_op, 'unmatched_bench' AS how,
         coalesce((SELECT max_by(p.npu_op, p.bench_op) FROM paired p
                   WHERE p.pair = b.pair AND p.bench_op < b.op_seq), -1) AS anchor,
         1 AS sub, b.op_seq AS bench_order
  FROM keyed b
  WHERE b.side = 'bench' AND b.op_seq NOT IN (SELECT bench_op FROM paired)
)
-- pair first: a pair's ops (whose op_seq run on from the previous pair's) stay together
SELECT (row_number() OVER (ORDER BY pair, anchor, sub, bench_order) - 1)::INTEGER AS ord,
       npu_op, bench_op, how
FROM (SELECT * FROM npu_side UNION ALL SELECT * FROM bench_only)
