"""Outputs of a compare, written from its views (``result_<mode>``, ``marks``, ``advisor_finding``).

* :mod:`msq.export.outputs` — the formats (``WRITERS``: xlsx, csv, parquet), the workbook's
  columns per mode, the advisor file;
* :mod:`msq.export.xlsx` — msq's own streaming xlsx writer (rows rendered inside DuckDB).

A new output format is a module here and one line in ``outputs.WRITERS``.
"""
