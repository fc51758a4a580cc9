-- description: One row per op with rows: its ordered row names (exact key), fuzzy key and input/output counts.
SELECT
  side,
  op_seq,
  string_agg(match_name, chr(31) ORDER BY row_in_op) AS names_key,
  string_agg(fuzzy_rename(match_name), chr(31) ORDER BY row_in_op) AS fuzzy_key,
  count(*) FILTER (WHERE io = 'input') AS n_in,
  count(*) FILTER (WHERE io = 'output') AS n_out,
  count(*) AS n_rows
FROM tensors
GROUP BY side, op_seq
