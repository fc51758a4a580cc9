-- description: Blame's dataflow edges, per side: each tensor input row and the earlier output row that produced it (the nearest preceding output with the same content; an op's output before a module record that only repeats it), how it was linked (hash, md5, statistics, reshape; external: no producer), how many earlier outputs had that content, and the pair (a batch's; blame_keys' keys are within it).
-- For each kind of key, one window over the inputs to link and the producers, in dump order (pos):
-- the last producer before an input with its key. An input sorts before its own op's outputs.
-- (A key includes its row's pair, blame_keys: a batch's pairs never link to each other.)
WITH ins AS (SELECT * FROM blame_keys WHERE is_input),
-- the outputs, a module's (or cell's) told from an op's (by the op's name: outputs only)
-- (looked up among the modules' ops alone: every tensor row's op is in ops, msq.loader, and
-- a join of every op hashed all their names)
outs AS (
  SELECT k.npu, k.pos, k.ckey, k.skey, k.rkey,
    (k.npu, k.op_seq) IN (SELECT (side = 'npu', op_seq) FROM ops
                          WHERE starts_with(op_name, 'Module.') OR starts_with(op_name, 'Cell.'))
      AS is_module
  FROM blame_keys k
  WHERE NOT k.is_input
),
api AS (SELECT * FROM outs WHERE NOT is_module),
prod AS (
  -- a module's output that an op already produced only repeats it: the op is the producer
  SELECT npu, pos, ckey, skey, rkey FROM api
  UNION ALL
  SELECT m.npu, m.pos, m.ckey, m.skey, m.rkey FROM outs m
  ANTI JOIN api a ON a.npu = m.npu AND coalesce(a.ckey, a.skey) = coalesce(m.ckey, m.skey)
  WHERE m.is_module
),
-- 1. exact content: the hash of the metrics pass, or md5 (with dtype and shape)
-- (each over the keys that both an input and a producer have: a window over the others links
-- nothing, and on random statistics that is nearly every row; the content keys' IS NOT NULL
-- lets the scans of blame_keys skip them where no row has one: a statistics compare)
c_rows AS (
  SELECT i.npu, i.row_seq, i.pos, i.ckey AS key, i.chow AS how
  FROM ins i SEMI JOIN prod p ON p.npu = i.npu AND p.ckey = i.ckey
  WHERE i.ckey IS NOT NULL
  UNION ALL
  SELECT p.npu, NULL, p.pos, p.ckey, NULL
  FROM prod p SEMI JOIN ins i ON i.npu = p.npu AND i.ckey = p.ckey
  WHERE p.ckey IS NOT NULL
),
c AS (
  SELECT npu, row_seq, how,
    last_value(CASE WHEN row_seq IS NULL THEN pos END IGNORE NULLS) OVER w AS p_pos,
    count(CASE WHEN row_seq IS NULL THEN 1 END) OVER w AS n
  FROM c_rows
  WINDOW w AS (PARTITION BY npu, key ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
c_linked AS (SELECT npu, row_seq, p_pos, how, n FROM c WHERE row_seq IS NOT NULL AND p_pos IS NOT NULL),
-- 2. the exact statistics (dtype, shape, max, min, mean, norm) where an input has no content key
s_ins AS (SELECT npu, row_seq, pos, skey AS key FROM ins WHERE ckey IS NULL AND skey IS NOT NULL),
s_rows AS (
  SELECT i.* FROM s_ins i SEMI JOIN prod p ON p.npu = i.npu AND p.skey = i.key
  UNION ALL
  SELECT p.npu, NULL, p.pos, p.skey
  FROM prod p SEMI JOIN s_ins i ON i.npu = p.npu AND i.key = p.skey
),
s AS (
  SELECT npu, row_seq,
    last_value(CASE WHEN row_seq IS NULL THEN pos END IGNORE NULLS) OVER w AS p_pos,
    count(CASE WHEN row_seq IS NULL THEN 1 END) OVER w AS n
  FROM s_rows
  WINDOW w AS (PARTITION BY npu, key ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
s_linked AS (
  SELECT npu, row_seq, p_pos, 'statistics'::blame_link AS how, n FROM s
  WHERE row_seq IS NOT NULL AND p_pos IS NOT NULL
),
exact AS (SELECT * FROM c_linked UNION ALL SELECT * FROM s_linked),
-- 3. the same content under another shape (a view or reshape the dump does not record)
r_ins AS (
  SELECT i.npu, i.row_seq, i.pos, i.rkey AS key FROM ins i
  ANTI JOIN exact e ON e.npu = i.npu AND e.row_seq = i.row_seq
  WHERE i.rkey IS NOT NULL
),
r_rows AS (
  SELECT i.* FROM r_ins i SEMI JOIN prod p ON p.npu = i.npu AND p.rkey = i.key
  UNION ALL
  SELECT p.npu, NULL, p.pos, p.rkey
  FROM prod p SEMI JOIN r_ins i ON i.npu = p.npu AND i.key = p.rkey
),
r AS (
  SELECT npu, row_seq,
    last_value(CASE WHEN row_seq IS NULL THEN pos END IGNORE NULLS) OVER w AS p_pos,
    count(CASE WHEN row_seq IS NULL THEN 1 END) OVER w AS n
  FROM r_rows
  WINDOW w AS (PARTITION BY npu, key ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
linked AS (
  SELECT * FROM exact
  UNION ALL
  SELECT npu, row_seq, p_pos, 'reshape'::blame_link, n FROM r WHERE row_seq IS NOT NULL AND p_pos IS NOT NULL
)
-- (the side's text from blame_keys' npu: a tensor row's side is npu or bench)
SELECT CASE WHEN i.npu THEN 'npu' ELSE 'bench' END AS side,
       i.row_seq AS consumer_row, i.op_seq AS consumer_op,
       l.producer_row, l.producer_op,
       coalesce(l.how, 'external'::blame_link) AS how, coalesce(l.n, 0) AS candidates, i.pair
FROM ins i
-- each link with its producer's row, joined from the links' side: a join of every row's keys
-- hashed them all, where nothing links when the dump's inputs are external
LEFT JOIN (
  SELECT l.npu, l.row_seq, l.how, l.n, o.row_seq AS producer_row, o.op_seq AS producer_op
  FROM linked l JOIN blame_keys o ON o.npu = l.npu AND o.pos = l.p_pos
) l ON l.npu = i.npu AND l.row_seq = i.row_seq
