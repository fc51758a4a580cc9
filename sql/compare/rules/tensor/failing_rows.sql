-- description: Rows the advisor counts as failing in real-data mode: Accuracy Reached or Not = No (spec §6).
SELECT out_seq, "NPU Name" AS name FROM result_tensor WHERE "Accuracy Reached or Not" = 'No'
