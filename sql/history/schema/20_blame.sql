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
CREATE TABLE IF NOT EXISTS blame_data (
  compare_id BIGINT,
  out_seq BIGINT,                 -- the row (result_rows.out_seq)
  op_seq INTEGER,                 -- the NPU op's place in its dump (execution order)
  op_id INTEGER,                  -- names.name_id of op_name, the dump.json entry (0: NULL)
  npu_id INTEGER,                 -- names.name_id of npu_name (0: NULL)
  -- terms.term_id of io (schema version 8; so are role_id, direction_id, err_kind_id,
  -- floor_source_id, verdict_id and link_id: NULL for NULL)
  io_id INTEGER,                  -- input | output
  role_id INTEGER,                -- output | linked input | external input | in-place input | constant input
  direction_id INTEGER,           -- forward | backward | '' (neither)
  is_module BOOLEAN,
  collective BOOLEAN,             -- a Distributed.* op (weighed across ranks by the view blame)
  err_kind_id INTEGER,            -- how output_err was computed (row_error.err_kind)
  input_err DOUBLE,               -- what the inputs bring (an output: its op's worst input)
  output_err DOUBLE,              -- the row's own error (row_error.err)
  floor DOUBLE,                   -- the error its dtype (or the noise run) explains
  floor_source_id INTEGER,        -- 'dtype <name>', 'noise run', 'md5 (equal or not)'
  amplification DOUBLE,           -- output_err / input_err (inf: equal inputs, different output)
  verdict_id INTEGER,             -- local | inherited | clean, on its own rank (see the view blame)
  reason VARCHAR,
  link_id INTEGER,                -- an input's link to its producer: hash, md5, statistics, reshape, external, constant
  candidates INTEGER,             -- earlier outputs with that content (the nearest one is taken)
  via VARCHAR,                    -- the producer of an input, or the worst input of an output
  band DOUBLE                     -- what the row adds over its inputs: its noise band when this compare is a noise run
);
-- blame_rows: the table of schema versions 3-5 (same columns, same order), a view since 6 (its
-- short texts keys into terms since 8, read as result_rows reads them).
CREATE VIEW IF NOT EXISTS blame_rows AS
SELECT d.compare_id, r.run_id, d.out_seq, d.op_seq, o.name AS op_name, n.name AS npu_name,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.io_id] AS io,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.role_id] AS role,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.direction_id] AS direction,
       d.is_module, d.collective,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.err_kind_id] AS err_kind,
       d.input_err, d.output_err, d.floor,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.floor_source_id] AS floor_source,
       r.floor_factor, r.amp_limit, d.amplification,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.verdict_id] AS verdict, d.reason,
       (SELECT list(term ORDER BY term_id) FROM terms)[d.link_id] AS link,
       d.candidates, d.via, d.band, r.noise_source
FROM blame_data d
JOIN blame_runs r ON r.compare_id = d.compare_id
JOIN names o ON o.name_id = d.op_id
JOIN names n ON n.name_id = d.npu_id;
-- Each tensor input linked to the earlier output that produced it, per side (rows by out_seq;
-- NULL where a row is not in the compare's output, e.g. not matched).
CREATE TABLE IF NOT EXISTS blame_edges (
  compare_id BIGINT,
  side VARCHAR,                   -- npu | bench
  consumer_seq BIGINT,            -- the input's row
  producer_seq BIGINT,            -- the producing output's row (NULL: external)
  how VARCHAR,                    -- hash | md5 | statistics | reshape | external
  candidates INTEGER
);
