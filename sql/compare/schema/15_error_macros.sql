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
-- The error a dtype's rounding alone explains: torch.testing.assert_close's default relative
-- tolerance for it (0 for integers, booleans and anything not floating point).
CREATE OR REPLACE MACRO blame_dtype_floor(d) AS (
  CASE WHEN d IN ('torch.bfloat16', 'BFloat16', 'bfloat16') THEN 1.6e-2
       WHEN d IN ('torch.float16', 'Float16', 'float16', 'torch.half') THEN 1e-3
       WHEN d IN ('torch.float32', 'Float32', 'float32', 'torch.float', 'torch.complex64',
                  'Complex64', 'complex64') THEN 1.3e-6
       WHEN d IN ('torch.float64', 'Float64', 'float64', 'torch.double', 'torch.complex128',
                  'Complex128', 'complex128') THEN 1e-7
       WHEN d LIKE '%float8%' OR d LIKE '%Float8%' THEN 1.25e-1
       ELSE 0.0 END);
-- blame_dtype_floor of a row's dtype with the commonest dtypes first, each as its constant
-- (a dtype that is none of them goes through blame_dtype_floor's lists: ~4x the CPU). The
-- constants are blame_dtype_floor's own (tests/sql/test_blame_floor.py holds them equal):
-- written as blame_dtype_floor('torch.float32') etc., each use of this macro planned (folded)
-- five copies of blame_dtype_floor's lists, ~7 M instructions a use
CREATE OR REPLACE MACRO blame_row_floor(d) AS (
  CASE WHEN d IS NULL THEN 0.0
       WHEN d = 'torch.float32' THEN 1.3e-6
       WHEN d = '<class ''int''>' THEN 0.0
       WHEN d = 'torch.float16' THEN 1e-3
       WHEN d = 'torch.bfloat16' THEN 1.6e-2
       ELSE blame_dtype_floor(d) END);
