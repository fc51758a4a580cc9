-- description: The names of each output row as hist_rows_<mode> gives them (the same in every mode), alone: what the recorder keys into the history's names (read inline by the recorder).
SELECT
  out_seq, op_name,
  CASE WHEN kind <> 'bench_only' THEN "NPU Name" END AS npu_name,
  CASE WHEN kind <> 'npu_only' THEN "Bench Name" END AS bench_name
FROM hist_result
