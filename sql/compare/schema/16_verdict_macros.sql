-- The default mode's verdict rules (sql/compare/rules/default/verdicts.sql, docs/rules.md): thresholds on the
-- per-row error figure of row_error (relative to the tensor's scale, 0 = equal).
-- red: the row is off by at least a tenth of its scale.
CREATE OR REPLACE MACRO verdict_red_err() AS 0.1;
-- yellow: an output off by at least 1% of its scale ...
CREATE OR REPLACE MACRO verdict_yellow_err() AS 0.01;
-- ... and at least ten times as much as the worst input of its op: the error grows here.
CREATE OR REPLACE MACRO verdict_growth() AS 10.0;
-- A number in a reason text: three significant digits ("0.284", "1.5e-09", "inf").
CREATE OR REPLACE MACRO reason_num(x) AS (
  CASE WHEN x IS NULL THEN 'None' ELSE printf('%.3g', x) END);
-- An op's name from one of its row names: "Functional.relu.3.forward.input.0" ->
-- "Functional.relu.3.forward", "Module.fc2.Linear.backward.0.output.1" ->
-- "Module.fc2.Linear.backward.0" (the last direction field followed by input/output).
CREATE OR REPLACE MACRO row_op(name) AS (
  coalesce(nullif(regexp_extract(name, '^(.*\.(forward|backward)(\.[0-9]+)?)\.(input|output)', 1),
                  ''), name));
-- An op's API (its name without the call counter) and its call counter (NULL when it has none).
CREATE OR REPLACE MACRO op_api(op) AS (
  CASE WHEN regexp_matches(op, '\.[0-9]+\.(forward|backward)$')
         THEN regexp_replace(op, '\.[0-9]+\.(forward|backward)$', '.\1')
       WHEN regexp_matches(op, '\.(forward|backward)\.[0-9]+$')
         THEN regexp_replace(op, '\.[0-9]+$', '')
       ELSE op END);
CREATE OR REPLACE MACRO op_call(op) AS (
  CASE WHEN regexp_matches(op, '\.[0-9]+\.(forward|backward)$')
         THEN CAST(regexp_extract(op, '\.([0-9]+)\.(forward|backward)$', 1) AS INTEGER)
       WHEN regexp_matches(op, '\.(forward|backward)\.[0-9]+$')
         THEN CAST(regexp_extract(op, '\.([0-9]+)$', 1) AS INTEGER) END);
-- The parts of a verdict's reason (sql/compare/rules/default/verdicts.sql). Each is called
-- inside the CASE branch of the rows that need it, so only those rows print their numbers.
-- How the error was measured, with its figure: "scale-aware error 0.694".
CREATE OR REPLACE MACRO verdict_measure(err_kind, err) AS (
  CASE err_kind
    WHEN 'relative L2' THEN 'relative L2 error '
    WHEN 'value' THEN 'relative difference '
    ELSE 'scale-aware error ' END || reason_num(err));
-- What it was measured on: the two values, or the statistic that set it (NULL in tensor mode).
CREATE OR REPLACE MACRO verdict_detail(err_kind, err_stat, n_stat, b_stat, n_value, b_value) AS (
  CASE err_kind
    WHEN 'relative L2' THEN NULL
    WHEN 'value' THEN 'value ' || n_value || ' vs ' || b_value
    ELSE 'from ' || err_stat || ': NPU ' || reason_num(n_stat) || ', bench ' || reason_num(b_stat)
  END);
-- Max and Min where one side is inf/NaN and the other is not: "Max inf vs 3.2" ('' if neither).
CREATE OR REPLACE MACRO verdict_inf_stats(n_max, b_max, n_min, b_min) AS (
  concat_ws(', ',
    CASE WHEN n_max IS DISTINCT FROM b_max AND NOT (isfinite(n_max) AND isfinite(b_max))
         THEN 'Max ' || reason_num(n_max) || ' vs ' || reason_num(b_max) END,
    CASE WHEN n_min IS DISTINCT FROM b_min AND NOT (isfinite(n_min) AND isfinite(b_min))
         THEN 'Min ' || reason_num(n_min) || ' vs ' || reason_num(b_min) END));
