-- description: What the highlight rules read from each output row (spec §5.5.2), statistics mode; NULL = not a number.
SELECT out_seq,
       cell_text("NPU max") AS npu_max_text, cell_text("NPU min") AS npu_min_text,
       cell_num("NPU max") AS npu_max, cell_num("Bench max") AS bench_max,
       cell_num("Max diff") AS max_diff,
       NULL::DOUBLE AS ratio, NULL::DOUBLE AS cosine
FROM result_statistics
