-- description: Which op pairs can match under a user api mapping in --compat msprobe-1.1 (spec §3.8.3). A pair whose two APIs an entry names is decided by the entry alone: the listed positions are kept in the op's own order, ms_api becomes pt_api and the last character of each NPU name becomes the last field of the bench name, then names and structures are compared as 1.1.0 does. Other pairs come from op_candidates (entry NULL).
WITH s AS (SELECT * FROM settings),
e AS (SELECT DISTINCT entry, ms_api, pt_api FROM ms_user_api_args),
named AS (
  SELECT n.entry, n.op_seq AS npu_op, b.op_seq AS bench_op
  FROM ms_user_api_keys n
  JOIN ms_user_api_keys b
    ON n.side = 'npu' AND b.side = 'bench' AND n.entry = b.entry AND n.key = b.key
),
-- the rows 1.1.0 keeps; kk counts them inputs first, ki within inputs or outputs
kept AS (
  SELECT p.entry, p.npu_op, p.bench_op, r.side, r.row_seq, r.io, r.disp_name, r.shape, r.md5,
         CASE WHEN r.side = 'npu' AND (SELECT cross_framework FROM s) THEN ms_to_torch_dtype(r.dtype)
              ELSE r.dtype END AS dtype,
         row_number() OVER (PARTITION BY p.entry, p.npu_op, p.bench_op, r.side ORDER BY r.row_in_op)
           AS kk,
         row_number() OVER (PARTITION BY p.entry, p.npu_op, p.bench_op, r.side, r.io
                            ORDER BY r.row_in_op) AS ki
  FROM named p
  JOIN ms_user_api_rows r
    ON (r.side = 'npu' AND r.op_seq = p.npu_op) OR (r.side = 'bench' AND r.op_seq = p.bench_op)
  SEMI JOIN ms_user_api_args a
    ON a.entry = p.entry AND a.io = r.io
       AND ((r.side = 'npu' AND a.ms_pos = r.pos) OR (r.side = 'bench' AND a.pt_pos = r.pos))
),
kn AS (SELECT k.*, e.ms_api, e.pt_api FROM kept k JOIN e USING (entry) WHERE k.side = 'npu'),
kb AS (SELECT * FROM kept WHERE side = 'bench'),
name_pairs AS (
  SELECT coalesce(n.entry, b.entry) AS entry, coalesce(n.npu_op, b.npu_op) AS npu_op,
         coalesce(n.bench_op, b.bench_op) AS bench_op, b.disp_name AS bench_name,
         -- left(x, -1) drops the last character, as 1.1.0's name[:-1] does
         left(replace(n.disp_name, n.ms_api, n.pt_api), -1)
           || regexp_extract(b.disp_name, '[^.]*$') AS renamed
  FROM kn n
  FULL JOIN kb b
    ON n.entry = b.entry AND n.npu_op = b.npu_op AND n.bench_op = b.bench_op AND n.kk = b.kk
),
name_check AS (
  SELECT entry, npu_op, bench_op,
         bool_and(coalesce(CASE WHEN (SELECT fuzzy FROM s)
                                THEN fuzzy_rename(renamed) = fuzzy_rename(bench_name)
                                ELSE renamed = bench_name END, false)) AS ok
  FROM name_pairs
  GROUP BY ALL
),
zipped AS (
  SELECT coalesce(n.entry, b.entry) AS entry, coalesce(n.npu_op, b.npu_op) AS npu_op,
         coalesce(n.bench_op, b.bench_op) AS bench_op, coalesce(n.io, b.io) AS io,
         n.row_seq IS NOT NULL AS has_n, b.row_seq IS NOT NULL AS has_b,
         n.dtype IS NOT DISTINCT FROM b.dtype AND n.shape IS NOT DISTINCT FROM b.shape
           AND ((SELECT mode FROM s) <> 'md5' OR n.md5 IS NOT DISTINCT FROM b.md5) AS same,
         n.shape IS NOT DISTINCT FROM b.shape
           AND (n.dtype IS NOT DISTINCT FROM b.dtype OR dtype_tolerated(n.dtype, b.dtype)) AS close
  FROM kn n
  FULL JOIN kb b
    ON n.entry = b.entry AND n.npu_op = b.npu_op AND n.bench_op = b.bench_op AND n.io = b.io
       AND n.ki = b.ki
),
struct_check AS (
  SELECT entry, npu_op, bench_op,
         bool_and(has_n AND has_b AND same) AS exact_ok,
         count(*) FILTER (WHERE io = 'input' AND has_n) AS n_in,
         count(*) FILTER (WHERE io = 'input' AND has_b) AS b_in,
         bool_and(NOT (has_n AND has_b) OR close) AS zip_ok,
         count(*) FILTER (WHERE io = 'output' AND has_n AND has_b) AS out_zip
  FROM zipped
  GROUP BY ALL
),
by_entry AS (
  SELECT p.entry, p.npu_op, p.bench_op
  FROM named p
  LEFT JOIN name_check nc USING (entry, npu_op, bench_op)
  LEFT JOIN struct_check sc USING (entry, npu_op, bench_op)
  -- no kept row on either side: 1.1.0 compares two empty lists (equal, unless fuzzy)
  WHERE coalesce(nc.ok, NOT (SELECT fuzzy FROM s))
    AND (coalesce(sc.exact_ok, true)
         OR (sc.n_in = sc.b_in AND sc.n_in > 0 AND sc.zip_ok AND sc.out_zip > 0))
),
op_api AS (
  SELECT side, op_seq, split_part(op_name, '.', 1) || '.' || split_part(op_name, '.', 2) AS api
  FROM ops
)
SELECT entry, npu_op, bench_op FROM by_entry
UNION ALL
SELECT NULL::INTEGER AS entry, c.npu_op, c.bench_op
FROM op_candidates c
JOIN op_api n ON n.side = 'npu' AND n.op_seq = c.npu_op
JOIN op_api b ON b.side = 'bench' AND b.op_seq = c.bench_op
WHERE NOT EXISTS (SELECT 1 FROM e WHERE e.ms_api = n.api AND e.pt_api = b.api)
