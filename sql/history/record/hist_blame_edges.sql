-- description: The compare's dataflow edges as the history keeps them: rows by out_seq (inserted into blame_edges by name).
WITH seqs AS (
  SELECT 'npu' AS side, npu_row AS row_seq, min(out_seq) AS out_seq
  FROM compare_rows WHERE npu_row IS NOT NULL GROUP BY ALL
  UNION ALL
  SELECT 'bench', bench_row, min(out_seq) FROM compare_rows WHERE bench_row IS NOT NULL GROUP BY ALL
)
SELECT e.side, c.out_seq AS consumer_seq, p.out_seq AS producer_seq, e.how, e.candidates
FROM blame_edges e
LEFT JOIN seqs c ON c.side = e.side AND c.row_seq = e.consumer_row
LEFT JOIN seqs p ON p.side = e.side AND p.row_seq = e.producer_row
