-- description: One comparable error figure per output row (relative, 0 = equal; docs/blame.md): statistics mode from the four statistics (scale-aware), tensor mode the relative L2 error of the tensors, md5 mode 0 equal / 1 differs; err_kind says how it was computed.
-- Scale-aware statistics figure, the largest of:
--   |dNorm| / max(norm)          (the L2 norms)
--   |dMean| / rms, rms = max(norm) / sqrt(numel)   (a mean that cancels to ~0 cannot blow it up)
--   |dMax|, |dMin| / the largest magnitude among both sides' max and min
-- each 0 when the two values are equal (a shared inf or NaN included), 1 when their scale is 0,
-- +inf when one side is inf/NaN and the other is not (scales: over finite values only).
-- Tensor mode: sqrt(sum (n-b)^2) / sqrt(max(sum n^2, sum b^2)), from the metrics pass.
-- Tensor mode, inf/NaN at different positions: +inf.
-- Non-tensor arguments: |a-b| / max(|a|,|b|) for numbers, 0/1 for other values.
-- Empty tensors: 0. Unmatched rows: err NULL, err_kind 'unmatched'.
-- err_stat (statistics mode): which of the four statistics set err, for the verdict reasons.
-- The columns after err_stat: what verdicts reads of the row's statistics and dtypes (below).
WITH j AS (
  SELECT
    r.out_seq, r.kind,
    n.is_tensor AND b.is_tensor AS tensors,
    greatest(coalesce(n.numel, 1), 1) AS numel,
    n.numel = 0 AND b.numel = 0 AS empty,
    n.md5 AS n_md5, b.md5 AS b_md5,
    n.max_num AS n_max, n.min_num AS n_min, n.mean_num AS n_mean, n.norm_num AS n_norm,
    b.max_num AS b_max, b.min_num AS b_min, b.mean_num AS b_mean, b.norm_num AS b_norm,
    -- both values numbers (is_num of both kinds): the readers give a max_num exactly for kinds i,
    -- f and b (tests/sql/test_stat_rows.py), so no kind is read or compared
    n.max_num IS NOT NULL AND b.max_num IS NOT NULL AS n_num,
    n.max_str AS n_max_str, b.max_str AS b_max_str,
    -- for verdicts' precision note: the raw dtypes of a matched row whose dtypes differ (most
    -- rows: NULL, nothing stored); the bench one also where the NPU row has none, which
    -- verdicts does not read (its note needs n_dtype_raw) but blame_tensors does: its bench
    -- row's dtype is this or the NPU row's, without a join of the bench rows again
    -- (sql/compare/blame/blame_tensors.sql)
    CASE WHEN r.kind = 'matched' AND n.dtype <> b.dtype THEN n.dtype END AS n_dtype_raw,
    CASE WHEN r.kind = 'matched' AND n.dtype <> b.dtype THEN b.dtype
         WHEN r.kind = 'matched' AND n.dtype IS NULL THEN b.dtype END AS b_dtype_raw,
    tm.status, tm.sq_diff, tm.npu_sq, tm.bench_sq
  FROM compare_rows r
  LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
  LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
  LEFT JOIN tensor_metrics tm ON tm.out_seq = r.out_seq
),
-- The statistics figure (scales, parts, stat, part) is read only where both sides are tensors:
-- made for those rows alone (CASE WHEN tensors: a value row, ~40 % of a root batch's, gets NULL),
-- not for every row (~11 M instructions of a 6-pair root batch, ~1.8 %)
scales AS (  -- each scale once a row (inside blame_rel's CASE it was made at each use)
  SELECT j.*,
    CASE WHEN tensors THEN greatest(blame_fin(n_norm), blame_fin(b_norm)) END AS norm_scale,
    CASE WHEN tensors THEN
      greatest(blame_fin(n_max), blame_fin(n_min), blame_fin(b_max), blame_fin(b_min)) END
      AS extreme_scale
  FROM j
),
parts AS (
  SELECT scales.*,
    n_norm IS NULL OR b_norm IS NULL OR n_max IS NULL OR b_max IS NULL
      OR n_min IS NULL OR b_min IS NULL OR n_mean IS NULL OR b_mean IS NULL AS stat_missing,
    CASE WHEN tensors THEN blame_rel(n_norm, b_norm, norm_scale) END AS e_norm,
    CASE WHEN tensors THEN blame_rel(n_mean, b_mean, norm_scale / sqrt(numel)) END AS e_mean,
    CASE WHEN tensors THEN blame_rel(n_max, b_max, extreme_scale) END AS e_max,
    CASE WHEN tensors THEN blame_rel(n_min, b_min, extreme_scale) END AS e_min
  FROM scales
),
stat AS (
  SELECT parts.*,
    CASE WHEN stat_missing OR NOT tensors THEN NULL
         ELSE greatest(e_norm, e_mean, e_max, e_min) END AS stat_err
  FROM parts
),
part AS (
  -- which statistic set stat_err (the first of Norm, Mean, Max, Min on a tie): verdict reasons.
  -- The first whose error equals stat_err, their greatest: the same as the first that is >= the
  -- greatest of those after it, as the four are never NULL or NaN where stat_err is not NULL
  -- (blame_rel of two numbers: 0, 1, inf or |a-b| / a scale > 0); tested against stat_err, not
  -- with three more greatest() of them (~3.4 M instructions of a 96,623-row batch)
  SELECT stat.*,
    CASE WHEN stat_missing OR NOT tensors THEN NULL
         WHEN e_norm = stat_err THEN 'Norm'
         WHEN e_mean = stat_err THEN 'Mean'
         WHEN e_max = stat_err THEN 'Max'
         ELSE 'Min' END AS stat_part
  FROM stat
)
SELECT
  out_seq,
  CASE
    WHEN kind <> 'matched' THEN NULL
    WHEN NOT coalesce(tensors, false) THEN
      -- the values' texts equal: two numbers' texts are equal where the numbers are and
      -- their signs too (0.0 and -0.0, nan and -nan print apart), without printing them
      -- (~1,400 instructions a number); a text's, printed for the rows that have one
      CASE WHEN CASE WHEN n_max_str IS NULL AND b_max_str IS NULL
                     THEN n_max IS NOT DISTINCT FROM b_max
                          AND coalesce(signbit(n_max) = signbit(b_max), true)
                     ELSE coalesce(n_max_str, CAST(n_max AS VARCHAR))
                          IS NOT DISTINCT FROM coalesce(b_max_str, CAST(b_max AS VARCHAR)) END
             THEN 0.0
           WHEN n_num THEN blame_rel(n_max, b_max, greatest(blame_fin(n_max), blame_fin(b_max)))
           ELSE 1.0 END
    WHEN empty THEN 0.0
    WHEN (SELECT mode FROM settings) = 'md5' THEN
      CASE WHEN n_md5 IS NOT DISTINCT FROM b_md5 THEN 0.0 ELSE 1.0 END
    WHEN status = 'nanpos' THEN 'inf'::DOUBLE
    WHEN sq_diff IS NOT NULL THEN
      CASE WHEN sq_diff = 0 THEN 0.0
           WHEN greatest(npu_sq, bench_sq) = 0 THEN 1.0
           ELSE sqrt(sq_diff) / sqrt(greatest(npu_sq, bench_sq)) END
    ELSE stat_err
  END AS err,
  CASE
    WHEN kind <> 'matched' THEN 'unmatched'
    WHEN NOT coalesce(tensors, false) THEN 'value'
    WHEN empty THEN 'empty'
    WHEN (SELECT mode FROM settings) = 'md5' THEN 'md5'
    WHEN status = 'nanpos' THEN 'inf/nan positions differ'
    WHEN sq_diff IS NOT NULL THEN 'relative L2'
    WHEN stat_err IS NULL THEN 'not comparable'
    WHEN stat_err = 'inf'::DOUBLE THEN 'inf/nan on one side'
    ELSE 'statistics'
  END AS err_kind,
  -- statistics mode: the statistic that set err ('Norm', 'Mean', 'Max' or 'Min'), else NULL
  CASE WHEN kind = 'matched' AND coalesce(tensors, false) AND NOT empty
            AND (SELECT mode FROM settings) = 'statistics' THEN stat_part END AS err_stat,
  -- What verdicts reads of the row (sql/compare/rules/default/verdicts.sql), carried here, where
  -- both sides' tensors rows are joined already: verdicts joined compare_rows and tensors twice
  -- again for them (bench/README, "Session 25: rows"). unmatched: kind <> 'matched' (a boolean:
  -- a text column costs more to store); the Max and Min statistics (its inf/nan rule and
  -- reasons); the texts of a value; the statistic that set err_stat on each side.
  kind <> 'matched' AS unmatched, n_dtype_raw, b_dtype_raw,
  n_max, n_min, b_max, b_min, n_max_str, b_max_str,
  CASE WHEN kind = 'matched' AND coalesce(tensors, false) AND NOT empty
            AND (SELECT mode FROM settings) = 'statistics' THEN CASE stat_part WHEN 'Norm' THEN n_norm WHEN 'Mean' THEN n_mean
    WHEN 'Max' THEN n_max WHEN 'Min' THEN n_min END END AS n_stat_val,
  CASE WHEN kind = 'matched' AND coalesce(tensors, false) AND NOT empty
            AND (SELECT mode FROM settings) = 'statistics' THEN CASE stat_part WHEN 'Norm' THEN b_norm WHEN 'Mean' THEN b_mean
    WHEN 'Max' THEN b_max WHEN 'Min' THEN b_min END END AS b_stat_val
FROM part
