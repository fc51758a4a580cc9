-- Cell constructors shared by the rule and report views.
-- A non-finite number is written as text with a trailing TAB, as msprobe does ("nan\t").
-- Cost: a CASE whose result is a cell (a union) copies every row's cell once per CASE level, so
-- the common case (a finite number) comes first and the constructors below nest no CASE on it:
-- the cells of a 100k-row statistics compare took a third less time so.
CREATE OR REPLACE MACRO num_cell(x) AS (
  CASE
    WHEN isfinite(x) THEN union_value(n := x)::cell
    WHEN x IS NULL THEN union_value(s := 'None')::cell
    WHEN isnan(x) THEN union_value(s := 'nan' || chr(9))::cell
    WHEN x = 'inf'::DOUBLE THEN union_value(s := 'inf' || chr(9))::cell
    ELSE union_value(s := '-inf' || chr(9))::cell
  END);
CREATE OR REPLACE MACRO text_cell(t) AS (
  CASE
    WHEN t IS NULL THEN union_value(s := 'None')::cell
    WHEN t IN ('inf', '-inf', 'nan') THEN union_value(s := t || chr(9))::cell
    ELSE union_value(s := t)::cell
  END);
-- The texts of a statistic that is neither a finite number nor a boolean: a number of kind f or
-- i that is NULL or not finite, as num_cell writes it; a string of kind s or o, as text_cell
-- writes it. Macros expand where they are used: stat_text and plain_stat_text hold the same
-- expressions as if written out, with their own tests of the kind around them.
CREATE OR REPLACE MACRO nonfinite_text(num) AS (
  CASE WHEN num IS NULL THEN 'None'
       WHEN isnan(num) THEN 'nan' || chr(9)
       WHEN num = 'inf'::DOUBLE THEN 'inf' || chr(9)
       ELSE '-inf' || chr(9) END);
CREATE OR REPLACE MACRO string_stat_text(txt) AS (
  CASE WHEN txt IS NULL THEN 'None'
       WHEN txt IN ('inf', '-inf', 'nan') THEN txt || chr(9)
       ELSE txt END);
-- The text of a statistic that is neither a finite number nor a boolean (shown_stat's): None, a
-- non-finite number, a string.
CREATE OR REPLACE MACRO stat_text(num, kind, txt) AS (
  CASE
    WHEN kind IN ('f', 'i') THEN nonfinite_text(num)
    WHEN kind IN ('s', 'o') THEN string_stat_text(txt)
    ELSE 'None' END);
-- A statistic as displayed: N/A when its side is absent (an unmatched row), else its cell: a
-- finite number, a boolean, or a text (None, a non-finite number as num_cell writes it, a string
-- as text_cell writes it). One CASE of cells whose texts come from one inner CASE of VARCHARs:
-- nested cell macros cost a union copy per level and rows, and DuckDB binds and optimises every
-- expanded level (a small compare's planning: stat_rows' binding halved).
CREATE OR REPLACE MACRO shown_stat(absent, num, kind, txt) AS (
  CASE
    WHEN absent THEN union_value(s := 'N/A')::cell
    WHEN kind IN ('f', 'i') AND isfinite(num) THEN union_value(n := num)::cell
    WHEN kind = 'b' THEN union_value(b := num = 1)::cell
    ELSE union_value(s := stat_text(num, kind, txt))::cell
  END);
-- stat_rows' plain columns of a statistic (stat_result's "<cell>", "<cell> (bool)", "<cell>
-- (text)"), as shown_stat decides: the finite number, else the boolean, else the text (N/A on
-- the absent side; NULL where the number or the boolean is the cell). fi and b are its kind's
-- tests, made once a row by stat_rows (fi: kind IN ('f', 'i'), b: kind = 'b'; fi from b and the
-- number, see there): each test of a VARCHAR kind is a string comparison of every row: the three
-- macros and the "both sides are numbers" tests made 48 a row, now 8 (a 4-pair batch's
-- stat_result, 96,623 rows: 1,405 -> 1,375 M instructions with 24, ~1,340 M with 8).
CREATE OR REPLACE MACRO plain_stat_num(absent, num, fi) AS (
  CASE WHEN NOT absent AND fi AND isfinite(num) THEN num END);
CREATE OR REPLACE MACRO plain_stat_bool(absent, num, b) AS (
  CASE WHEN NOT absent AND b THEN num = 1 END);
-- Whether plain_stat_bool gives a statistic a boolean (not NULL), without making it: its side is
-- present, its kind is b, and it has a number (true, or NULL where it gives none, which a CASE's
-- WHEN reads as false).
CREATE OR REPLACE MACRO plain_stat_has_bool(absent, num, b) AS (
  NOT absent AND b AND num IS NOT NULL);
