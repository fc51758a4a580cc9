-- description: One row per op with rows: its match key (the ordered row names; without call counts under -f) and input/output counts.
SELECT
  side,
  op_seq,
  -- one key, renamed only under -f: the fuzzy regular expression over every row cost more than the rest
  string_agg(CASE WHEN (SELECT fuzzy FROM settings) THEN fuzzy_rename(match_name) ELSE match_name END,
             chr(31) ORDER BY row_in_op) AS match_key,
  count(*) FILTER (WHERE io = 'input') AS n_in,
  count(*) FILTER (WHERE io = 'output') AS n_out,
  count(*) AS n_rows,
  pair  -- the op's pair of dumps (ops.pair): keys are matched within a pair
FROM tensors
GROUP BY side, op_seq, pair
