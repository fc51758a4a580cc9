-- description: The md5-mode workbook (spec §4.2, §5.4): CRC32 of each side and pass / Different.
SELECT
  out_seq,
  kind,
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE npu_name END AS "NPU Name",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE bench_name END AS "Bench Name",
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE coalesce(npu_dtype, 'None') END AS "NPU Dtype",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE coalesce(bench_dtype, 'None') END AS "Bench Dtype",
  CASE WHEN kind = 'bench_only' THEN 'N/A' ELSE coalesce(npu_shape, 'None') END AS "NPU Tensor Shape",
  CASE WHEN kind = 'npu_only' THEN 'N/A' ELSE coalesce(bench_shape, 'None') END AS "Bench Tensor Shape",
  CASE WHEN kind = 'matched' THEN coalesce(npu_md5, 'None') ELSE 'N/A' END AS "NPU MD5",
  CASE WHEN kind = 'matched' THEN coalesce(bench_md5, 'None') ELSE 'N/A' END AS "BENCH MD5",
  CASE WHEN kind <> 'matched' THEN 'N/A'
       WHEN npu_md5 IS NOT DISTINCT FROM bench_md5 THEN 'pass' ELSE 'Different' END AS "Result",
  stack AS "NPU_Stack_Info"
FROM rows_joined
