-- description: Why an output row has no counterpart on the other side (default mode: Err_message and Reason): reason_kind, a short code the console counts (dm_missing, dm_unnamed, extra, dtype, shape, taken, op_differs, args, call, api), and the reason text with the names and dtypes involved.
WITH s AS (SELECT * FROM settings),
-- The view's cost follows the unmatched rows (a few of a batch's ~146,000 rows): each step below
-- starts from them and reaches the big tables through a join whose small side is theirs (DuckDB
-- then filters the big table's scan by their keys, and skips it when that side is empty), never
-- through a scan joined to all of a table's rows (bench/README, "Session 25: unm").
ur AS (  -- the unmatched rows, each with the one side it has and its row there
  SELECT out_seq, kind, ord,
         CASE WHEN kind = 'bench_only' THEN 'bench' ELSE 'npu' END AS side,
         CASE WHEN kind = 'bench_only' THEN bench_row ELSE npu_row END AS row_seq
  FROM compare_rows WHERE kind <> 'matched' AND NOT (SELECT compat FROM s)  -- --compat keeps msprobe's texts
),
-- their tensors rows through a semi join on the rows' numbers (the side compared after it: a scan
-- of each side's rows filtered by 'npu' / 'bench', joined to every row, was ~23 M instructions
-- of a 6-pair batch's view more)
u AS (
  SELECT r.out_seq, r.kind, r.ord, r.side,
         CASE WHEN r.side = 'bench' THEN 'NPU' ELSE 'bench' END AS other,
         t.match_name AS name, t.disp_name AS disp, ms_to_torch_dtype(t.dtype) AS dtype,
         -- the pair of dumps of the row (ops.pair): names are looked for within it only
         t.shape, t.op_seq, t.pair
  FROM ur r
  LEFT JOIN (SELECT side, row_seq, match_name, disp_name, dtype, shape, op_seq, pair FROM tensors
             WHERE row_seq IN (SELECT row_seq FROM ur)) t
    ON t.side = r.side AND t.row_seq = r.row_seq
),
matched_rows AS (
  SELECT npu_row AS row_seq, 'npu' AS side FROM compare_rows WHERE kind = 'matched'
  UNION ALL SELECT bench_row, 'bench' FROM compare_rows WHERE kind = 'matched'
),
-- each op's name as the matching sees it (MindSpore -am/-cm rewrite row names); not materialised:
-- each use reads ops with its own filter (materialised, every op's name was copied first)
op_names AS NOT MATERIALIZED (
  SELECT side, op_seq, op_name AS op, n_rows, pair FROM ops
  WHERE NOT coalesce((SELECT api_mapping OR cell_mapping FROM s), false)
  UNION ALL
  SELECT side, op_seq, row_op(arg_min(match_name, row_in_op)), count(*), pair FROM tensors
  WHERE coalesce((SELECT api_mapping OR cell_mapping FROM s), false)
  GROUP BY side, op_seq, pair
),
-- op_names cut to the unmatched rows' op_seqs first (a semi join), then joined on the side too:
-- joined to all of op_names, the ~40,000 ops of a 4-pair batch took ~43 M instructions more
-- (op_api and op_call once, read by u_apis and other_api: each use of a macro is bound and
-- optimised anew, whatever the rows)
u_ops AS (SELECT DISTINCT u.side, u.op_seq, o.op, o.n_rows, o.pair,
                 op_api(o.op) AS api, op_call(o.op) AS call
          FROM u JOIN (SELECT * FROM op_names WHERE op_seq IN (SELECT op_seq FROM u)) o
            USING (side, op_seq)),
-- stem: the API without its last part (its direction, or its name): every op of that API starts
-- with it (X.3.forward and X.forward.3 are API X.forward), so op_api's regular expressions run
-- only for the other side's ops that do (on each op of that side they were a third of this view)
-- (op_api once, its result reused: each use of a macro is bound and optimised anew, whatever the
-- rows; its two uses here, first_diff's two dtype tests and other_api's two op_api were a sixth
-- of this view's ~270 M instructions on a 24,500-row pair with five unmatched rows)
u_apis AS (SELECT DISTINCT side, pair, api, regexp_replace(api, '\.[^.]*$', '') AS stem
           FROM u_ops),
-- the other side's ops of those APIs in the same pair, with their calls. The join is on the pair
-- and the other side as one equality (side <> side left a filter over every op of the pair), and
-- op_api's regular expressions run only for the ops that start with the stem. An op of the same
-- name has the same API: other_op reads its ops here, not from a second pass over every op
other_calls AS (
  SELECT u.side, u.pair, u.api, o.op, o.n_rows, op_call(o.op) AS call
  FROM u_apis u JOIN op_names o ON o.side = CASE WHEN u.side = 'npu' THEN 'bench' ELSE 'npu' END
   AND o.pair = u.pair
   AND CASE WHEN starts_with(o.op, u.stem) THEN op_api(o.op) = u.api ELSE false END
),
other_op AS (  -- the other side's op of the same name (among those of the same API)
  SELECT uo.side, uo.op_seq, min(o.n_rows) AS o_rows, any_value(uo.n_rows) AS u_rows
  FROM u_ops uo JOIN other_calls o ON o.side = uo.side AND o.pair = uo.pair AND o.op = uo.op
  GROUP BY ALL
),
u_op_rows AS MATERIALIZED (  -- the rows of the unmatched ops (first: they are few)
  -- t_dtype: the dtype as PyTorch writes it, once a row (first_diff's test reads it)
  SELECT uo.side, uo.op_seq, t.row_seq, t.match_name, t.dtype, ms_to_torch_dtype(t.dtype) AS t_dtype,
         t.shape, t.row_in_op, t.pair
  FROM u_ops uo
  -- the semi join filters the scan of tensors by the few ops (joined to all rows, every row's
  -- texts were read)
  JOIN (SELECT * FROM tensors WHERE op_seq IN (SELECT op_seq FROM u_ops)) t
    ON t.side = uo.side AND t.op_seq = uo.op_seq
),
-- the rows of the names the unmatched rows and their ops' rows have, on either side: what same
-- and first_diff look for there (one scan of every row's name, a semi join on the few names;
-- joined to every row, first_diff's LEFT JOIN built its hash table of all of them)
named AS MATERIALIZED (  -- t_dtype: as u_op_rows', once a row (same and first_diff read it)
  SELECT *, ms_to_torch_dtype(dtype) AS t_dtype FROM tensors
  WHERE match_name IN (SELECT name FROM u UNION ALL SELECT match_name FROM u_op_rows)
),
same AS (  -- the other side's row of the same (matching) name; the first when there are several
  SELECT u.out_seq,
         arg_min(o.t_dtype, o.row_seq) AS o_dtype,
         arg_min(o.shape, o.row_seq) AS o_shape,
         bool_or(m.row_seq IS NOT NULL) AS o_taken
  FROM u
  JOIN named o ON o.side <> u.side AND o.pair = u.pair AND o.match_name = u.name
  LEFT JOIN matched_rows m ON m.side = o.side AND m.row_seq = o.row_seq
  GROUP BY u.out_seq
),
first_diff AS (  -- the first row of an unmatched op that the other side's same-named row rejects
  SELECT side, op_seq,
         arg_min(match_name || CASE
                   WHEN o_row IS NULL THEN ' is absent there'
                   WHEN NOT compatible
                     THEN ': dtype ' || coalesce(dtype, 'None') || ' vs ' || coalesce(o_dtype, 'None')
                   ELSE ': shape ' || coalesce(shape, 'None') || ' vs ' || coalesce(o_shape, 'None')
                 END,
                 row_in_op) AS what
  -- the dtype test once (its macros expanded once), read by the filter and the text
  FROM (SELECT t.*, o.row_seq AS o_row, o.dtype AS o_dtype, o.shape AS o_shape,
               dtype_compatible(t.t_dtype, o.t_dtype, (SELECT compat FROM s)) AS compatible
        FROM u_op_rows t
        LEFT JOIN named o
          ON o.side <> t.side AND o.pair = t.pair AND o.match_name = t.match_name)
  WHERE o_row IS NULL OR NOT compatible OR shape IS DISTINCT FROM o_shape
  GROUP BY side, op_seq
),
other_api AS (  -- how often the other side calls the API of each unmatched op
  SELECT uo.side, uo.op_seq, uo.api, uo.call,
         count(c.api) AS calls, min(c.call) AS first_call, max(c.call) AS last_call
  FROM u_ops uo
  LEFT JOIN other_calls c ON c.side = uo.side AND c.pair = uo.pair AND c.api = uo.api
  GROUP BY ALL
),
-- ops some of whose rows are matched: the other side's op they are matched with. From the
-- unmatched ops' rows (u_op_rows) to their matched output rows, each side through its own join
-- (the scan of compare_rows filtered by the rows' numbers), then the other side's rows and ops
-- (the scans skipped when no row is matched: each side of tensors, compare_rows and ops scanned
-- whole before, ~28 M instructions of a 6-pair batch's view)
paired_ops AS (
  SELECT p.side, p.op_seq, any_value(o.op_name) AS o_op
  FROM (SELECT t.side, t.op_seq, r.bench_row AS o_row
        FROM u_op_rows t JOIN compare_rows r ON r.npu_row = t.row_seq
        WHERE t.side = 'npu' AND r.kind = 'matched'
        UNION ALL
        SELECT t.side, t.op_seq, r.npu_row
        FROM u_op_rows t JOIN compare_rows r ON r.bench_row = t.row_seq
        WHERE t.side = 'bench' AND r.kind = 'matched') p
  JOIN tensors ot ON ot.row_seq = p.o_row AND ot.side <> p.side
  JOIN ops o ON o.side = ot.side AND o.op_seq = ot.op_seq
  GROUP BY p.side, p.op_seq
),
dm AS (
  SELECT u.out_seq, m.bench_key
  FROM u JOIN mappings m ON m.kind = 'data' AND m.npu_key = u.disp
),
judged AS (
  SELECT u.*, po.o_op AS extra_op, d.bench_key AS dm_key,
         sm.o_dtype, sm.o_shape, sm.o_taken, sm.out_seq IS NOT NULL AS has_same,
         oo.o_rows, oo.u_rows, fd.what, a.api, a.call, a.calls, a.first_call, a.last_call,
         (SELECT count(*) > 0 FROM mappings WHERE kind = 'data') AS dm_on,
         CASE
           WHEN (SELECT count(*) > 0 FROM mappings WHERE kind = 'data') THEN
             CASE WHEN d.bench_key IS NOT NULL THEN 'dm_missing' ELSE 'dm_unnamed' END
           WHEN u.kind = 'npu_extra' OR po.o_op IS NOT NULL THEN 'extra'
           WHEN sm.out_seq IS NOT NULL THEN
             CASE WHEN NOT dtype_compatible(u.dtype, sm.o_dtype, (SELECT compat FROM s)) THEN 'dtype'
                  WHEN u.shape IS DISTINCT FROM sm.o_shape THEN 'shape'
                  WHEN sm.o_taken THEN 'taken'
                  WHEN fd.what IS NOT NULL THEN 'op_differs'
                  ELSE 'args' END
           WHEN oo.o_rows IS NOT NULL THEN 'args'
           WHEN a.call IS NOT NULL AND a.calls > 0 THEN 'call'
           ELSE 'api'
         END AS reason_kind
  FROM u
  LEFT JOIN paired_ops po ON po.side = u.side AND po.op_seq = u.op_seq
  LEFT JOIN dm d USING (out_seq)
  LEFT JOIN same sm USING (out_seq)
  LEFT JOIN other_op oo ON oo.side = u.side AND oo.op_seq = u.op_seq
  LEFT JOIN first_diff fd ON fd.side = u.side AND fd.op_seq = u.op_seq
  LEFT JOIN other_api a ON a.side = u.side AND a.op_seq = u.op_seq
)
SELECT
  out_seq, reason_kind,
  coalesce(CASE reason_kind
    WHEN 'extra' THEN coalesce('its op is paired with the ' || other || ' op ' || extra_op,
                               'its op is paired') || ', which has no argument at this place'
    WHEN 'dm_missing' THEN 'mapped by -dm to ' || dm_key || ', which the bench lacks'
    WHEN 'dm_unnamed' THEN 'not named in the -dm mapping'
    WHEN 'dtype' THEN other || ' has this name with dtype ' || coalesce(o_dtype, 'None') || '; '
                      || coalesce(dtype, 'None') || ' vs ' || coalesce(o_dtype, 'None')
                      || ' cannot be compared'
    WHEN 'shape' THEN other || ' has this name with shape ' || coalesce(o_shape, 'None')
                      || '; shapes ' || coalesce(shape, 'None') || ' vs ' || coalesce(o_shape, 'None')
                      || ' differ'
    WHEN 'taken' THEN 'the ' || other || ' row of this name is paired with another row'
    WHEN 'op_differs' THEN 'its op does not match the ' || other || ' op of that name ('
                           || what || ')'
    WHEN 'args' THEN 'the ' || other || ' op of this name has other arguments'
                     || CASE WHEN has_same THEN coalesce(' (' || o_rows || ' rows there, ' || u_rows
                                                  || ' here)', '')
                             ELSE ' (no ' || disp || ' there)' END
    WHEN 'call' THEN 'no ' || other || ' op of this API at call ' || call || ' (' || other || ' has '
                     || CASE WHEN calls = 1 THEN 'call ' || first_call || ' only'
                             WHEN calls = last_call - first_call + 1
                               THEN 'calls ' || first_call || '-' || last_call
                             ELSE calls || ' calls, ' || first_call || ' to ' || last_call END
                     || ' of ' || api || ')'
    ELSE 'the ' || other || ' has no ' || api || ' op'
  END, 'no ' || other || ' row of this name') AS reason
FROM judged
