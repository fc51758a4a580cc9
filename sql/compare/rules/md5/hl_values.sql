-- description: md5 mode has no highlighting (spec §5.5): no row feeds the colour rules.
SELECT out_seq, NULL::VARCHAR AS npu_max_text, NULL::VARCHAR AS npu_min_text,
       NULL::DOUBLE AS npu_max, NULL::DOUBLE AS bench_max, NULL::DOUBLE AS max_diff,
       NULL::DOUBLE AS ratio, NULL::DOUBLE AS cosine
FROM result_md5
WHERE false
