-- description: row_pairs with the user api mapping applied (default mode): in an op pair made by an entry, each listed NPU position meets its listed bench position; NPU rows the entry does not list stay, without a bench row.
-- one entry per (ms_api, pt_api): the pair's two APIs name it
WITH up AS (
  SELECT p.ord, e.entry, p.npu_op, p.bench_op
  FROM op_pairs p
  JOIN (SELECT DISTINCT side, op_seq, api FROM ms_user_api_rows) n
    ON n.side = 'npu' AND n.op_seq = p.npu_op
  JOIN (SELECT DISTINCT side, op_seq, api FROM ms_user_api_rows) b
    ON b.side = 'bench' AND b.op_seq = p.bench_op
  JOIN (SELECT DISTINCT entry, ms_api, pt_api FROM ms_user_api_args) e
    ON e.ms_api = n.api AND e.pt_api = b.api
  WHERE p.how = 'api_user'
),
plain AS (
  SELECT ord, out_seq AS sub, npu_row, bench_row, kind, stack_here
  FROM row_pairs
  WHERE ord NOT IN (SELECT ord FROM up)
),
mapped AS (
  SELECT up.ord, n.row_in_op AS sub, n.row_seq AS npu_row, b.row_seq AS bench_row,
         CASE WHEN b.row_seq IS NULL THEN 'npu_only' ELSE 'matched' END AS kind,
         -- as for any matched op: the stack goes on the first input row
         n.io = 'input' AND n.pos = 0 AS stack_here
  FROM up
  JOIN ms_user_api_rows n ON n.side = 'npu' AND n.op_seq = up.npu_op
  LEFT JOIN ms_user_api_args a ON a.entry = up.entry AND a.io = n.io AND a.ms_pos = n.pos
  LEFT JOIN ms_user_api_rows b
    ON b.side = 'bench' AND b.op_seq = up.bench_op AND b.io = a.io AND b.pos = a.pt_pos
)
SELECT (row_number() OVER (ORDER BY ord, sub) - 1)::BIGINT AS out_seq,
       ord, npu_row, bench_row, kind, stack_here
FROM (SELECT * FROM plain UNION ALL SELECT * FROM mapped)
