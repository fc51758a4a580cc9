-- Cell -> typed history columns (used by the sql/history/record views in the compare's connection).
-- The number of a cell: numbers and booleans as DOUBLE, "nan"/"inf"/"-inf" texts as NaN/inf.
-- (What finite_or_text(cell_text(c), cell_num(c)) gives, without printing every number as text
-- first: that cost a second per 100,000 statistics rows. Any NaN is stored as the one 'nan'.)
CREATE OR REPLACE MACRO hist_num(c) AS (
  CASE union_tag(c)
    WHEN 'n' THEN CASE WHEN isnan(union_extract(c, 'n')) THEN 'nan'::DOUBLE
                       ELSE union_extract(c, 'n') END
    WHEN 'b' THEN CAST(union_extract(c, 'b') AS DOUBLE)
    WHEN 's' THEN CASE replace(union_extract(c, 's'), chr(9), '')
                    WHEN 'inf' THEN 'inf'::DOUBLE WHEN '-inf' THEN '-inf'::DOUBLE
                    WHEN 'nan' THEN 'nan'::DOUBLE END
  END);
-- The text of a cell that is text (msprobe's trailing TAB after nan/inf dropped); NULL for numbers.
CREATE OR REPLACE MACRO hist_text(c) AS (
  CASE WHEN union_tag(c) = 's' THEN replace(union_extract(c, 's'), chr(9), '') END);
-- A statistics relative error "12.5%" -> 12.5; "N/A" and " " -> NULL. (The number of
-- rtrim(t, '%'): a text with one '%' at its end loses that character by substr, which takes half
-- rtrim's time; rtrim was most of the cost of these four columns.)
CREATE OR REPLACE MACRO hist_pct(t) AS (TRY_CAST(
  CASE WHEN ends_with(t, '%') AND NOT ends_with(t, '%%') THEN substr(t, 1, length(t) - 1)
       ELSE rtrim(t, '%') END AS DOUBLE));
CREATE OR REPLACE MACRO hist_pct_text(t) AS (CASE WHEN hist_pct(t) IS NULL THEN t END);
-- Severity of a row, for trends and regressions: 0 pass, 1 yellow, 2 red or failing.
CREATE OR REPLACE MACRO hist_severity(mark, failing, verdict) AS (
  CASE WHEN mark = 'red' OR failing THEN 2 WHEN mark = 'yellow' THEN 1
       WHEN verdict = 'pass' THEN 0 END);
