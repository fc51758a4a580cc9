-- description: The first divergent row of each compare in the report (a red row, or the advisor's failing test), as the history's first_divergence view defines it.
SELECT compare_id, out_seq, row_name, op_name, mark, result,
       CASE WHEN mark = 'red' THEN 'red: ' || mark_rules ELSE 'verdict: ' || result END AS reason
FROM report_rows
WHERE mark = 'red' OR failing
QUALIFY row_number() OVER (PARTITION BY compare_id ORDER BY out_seq) = 1
ORDER BY compare_id
