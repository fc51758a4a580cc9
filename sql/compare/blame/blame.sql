-- description: Blame of this compare (the history's view blame over one compare): blame_rows with blame_rank, 1 for its most severe local source. A collective's output that its rank's inputs do not explain stays inherited here; the history's view blame weighs the other ranks.
-- the rank is numbered over the local rows alone (a reader of the local rows sorts only them)
WITH ranked AS (
  SELECT out_seq, row_number() OVER (ORDER BY output_err DESC, op_seq, out_seq) AS blame_rank
  FROM blame_rows WHERE verdict = 'local'
)
-- (blame_rows' ENUMs, sql/compare/schema/40_blame.sql, as the texts they are: what the view's
-- readers, its files and reports get)
SELECT b.* REPLACE (io::VARCHAR AS io, role::VARCHAR AS role, direction::VARCHAR AS direction,
                    verdict::VARCHAR AS verdict, link::VARCHAR AS link),
       r.blame_rank
FROM blame_rows b LEFT JOIN ranked r USING (out_seq)
