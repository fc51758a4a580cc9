-- description: The advisor's suspect (spec §6): the first failing row in table order and the advice for it; one row, Line NA when every row passes.
WITH first_row AS (
  SELECT out_seq, name FROM failing_rows ORDER BY out_seq LIMIT 1
),
deterministic AS (
  SELECT regexp_matches(name, 'conv2d|conv3d|matmul|nll_loss|layer_norm|lstm') AS hit, name, out_seq
  FROM first_row
)
SELECT
  CAST(out_seq AS VARCHAR) AS line,
  name AS suspect,
  CASE
    WHEN contains(name, 'forward') AND contains(name, 'input') THEN
      '1. Analyze the model to view the input source.' || chr(10)
      || '2. Check whether an inplace API causes the output result to overwrite the input result. That is, the fault is actually caused by a computation error.' || chr(10)
      || '3. The fault may be caused by memory corruption and further analysis is required.'
    WHEN contains(name, 'forward') AND hit THEN
      'This torch api may be uncertainty in the calculation, can seed_all(mode=True) to enable deterministic computing.'
    WHEN contains(name, 'forward') THEN
      'This is a forward API computation error. Check the computation implementation.'
    WHEN contains(name, 'input') THEN 'Check whether the forward computation result is affected.'
    WHEN hit THEN
      'This torch api may be uncertainty in the calculation, can seed_all(mode=True) to enable deterministic computing.'
    ELSE 'This is a backward API computation error. Check the computation implementation.'
  END AS advice
FROM deterministic
UNION ALL
SELECT 'NA', 'NA', 'All data in comparison result meets the accuracy requirements.'
WHERE NOT EXISTS (SELECT 1 FROM first_row)
