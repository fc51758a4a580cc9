-- description: Output rows under a data mapping (-dm): one row per mapping entry whose names exist on both sides, in mapping order; the default mode then lists the NPU rows the mapping does not name.
WITH npu AS (
  SELECT disp_name, max(row_seq) AS row_seq FROM tensors WHERE side = 'npu' GROUP BY disp_name
),
bench AS (
  SELECT disp_name, max(row_seq) AS row_seq FROM tensors WHERE side = 'bench' GROUP BY disp_name
),
mapped AS (
  SELECT m.ord AS ord, n.row_seq AS npu_row, b.row_seq AS bench_row, 'matched' AS kind, 0 AS part,
         0::BIGINT AS pos
  FROM mappings m JOIN npu n ON n.disp_name = m.npu_key JOIN bench b ON b.disp_name = m.bench_key
  WHERE m.kind = 'data'
),
rest AS (
  SELECT 0 AS ord, t.row_seq AS npu_row, NULL::BIGINT AS bench_row, 'npu_only' AS kind, 1 AS part,
         t.row_seq AS pos
  FROM tensors t
  WHERE t.side = 'npu' AND NOT (SELECT compat FROM settings)
    AND t.row_seq NOT IN (SELECT npu_row FROM mapped)
)
SELECT (row_number() OVER (ORDER BY part, ord, pos) - 1)::BIGINT AS out_seq,
       (row_number() OVER (ORDER BY part, ord, pos) - 1)::INTEGER AS ord,
       npu_row, bench_row, kind, true AS stack_here
FROM (SELECT * FROM mapped UNION ALL SELECT * FROM rest)
