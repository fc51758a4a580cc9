-- description: The data mapping a MindSpore layer mapping (-lm) yields in the default mode: for each op pair (mappings rows of kind 'layer', NPU op -> bench op or NULL), the NPU rows paired positionally with the bench rows, inputs with inputs and outputs with outputs; an NPU row without a counterpart gets a NULL bench name.
WITH m AS (SELECT ord, npu_key, bench_key FROM mappings WHERE kind = 'layer'),
r AS (
  SELECT t.side, o.op_name, t.disp_name, t.io,
         row_number() OVER (PARTITION BY t.side, t.op_seq, t.io ORDER BY t.row_in_op) AS pos
  FROM tensors t JOIN ops o ON o.side = t.side AND o.op_seq = t.op_seq
),
n AS (SELECT m.ord, r.io, r.pos, r.disp_name FROM m JOIN r ON r.side = 'npu' AND r.op_name = m.npu_key),
b AS (SELECT m.ord, r.io, r.pos, r.disp_name FROM m JOIN r ON r.side = 'bench' AND r.op_name = m.bench_key)
SELECT n.ord, CASE n.io WHEN 'input' THEN 0 ELSE 1 END AS io_order, n.pos,
       n.disp_name AS npu_name, b.disp_name AS bench_name
FROM n LEFT JOIN b USING (ord, io, pos)
