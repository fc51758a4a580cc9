-- description: Each output row with the cells every mode shows alike but its statistics: names, dtypes and shapes (N/A on the missing side, None for a null value), spec §5.4.
-- statistics mode's stat_rows reads this, not display_rows: it makes its statistics' cells as
-- plain columns of its own, and display_rows' eight shown_stat cells (each a CASE of unions
-- holding two more macros) were bound and optimised for every compare only to be dropped,
-- ~25 M instructions of each statistics batch's and compare's planning (bench/README,
-- "Session 29: rows").
SELECT
  j.*,
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE npu_name END AS "NPU Name",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE bench_name END AS "Bench Name",
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE coalesce(npu_dtype, 'None') END AS "NPU Dtype",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE coalesce(bench_dtype, 'None') END AS "Bench Dtype",
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE coalesce(npu_shape, 'None') END AS "NPU Tensor Shape",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE coalesce(bench_shape, 'None') END AS "Bench Tensor Shape"
FROM rows_joined j
