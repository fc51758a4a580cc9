-- kind: mark
-- description: Red and yellow rows (spec §5.5): overflow and huge-difference rows are red; within each highlight window an output row is weighed against every input row.
WITH v AS (
  SELECT h.*, w.win, w.is_input,
         h.npu_max IS NOT NULL AND h.bench_max IS NOT NULL AND h.max_diff IS NOT NULL AS usable
  FROM hl_values h JOIN hl_windows w USING (out_seq)
),
red1 AS (
  SELECT out_seq, 'overflow' AS rule FROM v
  WHERE npu_max_text IN ('nan', 'inf', '-inf', 'nan' || chr(9), 'inf' || chr(9), '-inf' || chr(9))
     OR npu_min_text IN ('nan', 'inf', '-inf', 'nan' || chr(9), 'inf' || chr(9), '-inf' || chr(9))
     OR (max_diff IS NOT NULL AND NOT isnan(max_diff) AND max_diff > 1e10)
),
pairs AS (
  SELECT o.out_seq, o.max_diff AS o_md, o.bench_max AS o_bm, o.ratio AS o_r, o.cosine AS o_c,
         i.max_diff AS i_md, i.bench_max AS i_bm, i.ratio AS i_r, i.cosine AS i_c
  FROM v o JOIN v i ON i.win = o.win AND i.is_input AND NOT o.is_input
  WHERE o.usable AND i.usable AND o.out_seq NOT IN (SELECT out_seq FROM red1)
),
judged AS (
  SELECT out_seq,
    (SELECT mode FROM settings) = 'statistics'
      AND abs(o_md / greatest(0.01, o_bm)) > 0.5 AS red_rel,
    (NOT isnan(i_md) AND NOT isnan(o_md) AND abs(i_md) <= abs(o_md)
      AND (CASE WHEN abs(o_md) < 1 THEN 0 ELSE log10(abs(o_md)) END)
        - (CASE WHEN abs(i_md) < 1 THEN 0 ELSE log10(abs(i_md)) END) >= 1) AS yellow_mag,
    coalesce(i_r > 0.9 AND o_r < 0.6 AND NOT isnan(i_r) AND NOT isnan(o_r), false) AS red_ratio,
    coalesce(i_r - o_r > 0.1 AND NOT isnan(i_r) AND NOT isnan(o_r), false) AS yellow_ratio,
    coalesce(i_c - o_c > 0.1 AND NOT isnan(i_c) AND NOT isnan(o_c), false) AS yellow_cos,
    (SELECT mode FROM settings) = 'statistics'
      AND abs(o_md / greatest(0.01, o_bm)) > 0.1
      AND abs(i_md / greatest(0.01, i_bm)) < 0.01 AS yellow_rel
  FROM pairs
),
red AS (
  SELECT out_seq, rule FROM red1
  UNION ALL SELECT out_seq, 'max relative error' FROM judged WHERE red_rel
  UNION ALL SELECT out_seq, 'one-thousandth ratio' FROM judged WHERE red_ratio
),
yellow AS (
  SELECT out_seq, 'order of magnitude' AS rule FROM judged WHERE yellow_mag
  UNION ALL SELECT out_seq, 'one-thousandth ratio' FROM judged WHERE yellow_ratio
  UNION ALL SELECT out_seq, 'cosine' FROM judged WHERE yellow_cos
  UNION ALL SELECT out_seq, 'max relative error' FROM judged WHERE yellow_rel
)
SELECT out_seq, 'red' AS mark, string_agg(DISTINCT rule, ', ' ORDER BY rule) AS rules
FROM red GROUP BY out_seq
UNION ALL
SELECT out_seq, 'yellow', string_agg(DISTINCT rule, ', ' ORDER BY rule)
FROM yellow WHERE out_seq NOT IN (SELECT out_seq FROM red) GROUP BY out_seq
