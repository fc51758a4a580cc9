-- description: The dump.json entry (op) of each output row: the NPU op, or the bench op of a bench-only row.
-- One tensors row a row (its NPU row where it has one, else its bench row) and its op: the two
-- sides' rows and ops joined for every row, and the NPU op's name taken where there was one, were
-- ~5 M instructions more a 24,500-row pair (the statistics' numbers of --compat's relative errors
-- are hist_source_statistics_cells.sql's own).
SELECT r.out_seq, o.op_name
FROM compare_rows r
LEFT JOIN tensors t ON t.side = CASE WHEN r.npu_row IS NULL THEN 'bench' ELSE 'npu' END
                   AND t.row_seq = coalesce(r.npu_row, r.bench_row)
LEFT JOIN ops o ON o.side = t.side AND o.op_seq = t.op_seq
