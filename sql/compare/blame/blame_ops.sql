-- description: Blame, per NPU op: the error its inputs bring (input_err, the worst of: its own inputs; a backward op's forward record, whose tensors autograd saved; a module's inner ops, from construct.json; for an in-place input, recorded only after the op ran, any error before the op), which input that is, and the largest error of any output before the op (prior_err).
-- A batch's pairs (msq.pipeline.compute_batch) share the tables: ops relate by name and order
-- within their pair alone.
WITH ops_n AS (
  SELECT op_seq, op_name, pair,
    starts_with(op_name, 'Module.') OR starts_with(op_name, 'Cell.') AS is_module,
    -- ('', forward or backward: an ENUM; blame_op_direction, sql/compare/schema/40_blame.sql)
    blame_op_direction(op_name) AS direction
  FROM ops WHERE side = 'npu'
),
out_err AS (
  -- the largest output error of each op (compared output rows)
  SELECT op_seq, max(err) AS err
  FROM blame_tensors
  WHERE NOT is_input
  GROUP BY op_seq
),
prior AS (
  SELECT o.op_seq, o.direction,
    max(oe.err) OVER (PARTITION BY o.pair ORDER BY o.op_seq
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
      AS prior_err
  FROM ops_n o LEFT JOIN out_err oe USING (op_seq)
),
contrib AS (
  -- own inputs: the compared row's error; else the producer's; an in-place input: unknown before
  -- the op, so anything before it may explain it
  -- (in place: a forward op's input equal to its own output, see blame_tensors)
  SELECT i.op_seq, i.npu_name AS name,
    CASE WHEN i.own_output AND p.direction = 'forward' THEN p.prior_err
         ELSE coalesce(i.err, i.producer_err) END AS err
  FROM blame_tensors i JOIN prior p USING (op_seq)
  WHERE i.is_input
  UNION ALL
  -- a backward op: the tensors of its forward record (inputs and outputs; compared ones)
  SELECT b.op_seq, t.npu_name, t.err
  FROM ops_n b
  JOIN ops_n f ON f.pair = b.pair
    AND f.op_name = blame_forward_of(b.op_name)
  JOIN blame_tensors t ON t.op_seq = f.op_seq
  WHERE b.direction = 'backward' AND t.out_seq IS NOT NULL
  UNION ALL
  -- a module: the ops inside it (their compared outputs)
  SELECT m.op_seq, t.npu_name, t.err
  FROM ops_n m
  JOIN blame_nesting n ON n.side = 'npu' AND n.pair = m.pair AND n.ancestor = m.op_name
  JOIN ops_n c ON c.pair = n.pair AND c.op_name = n.op_name
  JOIN blame_tensors t ON t.op_seq = c.op_seq AND NOT t.is_input
  WHERE m.is_module AND t.out_seq IS NOT NULL
),
worst AS (
  -- the worst input; among equal errors (md5 mode: 1 or 0) the first name, so that it is the
  -- same on every run
  SELECT op_seq, max(err) AS input_err,
         CASE WHEN max(err) IS NOT NULL THEN first(name ORDER BY err DESC NULLS LAST, name) END
           AS worst_input,
         count(*) AS n_inputs,
         count(*) FILTER (WHERE err IS NULL) AS n_unknown
  FROM contrib GROUP BY op_seq
)
SELECT o.op_seq, o.op_name, o.is_module, o.direction,
  starts_with(o.op_name, 'Distributed.') AS collective,
  EXISTS (SELECT 1 FROM blame_nesting n
          WHERE n.side = 'npu' AND n.pair = o.pair AND n.ancestor = o.op_name)
    AS has_inner,
  coalesce(w.input_err, 0.0) AS input_err, w.worst_input, coalesce(w.n_inputs, 0) AS n_inputs,
  coalesce(w.n_unknown, 0) AS n_unknown, coalesce(p.prior_err, 0.0) AS prior_err
FROM ops_n o
LEFT JOIN worst w USING (op_seq)
LEFT JOIN prior p USING (op_seq)
