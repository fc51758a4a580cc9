-- description: The worst rows of the report under each highlight rule and colour (and under the advisor's failing test), with the rule: at most 5 per rule over all compares, worst error first.
WITH fired AS (
  SELECT r.compare_id, r.ord, r.out_seq, r.row_name, r.err, r.mark,
         trim(unnest(string_split(r.mark_rules, ','))) AS rule
  FROM report_rows r
  WHERE r.mark_rules IS NOT NULL
  UNION ALL
  SELECT compare_id, ord, out_seq, row_name, err, NULL AS mark, 'advisor: ' || result AS rule
  FROM report_rows
  WHERE failing
),
ranked AS (
  SELECT *,
         -- NaN sorts above every number: an overflow is the worst error
         row_number() OVER (PARTITION BY mark, rule ORDER BY err DESC NULLS LAST, ord, out_seq) AS k,
         count(*) OVER (PARTITION BY mark, rule) AS n_rule
  FROM fired
)
SELECT rule, mark, n_rule, k, compare_id, out_seq, row_name, err
FROM ranked
WHERE k <= 5
ORDER BY CASE mark WHEN 'red' THEN 0 WHEN 'yellow' THEN 2 ELSE 1 END, n_rule DESC, rule, k
