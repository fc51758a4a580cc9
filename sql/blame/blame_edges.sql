-- description: Blame's dataflow edges, per side: each tensor input row and the earlier output row that produced it (the nearest preceding output with the same content; an op's output before a module's, which only repeats it), how it was linked (hash, md5, statistics, reshape; external: no producer) and how many earlier outputs had that content.
WITH ins AS (
  SELECT * FROM blame_keys WHERE io = 'input'
),
outs AS (
  SELECT k.*,
    count(*) OVER (PARTITION BY side, ckey ORDER BY pos) AS c_ckey,
    count(*) OVER (PARTITION BY side, skey ORDER BY pos) AS c_skey,
    count(*) OVER (PARTITION BY side, rkey ORDER BY pos) AS c_rkey
  FROM blame_keys k WHERE io = 'output'
),
api AS (SELECT * FROM outs WHERE NOT is_module),
mods AS (SELECT * FROM outs WHERE is_module),
-- 1. exact content (hash, md5): an op's output first, else a module's
c_api AS (
  SELECT i.side, i.row_seq, o.row_seq AS p_row, o.op_seq AS p_op, i.chow AS how, o.c_ckey AS n
  FROM ins i ASOF JOIN api o ON i.side = o.side AND i.ckey = o.ckey AND i.op_seq * 1048576 > o.pos
),
c_mod AS (
  SELECT i.side, i.row_seq, o.row_seq AS p_row, o.op_seq AS p_op, i.chow AS how, o.c_ckey AS n
  FROM ins i ASOF JOIN mods o ON i.side = o.side AND i.ckey = o.ckey AND i.op_seq * 1048576 > o.pos
),
-- 2. the exact statistics, where a side has no content key (not read, not dumped)
no_ckey AS (SELECT * FROM ins WHERE ckey IS NULL),
s_api AS (
  SELECT i.side, i.row_seq, o.row_seq AS p_row, o.op_seq AS p_op, 'statistics' AS how,
         o.c_skey AS n
  FROM no_ckey i ASOF JOIN api o
    ON i.side = o.side AND i.skey = o.skey AND i.op_seq * 1048576 > o.pos
),
s_mod AS (
  SELECT i.side, i.row_seq, o.row_seq AS p_row, o.op_seq AS p_op, 'statistics' AS how,
         o.c_skey AS n
  FROM no_ckey i ASOF JOIN mods o
    ON i.side = o.side AND i.skey = o.skey AND i.op_seq * 1048576 > o.pos
),
-- 3. the same content under another shape: a view or reshape the dump does not record
r_api AS (
  SELECT i.side, i.row_seq, o.row_seq AS p_row, o.op_seq AS p_op, 'reshape' AS how,
         o.c_rkey AS n
  FROM ins i ASOF JOIN api o ON i.side = o.side AND i.rkey = o.rkey AND i.op_seq * 1048576 > o.pos
),
r_mod AS (
  SELECT i.side, i.row_seq, o.row_seq AS p_row, o.op_seq AS p_op, 'reshape' AS how,
         o.c_rkey AS n
  FROM ins i ASOF JOIN mods o ON i.side = o.side AND i.rkey = o.rkey AND i.op_seq * 1048576 > o.pos
),
tiers AS (
  SELECT *, 1 AS tier FROM c_api UNION ALL SELECT *, 2 FROM c_mod
  UNION ALL SELECT *, 3 FROM s_api UNION ALL SELECT *, 4 FROM s_mod
  UNION ALL SELECT *, 5 FROM r_api UNION ALL SELECT *, 6 FROM r_mod
),
linked AS (
  SELECT * FROM tiers QUALIFY row_number() OVER (PARTITION BY side, row_seq ORDER BY tier) = 1
)
SELECT i.side, i.row_seq AS consumer_row, i.op_seq AS consumer_op,
       l.p_row AS producer_row, l.p_op AS producer_op,
       coalesce(l.how, 'external') AS how, coalesce(l.n, 0) AS candidates
FROM ins i LEFT JOIN linked l USING (side, row_seq)
