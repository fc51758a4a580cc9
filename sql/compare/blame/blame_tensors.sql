-- description: Blame: every NPU tensor row, input or output, with its compared row (out_seq and its error; NULL when unmatched), the dtype floor of its own and the bench row's dtype (dtype_floor: blame_row_floor of each, the larger) and the dtype it is of (floor_dtype) and, for an input, its link to a producer (blame_edges, with the producer's name and error) and whether it equals one of its own op's outputs while no earlier output produced it (own_output: a forward op's such input is an in-place op's, which msprobe records after the op ran; blame_ops and blame_rows tell forward ops). blame_ops and blame_rows read it instead of joining the compare's rows again.
-- the inputs that equal an output of their own op
WITH own AS (
  SELECT i.row_seq
  FROM blame_keys i
  SEMI JOIN blame_keys o ON o.npu AND NOT o.is_input AND o.op_seq = i.op_seq
    AND coalesce(o.ckey, o.skey) = coalesce(i.ckey, i.skey)
  WHERE i.npu AND i.is_input
),
-- each NPU input's link, with the producer's name and error for the linked ones (not its row
-- and out_seq: no reader of this table reads them; blame_edges has the row); only the edges
-- that say more than an external input's (a link, or an input equal to its op's output): an
-- external one says 'external' and 0 candidates, which the SELECT below gives every input that
-- has an edge, i.e. is in blame_keys (a tensor row with elements), without the join of them
-- all (where most inputs are external, nearly every input's)
edges AS (
  SELECT ed.consumer_row, ed.how, ed.candidates,
         p.producer_name, p.producer_err,
         ed.how = 'external' AND ed.consumer_row IN (SELECT row_seq FROM own) AS own_output
  FROM blame_edges ed
  -- the producers' names, compared rows and errors, of the producers alone (few where most
  -- inputs are external: joined on every NPU row, each join hashed all of them)
  LEFT JOIN (
    SELECT pt.row_seq, pt.disp_name AS producer_name, pe.err AS producer_err
    FROM tensors pt
    LEFT JOIN compare_rows pr ON pr.npu_row = pt.row_seq AND pr.kind = 'matched'
    LEFT JOIN row_error pe ON pe.out_seq = pr.out_seq
    WHERE pt.side = 'npu'
      AND pt.row_seq IN (SELECT producer_row FROM blame_edges WHERE side = 'npu')
  ) p ON p.row_seq = ed.producer_row
  WHERE ed.side = 'npu' AND (ed.how <> 'external' OR ed.consumer_row IN (SELECT row_seq FROM own))
)
-- (is_input: the io as a boolean, as in blame_keys; blame_rows gives back its text; not the row's
-- row_seq: no reader of this table reads it)
-- blame_rows' dtype floor (before an md5 compare's 0) and its dtype, computed here: the two
-- dtypes' texts were one more string column to store, and on the rows of one dtype (all but
-- unmatched ones and NULL dtypes) the bench dtype's floor is the NPU dtype's, not computed again
-- (bench_floor NULL there). The bench row's dtype is row_error's b_dtype_raw where it differs
-- from the NPU row's or the NPU row has none (sql/compare/rules/row_error.sql), else the NPU
-- row's: the same floor and dtype as the bench row's own (an unmatched row, or a bench row
-- without a dtype, gave the NPU row's too), without a join of every bench row for its dtype
-- (~50 M instructions of a 6-pair root batch: its texts copied into the join's table)
SELECT * EXCLUDE (npu_dtype, bench_dtype, npu_floor, bench_floor),
  CASE WHEN npu_dtype = bench_dtype THEN npu_floor
       ELSE greatest(npu_floor, bench_floor) END AS dtype_floor,
  CASE WHEN npu_dtype = bench_dtype THEN npu_dtype
       WHEN npu_floor >= bench_floor THEN npu_dtype ELSE bench_dtype END AS floor_dtype
FROM (
SELECT
  t.op_seq, t.io = 'input' AS is_input, t.disp_name AS npu_name,
  t.dtype AS npu_dtype, coalesce(e.b_dtype_raw, t.dtype) AS bench_dtype,
  blame_row_floor(t.dtype) AS npu_floor,
  CASE WHEN e.b_dtype_raw IS NOT NULL THEN blame_row_floor(e.b_dtype_raw) END AS bench_floor,
  r.out_seq, e.err, e.err_kind,
  CASE WHEN t.io <> 'input' THEN NULL
       WHEN t.is_tensor THEN coalesce(ed.how, 'external'::blame_link)
       ELSE 'constant'::blame_link END AS link,
  CASE WHEN t.io = 'input' AND t.is_tensor AND coalesce(t.numel, 0) > 0
       THEN coalesce(ed.candidates, 0) END AS candidates,
  ed.producer_name, ed.producer_err,
  coalesce(ed.own_output, false) AS own_output
FROM tensors t
LEFT JOIN compare_rows r ON r.npu_row = t.row_seq AND r.kind = 'matched'
LEFT JOIN row_error e ON e.out_seq = r.out_seq
LEFT JOIN edges ed ON ed.consumer_row = t.row_seq
WHERE t.side = 'npu'
)
