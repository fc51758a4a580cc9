-- description: stat_rows' rows with what stat_result makes its texts of: the verdict's reason, warn (the row's Warning: msprobe's flag under --compat, a mark in the default mode) and its unmatched reason (the default mode's alone), each from the verdicts that say something. A statistics batch stores this view (msq.pipeline.BATCH_STORED), and its stat_result's texts are made by their readers: a NULL reason or unmatched reason is appended for less than a text, and the four texts of every row are not stored.
SELECT s.*, v.reason,
       CASE WHEN (SELECT compat FROM settings) THEN flagged ELSE v.mark IS NOT NULL END AS warn,
       CASE WHEN NOT (SELECT compat FROM settings) THEN v.unmatched_reason END AS unmatched_reason
-- only the verdicts that say something: a verdict with an empty (or NULL) reason, no mark and
-- no unmatched reason (most rows) makes the same columns as no verdict ("Reason" '', no
-- Warning, "." after Err_message), and the join's right side holds ~1 % of the rows, not all
-- (tests/sql/test_stat_rows.py holds stat_result to the join of every verdict)
FROM stat_rows s LEFT JOIN (
  SELECT out_seq, reason, mark, unmatched_reason FROM verdicts
  WHERE reason <> '' OR mark IS NOT NULL OR unmatched_reason IS NOT NULL) v USING (out_seq)
