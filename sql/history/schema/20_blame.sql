-- Blame (schema version 3; docs/blame.md): where the error enters, one row per compared row of
-- each compare, and its dataflow edges. The view blame weighs the ranks of a run together.
-- Since schema version 6 the rows are stored as blame_data (names as keys into names, like
-- result_data) and blame_runs (what is the same for every row of a compare), and blame_rows is a
-- view of both with the columns of the table it was: a directory compare's driver appends,
-- scans back, analyses and compresses every cell of every column, and four constant columns and
-- two name columns (24,500 distinct row names a pair) were a third of blame's share of it.
CREATE TABLE IF NOT EXISTS blame_runs (
  compare_id BIGINT,
  run_id VARCHAR,                 -- one msq compare: every rank and step it compared
  floor_factor DOUBLE,            -- local: output_err > floor_factor x floor ...
  amp_limit DOUBLE,               -- ... and > amp_limit x input_err
  noise_source VARCHAR            -- the reference noise run the floors came from (NULL: dtype floors)
);
-- What a blame row is (schema version 11): its io, role, direction, is_module, collective,
-- err_kind, floor_source, verdict and link together, each distinct combination once with its key;
-- blame_data holds the key (class_id) and the view blame_rows joins the columns back. A
-- 24,500-row pair of a directory compare holds ~45 such combinations, and its driver appended,
-- scanned back, analysed and compressed the nine columns of every row (their terms' keys since
-- version 8; ~58 M instructions, 13 % of its recording of the pair with their lookups;
-- bench/README, "Session 22: hist"). The keys run 1, 2, 3, ... without a gap, a compare's new
-- combinations after the largest in the order of their first row.
CREATE TABLE IF NOT EXISTS blame_classes (
  class_id INTEGER,               -- 1, 2, 3, ...
  io VARCHAR,                     -- input | output
  role VARCHAR,                   -- output | linked input | external input | in-place input | constant input
  direction VARCHAR,              -- forward | backward | '' (neither)
  is_module BOOLEAN,
  collective BOOLEAN,             -- a Distributed.* op (weighed across ranks by the view blame)
  err_kind VARCHAR,               -- how output_err was computed (row_error.err_kind)
  floor_source VARCHAR,           -- 'dtype <name>', 'noise run', 'md5 (equal or not)'
  verdict VARCHAR,                -- local | inherited | clean, on its own rank (see the view blame)
  link VARCHAR                    -- an input's link to its producer: hash, md5, statistics, reshape, external, constant
);
-- The reasons (schema version 13): every blame row's reason the history holds, once, with its key
-- (blame_data.reason_id). A 24,500-row pair holds ~3,700 distinct reasons, most of them repeated
-- by the other ranks and steps ("explained by its input <name>"), and its driver appended,
-- scanned back, analysed and compressed each row's text (~27 M instructions a pair; bench/README,
-- "Session 27: drv"). reason_id 0 is the absent reason (NULL), so the view's join is an inner
-- join as the names' are; then 1, 2, 3, ... without a gap, a compare's new reasons after the
-- largest in the order of their first row.
CREATE TABLE IF NOT EXISTS reasons (
  reason_id INTEGER,              -- 0: NULL; then 1, 2, 3, ... as the reasons were first recorded
  reason VARCHAR                  -- each reason once
);
INSERT INTO reasons SELECT 0, NULL WHERE NOT EXISTS (SELECT 1 FROM reasons WHERE reason_id = 0);
-- USING COMPRESSION: as result_data's (10_tables.sql)
CREATE TABLE IF NOT EXISTS blame_data (
  compare_id BIGINT USING COMPRESSION rle,
  out_seq BIGINT USING COMPRESSION bitpacking,  -- the row (result_rows.out_seq)
  op_seq INTEGER USING COMPRESSION bitpacking,  -- the NPU op's place in its dump (execution order)
  op_id INTEGER USING COMPRESSION bitpacking,   -- names.name_id of op_name, the dump.json entry (0: NULL)
  npu_id INTEGER USING COMPRESSION bitpacking,  -- names.name_id of npu_name (0: NULL)
  -- blame_classes.class_id of the row's io, role, direction, is_module, collective, err_kind,
  -- floor_source, verdict and link (schema version 11; their terms' keys and two booleans in
  -- versions 8-10; bit packed whatever the workload: ~45 of them in a 64-pair run)
  class_id INTEGER USING COMPRESSION bitpacking,
  input_err DOUBLE,               -- what the inputs bring (an output: its op's worst input)
  output_err DOUBLE,              -- the row's own error (row_error.err)
  floor DOUBLE,                   -- the error its dtype (or the noise run) explains
  amplification DOUBLE,           -- output_err / input_err (inf: equal inputs, different output)
  -- reasons.reason_id of the row's reason (0: NULL; schema version 13, the text in versions 3-12)
  reason_id INTEGER USING COMPRESSION bitpacking,
  candidates INTEGER,             -- earlier outputs with that content (the nearest one is taken)
  -- names.name_id of via, the producer of an input or the worst input of an output (0: NULL;
  -- schema version 13, the text in versions 3-12: a row's name, which names holds already)
  via_id INTEGER USING COMPRESSION bitpacking,
  band DOUBLE                     -- what the row adds over its inputs: its noise band when this compare is a noise run
);
-- blame_rows: the table of schema versions 3-5 (same columns, same order), a view since 6 (its
-- short texts keys into terms in versions 8-10, joined by key since 9; since 11 they and the two
-- booleans are read from blame_classes by one key; since 13 its reason from reasons and its via
-- from names by key). Version 8's view read the terms from a list
-- of every term, which DuckDB put into the build side of the blame_runs join and copied for each
-- row (a GROUP BY verdict over one run took 11.7 s; joined, 0.3 s; bench/README, session 20).
CREATE VIEW IF NOT EXISTS blame_rows AS
SELECT d.compare_id, r.run_id, d.out_seq, d.op_seq, o.name AS op_name, n.name AS npu_name,
       c.io, c.role, c.direction, c.is_module, c.collective,
       c.err_kind, d.input_err, d.output_err, d.floor,
       c.floor_source, r.floor_factor, r.amp_limit, d.amplification,
       c.verdict, rs.reason, c.link, d.candidates, v.name AS via, d.band,
       r.noise_source
FROM blame_data d
JOIN blame_runs r ON r.compare_id = d.compare_id
JOIN names o ON o.name_id = d.op_id
JOIN names n ON n.name_id = d.npu_id
JOIN blame_classes c ON c.class_id = d.class_id
JOIN reasons rs ON rs.reason_id = d.reason_id
JOIN names v ON v.name_id = d.via_id;
-- Each tensor input linked to the earlier output that produced it, per side (rows by out_seq;
-- NULL where a row is not in the compare's output, e.g. not matched). side and how are ENUMs
-- (schema version 13; texts in versions 3-12): a closed set of texts blame computes itself (how:
-- the compare's ENUM blame_link, sql/compare/schema/40_blame.sql, the same texts in the same
-- order), stored as a byte, where a VARCHAR was appended, scanned back, analysed and
-- dictionary-compressed at each checkpoint (~11.5 M instructions a 24,500-row pair; bench/README,
-- "Session 24: hist"). Each in its texts' sorted order, so a sort by it is theirs.
CREATE TABLE IF NOT EXISTS blame_edges (
  compare_id BIGINT USING COMPRESSION rle,
  side ENUM('bench', 'npu'),
  consumer_seq BIGINT USING COMPRESSION bitpacking,  -- the input's row
  producer_seq BIGINT,            -- the producing output's row (NULL: external)
  how ENUM('constant', 'external', 'hash', 'md5', 'reshape', 'statistics'),
  candidates INTEGER
);
