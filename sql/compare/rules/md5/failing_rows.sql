-- description: Rows the advisor counts as failing in md5 mode: Result = Different (spec §6).
SELECT out_seq, "NPU Name" AS name FROM result_md5 WHERE "Result" = 'Different'
