-- description: The compare's dataflow edges as the history keeps them: rows by out_seq (inserted into blame_edges by name).
-- each edge's rows by their first output line; only the rows an edge names are looked up (the
-- output lines of every row, grouped, twice over, were most of this query)
WITH seqs AS (
  SELECT 'npu' AS side, npu_row AS row_seq, min(out_seq) AS out_seq
  FROM compare_rows
  WHERE npu_row IN (SELECT consumer_row FROM blame_edges WHERE side = 'npu'
                    UNION ALL SELECT producer_row FROM blame_edges WHERE side = 'npu')
  GROUP BY ALL
  UNION ALL
  SELECT 'bench', bench_row, min(out_seq)
  FROM compare_rows
  WHERE bench_row IN (SELECT consumer_row FROM blame_edges WHERE side = 'bench'
                      UNION ALL SELECT producer_row FROM blame_edges WHERE side = 'bench')
  GROUP BY ALL
)
-- (how: blame_edges' ENUM blame_link, sql/compare/schema/40_blame.sql, as its text)
SELECT e.side, c.out_seq AS consumer_seq, p.out_seq AS producer_seq, e.how::VARCHAR AS how,
       e.candidates
FROM blame_edges e
LEFT JOIN seqs c ON c.side = e.side AND c.row_seq = e.consumer_row
LEFT JOIN seqs p ON p.side = e.side AND p.row_seq = e.producer_row
