-- A workbook cell: a number, a text or a boolean, exactly as msprobe writes it.
CREATE TYPE IF NOT EXISTS cell AS UNION(n DOUBLE, s VARCHAR, b BOOLEAN);
-- A batch's tensors rows store their few-valued texts as these (msq.pipeline.CODED_ROWS): an
-- ENUM is appended as a byte, a text with its statistics and UTF-8 check (~190 instructions).
CREATE TYPE IF NOT EXISTS row_side AS ENUM ('npu', 'bench');
CREATE TYPE IF NOT EXISTS row_io AS ENUM ('input', 'output');
CREATE TYPE IF NOT EXISTS stat_kind AS ENUM ('n', 'b', 'i', 'f', 's');
