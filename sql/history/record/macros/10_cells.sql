-- Cell -> typed history columns (used by the sql/history/record views in the compare's connection).
-- The number of a cell: numbers and booleans as DOUBLE, "nan"/"inf"/"-inf" texts as NaN/inf.
-- (What finite_or_text(cell_text(c), cell_num(c)) gives, without printing every number as text
-- first: that cost a second per 100,000 statistics rows. Any NaN is stored as the one 'nan'.)
-- union_extract(c, tag) is NULL unless c holds that tag, so the first member that is not NULL is
-- the cell's own: one coalesce, not a CASE on union_tag (whose enum tests cost ~0.05 s CPU of a
-- 100k-row statistics record, twelve cells).
CREATE OR REPLACE MACRO hist_num(c) AS (coalesce(
  CASE WHEN isnan(union_extract(c, 'n')) THEN 'nan'::DOUBLE ELSE union_extract(c, 'n') END,
  CAST(union_extract(c, 'b') AS DOUBLE),
  CASE replace(union_extract(c, 's'), chr(9), '')
    WHEN 'inf' THEN 'inf'::DOUBLE WHEN '-inf' THEN '-inf'::DOUBLE WHEN 'nan' THEN 'nan'::DOUBLE END));
-- The text of a cell that is text (msprobe's trailing TAB after nan/inf dropped); NULL for numbers.
CREATE OR REPLACE MACRO hist_text(c) AS (replace(union_extract(c, 's'), chr(9), ''));
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
-- Statistics mode: the number of a cell that shown_stat or shown_diff made, from its plain
-- columns (stat_result's: n the number, b the boolean, NULL for a difference), given its text
-- t = hist_plain_text of its text column (computed once for both columns: replace() over every
-- row was a third of the typed columns): what hist_num gives of the cell (its number member is
-- always finite, so hist_num's NaN test is not needed).
CREATE OR REPLACE MACRO hist_plain_num(n, b, t) AS (coalesce(
  n, CAST(b AS DOUBLE),
  CASE t WHEN 'inf' THEN 'inf'::DOUBLE WHEN '-inf' THEN '-inf'::DOUBLE WHEN 'nan' THEN 'nan'::DOUBLE END));
-- Statistics mode: the text of a cell's text column (hist_text of the cell).
CREATE OR REPLACE MACRO hist_plain_text(t) AS (replace(t, chr(9), ''));
-- Statistics mode: hist_plain_text of a cell's text column on a row that has a cell's text
-- (has: has_cell_text, any of its twelve text columns not NULL), NULL without reading it on the
-- others (~94 % of rows), whose text columns are all NULL.
CREATE OR REPLACE MACRO hist_row_text(has, t) AS (CASE WHEN has THEN hist_plain_text(t) END);
-- Statistics mode: a relative error as hist_pct/hist_pct_text read shown_rel's text, from the two
-- statistics it is computed from (n, b: each side's <stat>_num, joined by
-- hist_source_statistics_cells.sql), not from the text: parsing 24,500 rows' four texts back was
-- ~130 M instructions of a pair's history rows. Case by case as stat_rel
-- (sql/compare/schema/10_macros.sql): 'N/A' unmatched; ' ' when a side is not a number
-- (is_num(kind): the readers give a <stat>_num exactly for kinds i, f and b, so a NULL number is
-- that test); 'N/A' when b = 0; '0.0%' (0.0, what the formula gives too when n = b) or
-- py_float(x) || '%', whose number is x (DuckDB prints a double's shortest text that reads back as
-- the same double), any NaN as the one 'nan' (its text is 'nan').
CREATE OR REPLACE MACRO hist_nan(x) AS (CASE WHEN isnan(x) THEN 'nan'::DOUBLE ELSE x END);
CREATE OR REPLACE MACRO hist_rel_pct(matched, n, b) AS (
  CASE WHEN matched AND b <> 0 THEN hist_nan(abs(((n - b) / b) * 100)) END);
CREATE OR REPLACE MACRO hist_rel_pct_text(matched, n, b) AS (
  CASE WHEN NOT matched THEN 'N/A' WHEN n IS NULL OR b IS NULL THEN ' ' WHEN b = 0 THEN 'N/A' END);
-- Statistics mode, the default mode's rows (stat_result): hist_rel_pct and hist_rel_pct_text of a
-- relative error from the number stat_rows made of it (x: <stat>_rel_pct, the same statistics'
-- numbers by the same cases: -1 'N/A', unmatched or b = 0; -2 ' ', a side not a number; -3
-- '0.0%', both equal and finite, whose number is 0.0; else abs(((n - b) / b) * 100), never
-- negative, NaN included, which DuckDB orders above every number), not from the two statistics
-- again: their joins (each side's tensors row) and the formula were ~26 M instructions a
-- 24,500-row pair. hist_code_pct tests x >= 0 (a number, NaN too) first, then -3 on the few rows
-- left: DuckDB's CASE runs each WHEN over the rows the WHENs before left, so x = -3 first compared
-- every row (~7 M instructions a 6-pair root batch; bench/README, "Session 27: hand").
CREATE OR REPLACE MACRO hist_code_pct(x) AS (
  CASE WHEN x >= 0 THEN hist_nan(x) WHEN x = -3 THEN 0.0::DOUBLE END);
CREATE OR REPLACE MACRO hist_code_pct_text(x) AS (CASE x WHEN -1 THEN 'N/A' WHEN -2 THEN ' ' END);
-- result_data's lists of other modes' columns (schema version 7): NULL when every member is
CREATE OR REPLACE MACRO hist_metrics(a, b, c, d, e) AS (
  CASE WHEN coalesce(a, b, c, d, e) IS NULL THEN NULL ELSE [a, b, c, d, e]::DOUBLE[] END);
CREATE OR REPLACE MACRO hist_mode_texts(npu_md5, bench_md5, npu_stack, data_name) AS (
  CASE WHEN coalesce(npu_md5, bench_md5, npu_stack, data_name) IS NULL THEN NULL
       ELSE [npu_md5, bench_md5, npu_stack, data_name]::VARCHAR[] END);