-- plain_stat_text's last branches are stat_text's, its kind IN ('f', 'i') test the flag fi (a
-- nested stat_text made each of its eight uses bind and test the kind again).
-- tests/sql/test_stat_rows.py holds them to shown_stat's.
CREATE OR REPLACE MACRO plain_stat_text(num_v, absent, num, kind, txt, fi, b) AS (
  CASE WHEN num_v IS NOT NULL THEN NULL WHEN absent THEN 'N/A' WHEN b THEN NULL
       WHEN fi THEN nonfinite_text(num)
       WHEN kind IN ('s', 'o') THEN string_stat_text(txt)
       ELSE 'None' END);
-- Whether plain_stat_text gives a statistic a text (not NULL), from its number column, its side's
-- absence and its kind's boolean test, without making the text: its branches after the number's
-- and the boolean's never give NULL (nonfinite_text, string_stat_text, 'None'), so it is NULL
-- exactly where the number is or where the boolean branch is taken (b true on a present side).
-- tests/sql/test_stat_rows.py holds it to the texts.
CREATE OR REPLACE MACRO plain_stat_has_text(num_v, absent, b) AS (
  num_v IS NULL AND (absent IS TRUE OR b IS NOT TRUE));
-- A difference's text where it is not a finite number (shown_diff's): N/A unmatched, None where
-- a side is not a number, a non-finite difference as num_cell writes it.
CREATE OR REPLACE MACRO plain_diff_text(diff, matched, nums, d) AS (
  CASE WHEN diff IS NOT NULL THEN NULL WHEN NOT matched THEN 'N/A'
       WHEN NOT coalesce(nums, false) OR d IS NULL THEN 'None'
       WHEN isnan(d) THEN 'nan' || chr(9) WHEN d > 0 THEN 'inf' || chr(9)
       ELSE '-inf' || chr(9) END);
-- A cell from its plain columns (stat_rows' and stat_result's "<cell>", "<cell> (text)" and
-- "<cell> (bool)": the number, the text, the boolean, at most one of them not NULL): the cell
-- they were made from (all three NULL: the boolean member NULL, as shown_stat makes it of a
-- boolean statistic without a number).
CREATE OR REPLACE MACRO plain_cell(n, s, b) AS (
  CASE WHEN n IS NOT NULL THEN union_value(n := n)::cell
       WHEN s IS NOT NULL THEN union_value(s := s)::cell
       ELSE union_value(b := b)::cell END);
-- Python's repr() of a float; DuckDB prints the same shortest round-trip text except for -nan.
CREATE OR REPLACE MACRO py_float(x) AS (CASE WHEN isnan(x) THEN 'nan' ELSE CAST(x AS VARCHAR) END);
-- Numbers, as msprobe's highlight rules see them: ints, floats and booleans.
CREATE OR REPLACE MACRO cell_num(c) AS (
  CASE union_tag(c) WHEN 'n' THEN union_extract(c, 'n')
                    WHEN 'b' THEN CAST(union_extract(c, 'b') AS DOUBLE) END);
CREATE OR REPLACE MACRO cell_text(c) AS (
  CASE union_tag(c) WHEN 's' THEN union_extract(c, 's')
                    WHEN 'b' THEN CASE WHEN union_extract(c, 'b') THEN 'True' ELSE 'False' END
                    ELSE py_float(union_extract(c, 'n')) END);
CREATE OR REPLACE MACRO is_num(kind) AS (kind IN ('i', 'f', 'b'));
-- Float dtype pairs that still match (spec §3.2); float32 <-> bfloat16 is not among them.
CREATE OR REPLACE MACRO dtype_tolerated(a, b) AS (
  (a, b) IN (('torch.float16', 'torch.float32'), ('torch.float32', 'torch.float16'),
             ('torch.float16', 'torch.bfloat16'), ('torch.bfloat16', 'torch.float16'),
             ('Float16', 'Float32'), ('Float32', 'Float16'),
             ('Float16', 'BFloat16'), ('BFloat16', 'Float16')));
-- The default mode's float tolerance: two float dtypes that differ only in precision (bf16, fp16,
-- fp32, fp64, either side; MindSpore names too) match, and their values are compared.
CREATE OR REPLACE MACRO is_float_dtype(d) AS (
  d IN ('torch.float16', 'torch.bfloat16', 'torch.float32', 'torch.float64',
        'Float16', 'BFloat16', 'Float32', 'Float64'));
CREATE OR REPLACE MACRO float_precision_pair(a, b) AS (
  a <> b AND is_float_dtype(a) AND is_float_dtype(b));
-- Two dtypes that still match: exactly, or 1.1.0's tolerated pairs (compat), or any two floats.
CREATE OR REPLACE MACRO dtype_compatible(a, b, compat) AS (
  a IS NOT DISTINCT FROM b
  OR CASE WHEN compat THEN dtype_tolerated(a, b) ELSE float_precision_pair(a, b) END);
