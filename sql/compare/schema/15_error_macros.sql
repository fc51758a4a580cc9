-- The per-row error figure (sql/rules/row_error.sql) and blame (docs/blame.md).
-- |x| of a finite number, else 0: scales are taken over finite values only.
CREATE OR REPLACE MACRO blame_fin(x) AS (CASE WHEN isfinite(x) THEN abs(x) ELSE 0.0 END);
-- The relative difference of one statistic: 0 when equal (a shared inf or NaN included), +inf
-- when one side is not finite and the other differs, |a-b| / scale, or 1 when the scale is 0.
CREATE OR REPLACE MACRO blame_rel(a, b, scale) AS (
  CASE WHEN a IS NOT DISTINCT FROM b THEN 0.0
       WHEN NOT (isfinite(a) AND isfinite(b)) THEN 'inf'::DOUBLE
       WHEN scale > 0 THEN abs(a - b) / scale
       ELSE 1.0 END);
