-- description: Blame: every NPU input row with its error (its compared row's; the producer's is beside it), its link to a producer (blame_edges) and whether it is an in-place op's input that msprobe records after the op ran (a forward op's input that is not linked and equals one of the op's own outputs).
WITH own_out AS (
  SELECT DISTINCT op_seq, coalesce(ckey, skey) AS key
  FROM blame_keys WHERE side = 'npu' AND io = 'output'
),
-- the producers' names and errors, looked up for the linked inputs only
produced AS (
  SELECT ed.consumer_row, pt.disp_name AS producer_name, pr.out_seq AS producer_seq,
         pe.err AS producer_err
  FROM blame_edges ed
  LEFT JOIN tensors pt ON pt.side = 'npu' AND pt.row_seq = ed.producer_row
  LEFT JOIN compare_rows pr ON pr.npu_row = ed.producer_row AND pr.kind = 'matched'
  LEFT JOIN row_error pe ON pe.out_seq = pr.out_seq
  WHERE ed.side = 'npu' AND ed.producer_row IS NOT NULL
)
SELECT
  t.row_seq, t.op_seq, t.disp_name AS npu_name,
  r.out_seq, e.err,
  CASE WHEN t.is_tensor THEN coalesce(ed.how, 'external') ELSE 'constant' END AS link,
  ed.candidates, ed.producer_row, p.producer_name,
  p.producer_seq, p.producer_err,
  -- (a backward record's incoming gradient is recorded as it arrives: never in place; the
  -- op's name is matched only for the inputs that could be in place)
  CASE WHEN coalesce(ed.how = 'external', false) AND oo.op_seq IS NOT NULL
       THEN regexp_matches(o.op_name, '\.forward(\.\d+)?$') ELSE false END AS in_place
FROM tensors t
JOIN ops o ON o.side = 'npu' AND o.op_seq = t.op_seq
LEFT JOIN blame_keys k ON k.side = 'npu' AND k.row_seq = t.row_seq
LEFT JOIN own_out oo ON oo.op_seq = t.op_seq AND oo.key = coalesce(k.ckey, k.skey)
LEFT JOIN compare_rows r ON r.npu_row = t.row_seq AND r.kind = 'matched'
LEFT JOIN row_error e ON e.out_seq = r.out_seq
LEFT JOIN blame_edges ed ON ed.side = 'npu' AND ed.consumer_row = t.row_seq
LEFT JOIN produced p ON p.consumer_row = t.row_seq
WHERE t.side = 'npu' AND t.io = 'input'
