-- description: Blame: the content keys of every tensor row of each side, to link an op's inputs to the earlier outputs that produced them: ckey exact content (tensor mode: content hash of the metrics pass; md5 mode: md5) with dtype and shape, skey the exact statistics with dtype and shape, rkey the content without the shape (a view or reshape).
WITH hashed AS (
  SELECT 'npu' AS side, r.npu_row AS row_seq, any_value(tm.npu_hash) AS h
  FROM compare_rows r JOIN tensor_metrics tm USING (out_seq)
  WHERE tm.npu_hash IS NOT NULL GROUP BY ALL
  UNION ALL
  SELECT 'bench', r.bench_row, any_value(tm.bench_hash)
  FROM compare_rows r JOIN tensor_metrics tm USING (out_seq)
  WHERE tm.bench_hash IS NOT NULL GROUP BY ALL
),
k AS (
  SELECT
    t.side, t.row_seq, t.op_seq, t.row_in_op, t.io, t.dtype, t.shape, t.numel,
    starts_with(o.op_name, 'Module.') OR starts_with(o.op_name, 'Cell.') AS is_module,
    CASE WHEN h.h IS NOT NULL THEN 'h' || CAST(h.h AS VARCHAR)
         WHEN (SELECT mode FROM settings) = 'md5' AND t.md5 IS NOT NULL THEN 'm' || t.md5
    END AS content,
    CASE WHEN t.max_num IS NOT NULL AND t.min_num IS NOT NULL AND t.mean_num IS NOT NULL
              AND t.norm_num IS NOT NULL
         THEN concat_ws(',', CAST(t.max_num AS VARCHAR), CAST(t.min_num AS VARCHAR),
                        CAST(t.mean_num AS VARCHAR), CAST(t.norm_num AS VARCHAR))
    END AS stats
  FROM tensors t
  JOIN ops o ON o.side = t.side AND o.op_seq = t.op_seq
  LEFT JOIN hashed h ON h.side = t.side AND h.row_seq = t.row_seq
  WHERE t.is_tensor AND coalesce(t.numel, 0) > 0
)
SELECT
  side, row_seq, op_seq, io, is_module,
  -- rows of one op sort after every row of the ops before it
  op_seq::BIGINT * 1048576 + row_in_op AS pos,
  CASE WHEN content IS NOT NULL THEN concat_ws('|', dtype, shape, content) END AS ckey,
  CASE WHEN starts_with(content, 'h') THEN 'hash' WHEN content IS NOT NULL THEN 'md5' END AS chow,
  CASE WHEN stats IS NOT NULL THEN concat_ws('|', dtype, shape, stats) END AS skey,
  concat_ws('|', dtype, CAST(numel AS VARCHAR), coalesce(content, 's' || stats)) AS rkey
FROM k
