-- description: What the highlight rules read from each output row (spec §5.5.2), for the current mode; NULL = not a number.
WITH s AS (SELECT mode FROM settings),
stat AS (
  SELECT out_seq,
         cell_text("NPU max") AS npu_max_text, cell_text("NPU min") AS npu_min_text,
         cell_num("NPU max") AS npu_max, cell_num("Bench max") AS bench_max,
         cell_num("Max diff") AS max_diff,
         NULL::DOUBLE AS ratio, NULL::DOUBLE AS cosine
  FROM result_statistics
  WHERE (SELECT mode FROM s) = 'statistics'
),
tens AS (
  SELECT out_seq,
         -- in real-data mode msprobe keeps non-finite stats as numbers: "inf" still reads as inf
         replace(cell_text("NPU max"), chr(9), '') AS npu_max_text,
         replace(cell_text("NPU min"), chr(9), '') AS npu_min_text,
         finite_or_text(cell_text("NPU max"), cell_num("NPU max")) AS npu_max,
         finite_or_text(cell_text("Bench max"), cell_num("Bench max")) AS bench_max,
         _max_abs_err AS max_diff, _one_thousandth AS ratio, _cosine AS cosine
  FROM result_tensor
  WHERE (SELECT mode FROM s) = 'tensor'
)
SELECT * FROM stat UNION ALL SELECT * FROM tens
