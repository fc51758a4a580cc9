-- description: The md5-mode workbook (spec §4.2, §5.4): CRC32 of each side and pass / Different, and the default mode's Reason (a dtype note, or why a row is unmatched).
SELECT
  out_seq,
  kind,
  "NPU Name",
  "Bench Name",
  "NPU Dtype",
  "Bench Dtype",
  "NPU Tensor Shape",
  "Bench Tensor Shape",
  CASE WHEN kind = 'matched' THEN coalesce(npu_md5, 'None') ELSE 'N/A' END AS "NPU MD5",
  CASE WHEN kind = 'matched' THEN coalesce(bench_md5, 'None') ELSE 'N/A' END AS "BENCH MD5",
  CASE WHEN kind <> 'matched' THEN 'N/A'
       WHEN npu_md5 IS NOT DISTINCT FROM bench_md5 THEN 'pass' ELSE 'Different' END AS "Result",
  stack AS "NPU_Stack_Info",
  coalesce(v.reason, '') AS "Reason"
FROM display_rows LEFT JOIN verdicts v USING (out_seq)
