-- Settings of the compare being run (one row).
CREATE TABLE IF NOT EXISTS settings (
  mode VARCHAR,          -- statistics | md5 | tensor
  compat BOOLEAN,        -- reproduce msprobe 1.1.0 exactly
  fuzzy BOOLEAN,
  stack BOOLEAN,
  cross_framework BOOLEAN,
  api_mapping BOOLEAN,   -- -am given (built-in table, plus mappings rows of kind 'api_user')
  cell_mapping BOOLEAN   -- -cm given (Cell -> Module, plus mappings rows of kind 'cell')
);
-- One row per dump.json entry, in execution order.
CREATE TABLE IF NOT EXISTS ops (
  side VARCHAR, op_seq INTEGER, op_name VARCHAR,
  n_rows INTEGER,        -- flattened rows (tensors) of the entry
  -- lengths of the entry's input_args, input and output lists (-lm in compat mode counts them)
  n_input_args INTEGER, n_input INTEGER, n_output INTEGER,
  -- the readers' op_keys before any renaming: the rows' disp_name in order joined by chr(31),
  -- and the rows whose io is input / output (msq.pipeline.pair_rows reads them instead of a
  -- sorted string_agg over the rows, when no name is renamed for matching)
  row_key VARCHAR, n_in_rows INTEGER, n_out_rows INTEGER,
  -- the readers' key of its rows' structure: each row's dtype, shape and md5 in order, each as
  -- '-' (NULL) or its byte length, ':' and the text (msq.pipeline.op_pairs_select: two ops whose
  -- keys are equal have rows of equal structure, with no join of their rows)
  struct_key VARCHAR,
  -- which pair of dumps the op is of, when a pool worker compares several at once (from 0;
  -- op_seq and row_seq then run on across them): what relates ops and rows by name or order
  -- relates them within a pair only. A single compare has pair 0 alone.
  pair INTEGER DEFAULT 0
);
-- Stack text (Python repr of the frame list) per NPU op.
CREATE TABLE IF NOT EXISTS stacks (op_name VARCHAR, stack VARCHAR);
-- Mapping rows: data / api / cell / layer mappings (issue-specific loaders fill it).
CREATE TABLE IF NOT EXISTS mappings (
  kind VARCHAR, npu_key VARCHAR, bench_key VARCHAR, ord INTEGER
);
-- Paired ops in output order; bench_op NULL = NPU op without a match; npu_op NULL = bench-only op.
CREATE TABLE IF NOT EXISTS op_pairs (
  ord INTEGER, npu_op INTEGER, bench_op INTEGER, how VARCHAR
);
