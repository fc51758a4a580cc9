-- description: What each row of each compare adds over its inputs (blame_rows.band): the noise band it gives when that compare is a reference noise run (msq compare --noise-label LABEL reads the newest compare of each label, rank and step).
WITH latest AS (
  SELECT compare_id, label, step, rank FROM compares
  QUALIFY row_number() OVER (PARTITION BY label, step, rank
                             ORDER BY started_at DESC, compare_id DESC) = 1
)
SELECT l.label, l.rank, l.step, l.compare_id, b.op_name, b.npu_name, b.band
FROM latest l JOIN blame_rows b USING (compare_id)
