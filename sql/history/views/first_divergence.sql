-- description: The first divergent row of each compare (a red row, or the advisor's failing verdict), with its rank, step and label, and why (the default mode's Reason: the rule that fired and its numbers); compares without one are absent.
WITH divergent AS (
  SELECT r.*, row_number() OVER (PARTITION BY r.compare_id ORDER BY r.out_seq) AS k
  FROM result_rows r
  WHERE r.mark = 'red' OR r.failing
)
SELECT
  c.compare_id, c.label, c.step, c.rank, c.mode, c.started_at,
  d.out_seq, d.op_name, d.npu_name, d.mark, d.result, d.verdict,
  -- the default mode's Reason says which rule fired, with its numbers
  CASE WHEN d.mark IS NOT NULL AND d.reason IS NOT NULL THEN d.mark || ': ' || d.reason
       WHEN d.mark = 'red' THEN 'red: ' || d.mark_rules
       ELSE 'verdict: ' || d.result END AS reason,
  d.err_message
FROM compares c
JOIN divergent d ON d.compare_id = c.compare_id AND d.k = 1
