-- description: Rows whose severity (0 pass, 1 yellow, 2 red or failing) got worse from label_a to label_b, matched on step, rank and NPU row name; filter on label_a and label_b.
WITH latest AS (
  -- the newest compare of each (label, step, rank): re-running a label replaces its results
  SELECT compare_id, label, step, rank FROM compares
  WHERE label IS NOT NULL
  QUALIFY row_number() OVER (PARTITION BY label, step, rank
                             ORDER BY started_at DESC, compare_id DESC) = 1
),
scored AS (
  SELECT l.label, l.step, l.rank, r.*
  FROM latest l JOIN result_rows r USING (compare_id)
  WHERE r.severity IS NOT NULL
)
SELECT
  a.label AS label_a, b.label AS label_b, b.step, b.rank,
  b.op_name, b.npu_name,
  a.severity AS severity_a, b.severity AS severity_b,
  a.verdict AS verdict_a, b.verdict AS verdict_b,
  a.mark AS mark_a, b.mark AS mark_b,
  a.max_diff AS max_diff_a, b.max_diff AS max_diff_b,
  a.cosine AS cosine_a, b.cosine AS cosine_b,
  a.compare_id AS compare_a, b.compare_id AS compare_b, b.out_seq
FROM scored a
JOIN scored b
  ON a.label <> b.label
 AND a.step IS NOT DISTINCT FROM b.step
 AND a.rank IS NOT DISTINCT FROM b.rank
 AND a.npu_name = b.npu_name
WHERE b.severity > a.severity
