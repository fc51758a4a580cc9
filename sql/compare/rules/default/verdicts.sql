-- description: The default mode's verdict on every output row (docs/rules.md): mark red / yellow / NULL, the rule that fired (inf/nan, relative error, error grows) and the Reason text: the rule with its numbers, a note when the dtypes differ in precision, or why the row is unmatched.
-- The rules read row_error's err, the row's error relative to its tensor's scale (relative L2 in
-- tensor mode, the scale-aware statistics figure in statistics mode), so a statistic near zero
-- cannot make a row red. md5 mode has no marks (it has no magnitudes).
WITH s AS (SELECT * FROM settings),
e AS (
  SELECT r.out_seq, r.kind, x.err, x.err_kind, x.err_stat, w.win,
         coalesce(w.is_input, false) AS is_input,
         ms_to_torch_dtype(n.dtype) AS n_dtype, ms_to_torch_dtype(b.dtype) AS b_dtype,
         CASE x.err_stat WHEN 'Norm' THEN n.norm_num WHEN 'Mean' THEN n.mean_num
                         WHEN 'Max' THEN n.max_num WHEN 'Min' THEN n.min_num END AS n_stat,
         CASE x.err_stat WHEN 'Norm' THEN b.norm_num WHEN 'Mean' THEN b.mean_num
                         WHEN 'Max' THEN b.max_num WHEN 'Min' THEN b.min_num END AS b_stat,
         -- Max and Min where one side is inf/NaN and the other is not: the inf/nan reason
         concat_ws(', ',
           CASE WHEN n.max_num IS DISTINCT FROM b.max_num
                     AND NOT (isfinite(n.max_num) AND isfinite(b.max_num))
                THEN 'Max ' || reason_num(n.max_num) || ' vs ' || reason_num(b.max_num) END,
           CASE WHEN n.min_num IS DISTINCT FROM b.min_num
                     AND NOT (isfinite(n.min_num) AND isfinite(b.min_num))
                THEN 'Min ' || reason_num(n.min_num) || ' vs ' || reason_num(b.min_num) END)
           AS inf_stats,
         coalesce(n.max_str, reason_num(n.max_num)) AS n_value,
         coalesce(b.max_str, reason_num(b.max_num)) AS b_value,
         -- an inf or NaN in Max or Min that the other side does not share (tensor mode: the
         -- metrics pass treats +inf and -inf at one position alike; the statistics tell them apart)
         (n.max_num IS DISTINCT FROM b.max_num AND NOT (isfinite(n.max_num) AND isfinite(b.max_num)))
           OR (n.min_num IS DISTINCT FROM b.min_num
               AND NOT (isfinite(n.min_num) AND isfinite(b.min_num))) AS stat_one_sided
  FROM compare_rows r
  JOIN row_error x USING (out_seq)
  LEFT JOIN hl_windows w USING (out_seq)
  LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
  LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
),
inputs AS (  -- the worst error among the inputs of each op (its highlight window)
  SELECT win, max(err) AS in_err FROM e WHERE is_input AND err IS NOT NULL GROUP BY win
),
judged AS (
  SELECT e.*, i.in_err,
    CASE
      WHEN (SELECT mode FROM s) = 'md5' OR e.kind <> 'matched' THEN NULL
      WHEN err = 'inf'::DOUBLE
           OR ((SELECT mode FROM s) = 'tensor' AND err_kind <> 'value'
               AND coalesce(stat_one_sided, false)) THEN 'inf/nan'
      WHEN err >= verdict_red_err() THEN 'relative error'
      WHEN NOT is_input AND err >= verdict_yellow_err()
           AND err >= verdict_growth() * coalesce(i.in_err, 0.0) THEN 'error grows'
    END AS rule
  FROM e LEFT JOIN inputs i USING (win)
),
texts AS (
  SELECT j.*,
    CASE err_kind
      WHEN 'relative L2' THEN 'relative L2 error '
      WHEN 'value' THEN 'relative difference '
      ELSE 'scale-aware error ' END || reason_num(err) AS measure,
    CASE err_kind
      WHEN 'relative L2' THEN NULL
      WHEN 'value' THEN 'value ' || n_value || ' vs ' || b_value
      ELSE 'from ' || err_stat || ': NPU ' || reason_num(n_stat) || ', bench ' || reason_num(b_stat)
    END AS detail
  FROM judged j
)
SELECT
  t.out_seq,
  CASE rule WHEN 'error grows' THEN 'yellow' WHEN 'inf/nan' THEN 'red'
            WHEN 'relative error' THEN 'red' END AS mark,
  rule,
  concat_ws('; ',
    CASE rule
      WHEN 'inf/nan' THEN
        CASE WHEN err_kind = 'inf/nan positions differ'
               THEN 'inf/nan: at different positions in the NPU and bench tensors'
             WHEN err_kind = 'value' THEN 'inf/nan: value ' || n_value || ' vs ' || b_value
             WHEN inf_stats <> '' THEN 'inf/nan on one side: ' || inf_stats
             WHEN err_stat IS NOT NULL
               THEN 'inf/nan on one side: ' || err_stat || ' ' || reason_num(n_stat) || ' vs '
                    || reason_num(b_stat)
             ELSE 'inf/nan on one side' END
      WHEN 'relative error' THEN measure || ' >= ' || reason_num(verdict_red_err())
        || coalesce(', ' || detail, '')
      WHEN 'error grows' THEN measure || ' >= ' || reason_num(verdict_yellow_err())
        || CASE WHEN in_err IS NULL THEN ' with no compared input'
                WHEN in_err = 0 THEN ' from equal inputs'
                ELSE ' and >= ' || reason_num(verdict_growth()) || 'x its inputs'' worst '
                     || reason_num(in_err) END
        || coalesce(', ' || detail, '')
    END,
    CASE WHEN kind = 'matched' AND float_precision_pair(n_dtype, b_dtype)
         THEN 'dtypes differ in precision (' || n_dtype || ' vs ' || b_dtype
              || '): values compared' END,
    u.reason
  ) AS reason,
  u.reason AS unmatched_reason,
  u.reason_kind AS unmatched_kind
FROM texts t
LEFT JOIN unmatched_reasons u USING (out_seq)
