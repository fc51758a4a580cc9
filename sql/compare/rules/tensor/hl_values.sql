-- description: What the highlight rules read from each output row (spec §5.5.2), real-data mode; NULL = not a number.
SELECT out_seq,
       -- in real-data mode msprobe keeps non-finite stats as numbers: "inf" still reads as inf
       replace(cell_text("NPU max"), chr(9), '') AS npu_max_text,
       replace(cell_text("NPU min"), chr(9), '') AS npu_min_text,
       finite_or_text(cell_text("NPU max"), cell_num("NPU max")) AS npu_max,
       finite_or_text(cell_text("Bench max"), cell_num("Bench max")) AS bench_max,
       _max_abs_err AS max_diff, _one_thousandth AS ratio, _cosine AS cosine
FROM result_tensor
