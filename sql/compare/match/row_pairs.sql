-- description: Output rows in order: the rows of each paired op matched positionally within inputs and within outputs (spec §3.4), then unmatched rows.
WITH grouped AS (
  SELECT t.*,
         row_number() OVER (PARTITION BY side, op_seq, disp_io ORDER BY row_in_op) AS k
  FROM tensors t
),
matched AS (
  SELECT p.ord, n.row_seq AS npu_row, b.row_seq AS bench_row,
         CASE WHEN b.row_seq IS NULL THEN 'npu_extra' ELSE 'matched' END AS kind,
         CASE n.disp_io WHEN 'input' THEN 0 ELSE 1 END AS grp, n.k, n.disp_io,
         NULL::BOOLEAN AS first_row
  FROM op_pairs p
  JOIN grouped n ON n.side = 'npu' AND n.op_seq = p.npu_op
  LEFT JOIN grouped b ON b.side = 'bench' AND b.op_seq = p.bench_op
                     AND b.disp_io = n.disp_io AND b.k = n.k
  WHERE p.bench_op IS NOT NULL AND p.npu_op IS NOT NULL
),
npu_only AS (
  SELECT p.ord, n.row_seq AS npu_row, NULL::BIGINT AS bench_row, 'npu_only' AS kind,
         0 AS grp, n.row_in_op AS k, n.disp_io,
         -- its op's first row (a window over these rows only, not over every row's ord)
         n.row_in_op = min(n.row_in_op) OVER (PARTITION BY p.ord) AS first_row
  FROM op_pairs p JOIN grouped n ON n.side = 'npu' AND n.op_seq = p.npu_op
  WHERE p.bench_op IS NULL
),
bench_only AS (
  SELECT p.ord, NULL::BIGINT AS npu_row, b.row_seq AS bench_row, 'bench_only' AS kind,
         0 AS grp, b.row_in_op AS k, b.disp_io, NULL::BOOLEAN AS first_row
  FROM op_pairs p JOIN grouped b ON b.side = 'bench' AND b.op_seq = p.bench_op
  WHERE p.npu_op IS NULL
),
all_rows AS (
  SELECT * FROM matched UNION ALL SELECT * FROM npu_only UNION ALL SELECT * FROM bench_only
)
SELECT (row_number() OVER (ORDER BY ord, grp, k) - 1)::BIGINT AS out_seq,
       ord, npu_row, bench_row, kind,
       -- msprobe shows the op's stack on its first input row when matched, on its first row otherwise
       (kind IN ('matched', 'npu_extra') AND grp = 0 AND k = 1)
         OR (kind = 'npu_only' AND first_row) AS stack_here
FROM all_rows
