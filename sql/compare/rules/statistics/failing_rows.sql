-- description: Rows the advisor counts as failing in statistics mode: Result = Warning (spec §6).
SELECT out_seq, "NPU Name" AS name FROM result_statistics WHERE "Result" = 'Warning'
