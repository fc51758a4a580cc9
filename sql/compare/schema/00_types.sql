-- A workbook cell: a number, a text or a boolean, exactly as msprobe writes it.
CREATE TYPE IF NOT EXISTS cell AS UNION(n DOUBLE, s VARCHAR, b BOOLEAN);
