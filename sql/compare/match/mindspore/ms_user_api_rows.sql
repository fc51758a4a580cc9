-- description: Every row with its op's API (the first two fields of the op name, e.g. Functional.add), the rest of the op name (e.g. 0.forward) and its position among the op's inputs or outputs; the user api mapping addresses rows this way.
WITH o AS (
  SELECT side, op_seq, op_name,
         split_part(op_name, '.', 1) || '.' || split_part(op_name, '.', 2) AS api
  FROM ops
)
SELECT t.side, t.op_seq, t.row_seq, t.row_in_op, t.disp_name, t.io, t.dtype, t.shape, t.md5,
       o.api, substr(o.op_name, length(o.api) + 2) AS rest,
       (row_number() OVER (PARTITION BY t.side, t.op_seq, t.io ORDER BY t.row_in_op) - 1)::INTEGER
         AS pos
FROM tensors t
JOIN o ON o.side = t.side AND o.op_seq = t.op_seq
