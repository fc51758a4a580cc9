-- description: Blame: the content keys of every tensor row of each side, to link an op's inputs to the earlier outputs that produced them: ckey exact content (tensor mode: content hash of the metrics pass; md5 mode: md5) with dtype and shape, skey the exact statistics with dtype and shape, rkey the content without the shape (a view or reshape); each key within the row's pair (a batch of pairs, msq.pipeline.compute_batch).
WITH hashed AS (
  SELECT 'npu' AS side, r.npu_row AS row_seq, any_value(tm.npu_hash) AS h
  FROM compare_rows r JOIN tensor_metrics tm USING (out_seq)
  WHERE tm.npu_hash IS NOT NULL GROUP BY ALL
  UNION ALL
  SELECT 'bench', r.bench_row, any_value(tm.bench_hash)
  FROM compare_rows r JOIN tensor_metrics tm USING (out_seq)
  WHERE tm.bench_hash IS NOT NULL GROUP BY ALL
),
-- each row's content key and how it is known: the hash of the metrics pass, else (md5 mode) its
-- md5; rows of neither have none (a statistics compare: no row), so that the rows' SELECT
-- joins them rather than testing every row for both
content AS (
  SELECT side, row_seq, hash('h', h) AS content, 'hash'::blame_link AS chow FROM hashed
  UNION ALL
  SELECT t.side, t.row_seq, hash('m', t.md5), 'md5'::blame_link
  FROM tensors t ANTI JOIN hashed h ON h.side = t.side AND h.row_seq = t.row_seq
  WHERE (SELECT mode FROM settings) = 'md5' AND t.md5 IS NOT NULL
),
k AS (
  SELECT
    t.side, t.row_seq, t.op_seq, t.row_in_op, t.io, t.dtype, t.shape, t.numel, t.pair,
    c.content, c.chow,
    CASE WHEN t.max_num IS NOT NULL AND t.min_num IS NOT NULL AND t.mean_num IS NOT NULL
              AND t.norm_num IS NOT NULL
         THEN hash('s', t.max_num, t.min_num, t.mean_num, t.norm_num)
    END AS stats
  FROM tensors t
  LEFT JOIN content c ON c.side = t.side AND c.row_seq = t.row_seq
  -- (the rows with an edge, blame_edges: blame_tensors gives such an input an external edge's
  -- candidates by this same test, sql/compare/blame/blame_tensors.sql)
  WHERE t.is_tensor AND coalesce(t.numel, 0) > 0
)
-- keys are 64-bit hashes of what must be equal (a collision could only link a wrong producer);
-- the pair is part of each key: every join and window on a key keeps to the row's pair (in a
-- batch, the pairs' equal statistics must not link a row to another pair's producer)
-- the side and io as booleans (npu: the NPU side's row; is_input: an input row): the readers
-- (blame_edges, blame_tensors) join, partition and filter on them, and a table's VARCHAR column
-- costs DuckDB ~150 instructions a row to append (bench/README "Session 19: blame")
SELECT
  side = 'npu' AS npu, row_seq, op_seq, io = 'input' AS is_input,
  -- rows of one op sort after every row of the ops before it
  op_seq::BIGINT * 1048576 + row_in_op AS pos,
  CASE WHEN content IS NOT NULL THEN hash(dtype, shape, content, pair) END AS ckey,
  chow,
  CASE WHEN stats IS NOT NULL THEN hash(dtype, shape, stats, pair) END AS skey,
  CASE WHEN coalesce(content, stats) IS NOT NULL
       THEN hash(dtype, numel, coalesce(content, stats), pair) END AS rkey,
  pair
FROM k