-- Statistics mode (spec §4.1): a difference as displayed: N/A on an unmatched row, None where a
-- side is not a number, the finite difference, else its non-finite text as num_cell writes it
-- (one CASE of cells over one CASE of texts, as shown_stat).
CREATE OR REPLACE MACRO shown_diff(matched, n, nk, b, bk) AS (
  CASE WHEN NOT matched THEN union_value(s := 'N/A')::cell
       WHEN is_num(nk) AND is_num(bk) AND isfinite(n - b) THEN union_value(n := n - b)::cell
       ELSE union_value(s := CASE WHEN NOT coalesce(is_num(nk) AND is_num(bk), false) THEN 'None'
                                  WHEN n - b IS NULL THEN 'None'
                                  WHEN isnan(n - b) THEN 'nan' || chr(9)
                                  WHEN n - b = 'inf'::DOUBLE THEN 'inf' || chr(9)
                                  ELSE '-inf' || chr(9) END)::cell END);
-- Statistics mode (spec §4.1): relative-error text and the >0.5 magnitude flag. Two equal finite
-- values give abs(0.0 / b * 100) = 0.0, printed '0.0': written as such, not printed (~1,000
-- instructions a number; a third of root-8x8-5000's statistics are equal).
CREATE OR REPLACE MACRO stat_rel(n, nk, b, bk) AS (
  CASE WHEN NOT (is_num(nk) AND is_num(bk)) THEN ' '
       WHEN b = 0 THEN 'N/A'
       WHEN n = b AND isfinite(b) THEN '0.0%'
       ELSE py_float(abs(((n - b) / b) * 100)) || '%' END);
-- A relative error as a number (stat_rows' <stat>_rel_pct, what the default mode materialises):
-- abs(((n - b) / b) * 100), or the code of stat_rel's fixed text: -1 'N/A', -2 ' ', -3 '0.0%' (a
-- relative error is never negative). rel_text prints it as stat_rel's text, as
-- msq/export/_sheetxml.c's percent_texts prints it for the workbook.
CREATE OR REPLACE MACRO rel_text(x) AS (
  CASE x WHEN -1 THEN 'N/A' WHEN -2 THEN ' ' WHEN -3 THEN '0.0%' ELSE py_float(x) || '%' END);
-- A relative error as displayed: N/A on an unmatched row, else stat_rel.
CREATE OR REPLACE MACRO shown_rel(matched, n, nk, b, bk) AS (
  CASE WHEN matched THEN stat_rel(n, nk, b, bk) ELSE 'N/A' END);
CREATE OR REPLACE MACRO stat_flag(n, nk, b, bk) AS (
  coalesce(is_num(nk) AND is_num(bk) AND isfinite(n) AND isfinite(b)
           AND abs(n - b) / (greatest(abs(n), abs(b)) + 1e-10) > 0.5, false));
-- A real-data metric: its text ("unsupported", "Nan", "N/A", ...) or its number.
CREATE OR REPLACE MACRO metric_cell(x, txt) AS (
  CASE WHEN txt IS NOT NULL THEN text_cell(txt) ELSE num_cell(x) END);
-- Real-data mode keeps a non-finite statistic as a number (msprobe only turns it into text when writing).
CREATE OR REPLACE MACRO finite_or_text(txt, num) AS (
  CASE replace(txt, chr(9), '') WHEN 'inf' THEN 'inf'::DOUBLE WHEN '-inf' THEN '-inf'::DOUBLE
       WHEN 'nan' THEN 'nan'::DOUBLE ELSE num END);
-- -f: a name without its call counter (APIs) or class name (modules), spec §3.3. The F:/B:/E:
-- tag keeps forward, backward and other names apart, as msprobe compares them per direction.
CREATE OR REPLACE MACRO drop_call_count(name, word) AS (
  regexp_replace(split_part(name, word, 1), '(\.[^.]*){1,2}$', '')
  || CASE WHEN len(string_split(name, word)) > 1 THEN split_part(name, word, 2) ELSE '' END);
CREATE OR REPLACE MACRO fuzzy_rename(name) AS (
  CASE WHEN contains(name, 'forward') THEN 'F:' || drop_call_count(name, 'forward')
       WHEN contains(name, 'backward') THEN 'B:' || drop_call_count(name, 'backward')
       ELSE 'E:' || name END);
-- MindSpore dtype names as PyTorch writes them (cross-framework compares, spec §3.7). One
-- constant map, not a CASE of fifteen branches: each use of a macro is bound and optimised anew,
-- and the CASE's nodes were ~7 M instructions a use (unmatched_reasons uses it three times and
-- verdicts twice); a lookup costs ~30 ns more a row, for the rows that need it (dtypes that differ).
CREATE OR REPLACE MACRO ms_to_torch_dtype(d) AS (
  coalesce(MAP {'Int8': 'torch.int8', 'UInt8': 'torch.uint8', 'Int16': 'torch.int16',
                'UInt16': 'torch.uint16', 'Int32': 'torch.int32', 'UInt32': 'torch.uint32',
                'Int64': 'torch.int64', 'UInt64': 'torch.uint64', 'Float16': 'torch.float16',
                'Float32': 'torch.float32', 'Float64': 'torch.float64', 'Bool': 'torch.bool',
                'BFloat16': 'torch.bfloat16', 'Complex64': 'torch.complex64',
                'Complex128': 'torch.complex128'}[d], d));
