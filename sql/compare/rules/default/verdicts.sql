-- description: The default mode's verdict on every output row (docs/rules.md): mark red / yellow / NULL, the rule that fired (inf/nan, relative error, error grows) and the Reason text: the rule with its numbers, a note when the dtypes differ in precision, or why the row is unmatched.
-- The rules read row_error's err, the row's error relative to its tensor's scale (relative L2 in
-- tensor mode, the scale-aware statistics figure in statistics mode), so a statistic near zero
-- cannot make a row red. md5 mode has no marks (it has no magnitudes).
-- Cost: every text (numbers printed, dtypes renamed) sits inside a CASE that selects the rows
-- needing it (marked rows, dtypes that differ): DuckDB evaluates a CASE branch only for the rows
-- it selects, and does not hoist common subexpressions out of one. Computed for every row, the
-- texts took most of this view's time on a 100k-row compare of which a fifth is marked.
WITH s AS (SELECT * FROM settings),
e AS (  -- row_error carries the row's statistics and dtypes verdicts reads (see there)
  SELECT x.*, w.win, coalesce(w.is_input, false) AS is_input
  FROM row_error x
  LEFT JOIN hl_windows w USING (out_seq)
),
inputs AS (  -- the worst error among the inputs of each op (its highlight window)
  SELECT w.win, max(x.err) AS in_err
  FROM row_error x JOIN hl_windows w USING (out_seq)
  WHERE w.is_input AND x.err IS NOT NULL
  GROUP BY w.win
),
judged AS (
  SELECT e.*, i.in_err,
    CASE
      WHEN (SELECT mode FROM s) = 'md5' OR e.unmatched THEN NULL
      WHEN err = 'inf'::DOUBLE
           OR ((SELECT mode FROM s) = 'tensor' AND err_kind <> 'value'
               -- an inf or NaN in Max or Min that the other side does not share (tensor mode:
               -- the metrics pass treats +inf and -inf at one position alike; the statistics
               -- tell them apart)
               AND coalesce((n_max IS DISTINCT FROM b_max
                             AND NOT (isfinite(n_max) AND isfinite(b_max)))
                            OR (n_min IS DISTINCT FROM b_min
                                AND NOT (isfinite(n_min) AND isfinite(b_min))), false))
        THEN 'inf/nan'
      WHEN err >= verdict_red_err() THEN 'relative error'
      WHEN NOT is_input AND err >= verdict_yellow_err()
           AND err >= verdict_growth() * coalesce(i.in_err, 0.0) THEN 'error grows'
    END AS rule
  FROM e LEFT JOIN inputs i USING (win)
),
texts AS (  -- the numbers a marked row's reason names (NULL on the other rows)
  SELECT j.*,
    -- the statistic that set err_stat (row_error's, made there from its columns)
    CASE WHEN rule IS NOT NULL THEN n_stat_val END AS n_stat,
    CASE WHEN rule IS NOT NULL THEN b_stat_val END AS b_stat,
    -- the compared values themselves (a value compare: one element a side)
    CASE WHEN rule IS NOT NULL AND err_kind = 'value'
         THEN coalesce(n_max_str, reason_num(n_max)) END AS n_value,
    CASE WHEN rule IS NOT NULL AND err_kind = 'value'
         THEN coalesce(b_max_str, reason_num(b_max)) END AS b_value,
    -- dtypes renamed as PyTorch writes them, for the precision note: only where the raw dtypes
    -- of a matched row differ (row_error's n_dtype_raw and b_dtype_raw, NULL on the other rows:
    -- most are equal, nothing renamed); once each, not at each use (each use of a macro is
    -- bound and optimised anew: four renames were a third of this view's planning)
    CASE WHEN n_dtype_raw IS NOT NULL THEN ms_to_torch_dtype(n_dtype_raw) END AS n_dtype,
    CASE WHEN b_dtype_raw IS NOT NULL THEN ms_to_torch_dtype(b_dtype_raw) END AS b_dtype
  FROM judged j
)
SELECT
  t.out_seq,
  CASE rule WHEN 'error grows' THEN 'yellow' WHEN 'inf/nan' THEN 'red'
            WHEN 'relative error' THEN 'red' END AS mark,
  rule,
  -- each macro is used once (its use is bound and optimised per use, whatever the rows): the
  -- two threshold rules share the measure and the detail, and the inf/Nan statistics are
  -- named by one verdict_inf_stats ('' when neither Max nor Min is, hence the nullif).
  -- A row with no rule, no dtype note and no unmatched reason (most rows) has '' without the
  -- concat_ws and its CASEs (~8 M instructions of a 24,500-row pair)
  CASE WHEN rule IS NULL AND n_dtype IS NULL AND u.reason IS NULL THEN '' ELSE concat_ws('; ',
    CASE
      WHEN rule = 'inf/nan' THEN
        CASE WHEN err_kind = 'inf/nan positions differ'
               THEN 'inf/nan: at different positions in the NPU and bench tensors'
             WHEN err_kind = 'value' THEN 'inf/nan: value ' || n_value || ' vs ' || b_value
             ELSE coalesce(
               'inf/nan on one side: ' || nullif(verdict_inf_stats(n_max, b_max, n_min, b_min), ''),
               CASE WHEN err_stat IS NOT NULL
                      THEN 'inf/nan on one side: ' || err_stat || ' ' || reason_num(n_stat)
                           || ' vs ' || reason_num(b_stat)
                    ELSE 'inf/nan on one side' END) END
      WHEN rule IN ('relative error', 'error grows') THEN verdict_measure(err_kind, err) || ' >= '
        || CASE WHEN rule = 'relative error' THEN reason_num(verdict_red_err())
                ELSE reason_num(verdict_yellow_err())
                     || CASE WHEN in_err IS NULL THEN ' with no compared input'
                             WHEN in_err = 0 THEN ' from equal inputs'
                             ELSE ' and >= ' || reason_num(verdict_growth())
                                  || 'x its inputs'' worst ' || reason_num(in_err) END END
        || coalesce(', ' || verdict_detail(err_kind, err_stat, n_stat, b_stat, n_value, b_value),
                    '')
    END,
    -- raw dtypes that are equal (most rows) are equal once renamed: no note, nothing renamed
    -- (n_dtype, b_dtype: NULL then)
    CASE WHEN n_dtype IS NOT NULL AND float_precision_pair(n_dtype, b_dtype)
         THEN 'dtypes differ in precision (' || n_dtype || ' vs ' || b_dtype
              || '): values compared' END,
    u.reason
  ) END AS reason,
  u.reason AS unmatched_reason,
  u.reason_kind AS unmatched_kind
FROM texts t
LEFT JOIN unmatched_reasons u USING (out_seq)
