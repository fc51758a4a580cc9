-- description: Blame over whole runs (every rank and step of one msq compare): one row per compared row with where the error enters (verdict local, inherited, clean), its input and output error, amplification and floor; a collective's output is explained by the inputs of the same call on every rank (point-to-point: a recv by the sends of the other ranks); blame_rank 1 is the run's most severe local source. SELECT rank, npu_name FROM blame WHERE verdict = 'local' ORDER BY blame_rank.
-- (blame_rows read twice, each joined to its compare: its collectives' outputs for calls, every
-- row for judged; a CTE of every row and column that both read was stored whole first)
WITH calls AS (
  -- what each collective call brings in, per rank: the worst input of its op
  SELECT run_id, step, rank, op_name, max(input_err) AS in_err,
         regexp_extract(op_name, '^Distributed\.([A-Za-z_]+)\.', 1) AS api
  FROM blame_rows JOIN compares USING (compare_id)
  WHERE collective AND role = 'output'
  GROUP BY ALL
),
peers AS (
  SELECT a.run_id, a.step, a.rank, a.op_name, max(p.in_err) AS peer_err
  FROM calls a JOIN calls p
    ON p.run_id = a.run_id AND p.step IS NOT DISTINCT FROM a.step
   AND p.rank IS DISTINCT FROM a.rank
   AND (p.op_name = a.op_name
        OR (a.api IN ('recv', 'irecv') AND p.api IN ('send', 'isend')))
  GROUP BY ALL
),
judged AS (
  SELECT b.*, c.rank, c.step, c.label, pe.peer_err,
    -- a collective's output, not explained on its own rank: the other ranks decide
    collective AND role = 'output' AND verdict = 'inherited' AND pe.peer_err IS NOT NULL
      AND output_err > amp_limit * coalesce(input_err, 0.0) AS weighed
  FROM blame_rows b JOIN compares c USING (compare_id)
  LEFT JOIN peers pe ON pe.run_id = b.run_id AND pe.step = c.step
   AND pe.rank = c.rank AND pe.op_name = b.op_name
),
final AS (
  SELECT * REPLACE (
      CASE WHEN weighed THEN greatest(input_err, peer_err) ELSE input_err END AS input_err,
      CASE WHEN weighed AND output_err > amp_limit * greatest(input_err, peer_err) THEN 'local'
           ELSE verdict END AS verdict,
      CASE WHEN weighed AND output_err > amp_limit * greatest(input_err, peer_err)
             THEN 'error enters in the collective: the inputs of every rank do not explain it'
           WHEN weighed THEN 'through the collective: explained by the inputs of another rank'
           ELSE reason END AS reason)
  FROM judged
),
-- the local rows' rank, over their keys alone (a window sorts every column of its rows: the
-- view's whole rows were sorted to number them, ~5x the time of the rest on a history)
ranked AS (
  SELECT compare_id, out_seq, row_number() OVER (
         PARTITION BY run_id
         ORDER BY output_err DESC, step NULLS FIRST, op_seq, rank NULLS FIRST, out_seq) AS blame_rank
  FROM final WHERE verdict = 'local'
)
SELECT
  compare_id, run_id, label, rank, step, out_seq, op_seq, op_name, npu_name, io, role, direction,
  err_kind, input_err, output_err, floor, floor_source,
  CASE WHEN output_err IS NULL OR input_err IS NULL THEN NULL
       WHEN input_err > 0 AND isfinite(input_err) THEN output_err / input_err
       WHEN input_err = 0 AND output_err > 0 THEN 'inf'::DOUBLE END AS amplification,
  verdict, reason, blame_rank,
  link, via, band
FROM final LEFT JOIN ranked USING (compare_id, out_seq)
