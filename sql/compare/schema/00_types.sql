-- A workbook cell: a number, a text or a boolean, exactly as msprobe writes it.
CREATE TYPE IF NOT EXISTS cell AS UNION(n DOUBLE, s VARCHAR, b BOOLEAN);
-- A batch's tensors rows store their few-valued texts as these (msq.pipeline.CODED_ROWS): an
-- ENUM is appended as a byte, a text with its statistics and UTF-8 check (~190 instructions).
CREATE TYPE IF NOT EXISTS row_side AS ENUM ('npu', 'bench');
CREATE TYPE IF NOT EXISTS row_io AS ENUM ('input', 'output');
CREATE TYPE IF NOT EXISTS stat_kind AS ENUM ('n', 'b', 'i', 'f', 's');
-- ... and its dtypes (msq.pipeline.CODED_DTYPE) where this holds every one of the batch's
-- (PyTorch's and the readers' own for arguments that are not tensors), else as texts.
CREATE TYPE IF NOT EXISTS row_dtype AS ENUM ('torch.float32', 'torch.float16', 'torch.bfloat16',
  'torch.float64', 'torch.int64', 'torch.int32', 'torch.int16', 'torch.int8', 'torch.uint8',
  'torch.bool', 'torch.complex64', 'torch.complex128', '<class ''int''>', '<class ''float''>',
  '<class ''bool''>', '<class ''str''>', '<class ''NoneType''>', 'torch.Size', 'slice');
-- A batch's history result rows (msq.pair_tables.CODED_HISTORY) hand the driver a row's kind and
-- verdict as these: DuckDB's Arrow export of an ENUM is its byte (a text: ~85 instructions a row),
-- and the driver keys a dictionary's few entries, not its rows' texts.
CREATE TYPE IF NOT EXISTS hist_kind AS ENUM ('matched', 'npu_only', 'bench_only');
CREATE TYPE IF NOT EXISTS hist_verdict AS ENUM ('pass', 'warning', 'unmatched');
