-- description: Blame of this compare (the history's view blame over one compare): blame_rows with blame_rank, 1 for its most severe local source. A collective's output that its rank's inputs do not explain stays inherited here; the history's view blame weighs the other ranks.
SELECT b.*,
  CASE WHEN verdict = 'local' THEN row_number() OVER (
         PARTITION BY verdict = 'local' ORDER BY output_err DESC, op_seq, out_seq) END
    AS blame_rank
FROM blame_rows b
