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
-- USING COMPRESSION: as result_data's (10_tables.sql)
CREATE TABLE IF NOT EXISTS blame_data (
  compare_id BIGINT USING COMPRESSION rle,
  out_seq BIGINT USING COMPRESSION bitpacking,  -- the row (result_rows.out_seq)
  op_seq INTEGER USING COMPRESSION bitpacking,  -- the NPU op's place in its dump (execution order)
  op_id INTEGER USING COMPRESSION bitpacking,   -- names.name_id of op_name, the dump.json entry (0: NULL)
  npu_id INTEGER USING COMPRESSION bitpacking,  -- names.name_id of npu_name (0: NULL)
  -- terms.term_id of io (schema version 8; so are role_id, direction_id, err_kind_id,
  -- floor_source_id, verdict_id and link_id: NULL for NULL)
  io_id INTEGER,                                -- input | output
  role_id INTEGER USING COMPRESSION bitpacking,  -- output | linked input | external input | in-place input | constant input
  direction_id INTEGER USING COMPRESSION rle,   -- forward | backward | '' (neither)
  is_module BOOLEAN,
  collective BOOLEAN,             -- a Distributed.* op (weighed across ranks by the view blame)
  err_kind_id INTEGER USING COMPRESSION bitpacking,  -- how output_err was computed (row_error.err_kind)
  input_err DOUBLE,               -- what the inputs bring (an output: its op's worst input)
  output_err DOUBLE,              -- the row's own error (row_error.err)
  floor DOUBLE,                   -- the error its dtype (or the noise run) explains
  floor_source_id INTEGER USING COMPRESSION bitpacking,  -- 'dtype <name>', 'noise run', 'md5 (equal or not)'
  amplification DOUBLE,           -- output_err / input_err (inf: equal inputs, different output)
  verdict_id INTEGER USING COMPRESSION bitpacking,  -- local | inherited | clean, on its own rank (see the view blame)
  reason VARCHAR USING COMPRESSION dict_fsst,
  link_id INTEGER USING COMPRESSION bitpacking,  -- an input's link to its producer: hash, md5, statistics, reshape, external, constant
  candidates INTEGER,             -- earlier outputs with that content (the nearest one is taken)
  via VARCHAR USING COMPRESSION dict_fsst,  -- the producer of an input, or the worst input of an output
  band DOUBLE                     -- what the row adds over its inputs: its noise band when this compare is a noise run
);
-- blame_rows: the table of schema versions 3-5 (same columns, same order), a view since 6 (its
-- short texts keys into terms since 8). The terms are joined by key (schema version 9), not read
-- from a list of every term as result_rows reads them: DuckDB put that list (1,237 texts in a
-- 64-pair run's history) into the build side of the blame_runs join and copied it for each
-- row, so a GROUP BY verdict over one run took 11.7 s and a compare's local rows in worst-first
-- order 1.4 s; joined, 0.3 s and 0.06 s, same rows (bench/README, session 20).
CREATE VIEW IF NOT EXISTS blame_rows AS
SELECT d.compare_id, r.run_id, d.out_seq, d.op_seq, o.name AS op_name, n.name AS npu_name,
       io.term AS io, role.term AS role, direction.term AS direction, d.is_module, d.collective,
       err_kind.term AS err_kind, d.input_err, d.output_err, d.floor,
       floor_source.term AS floor_source, r.floor_factor, r.amp_limit, d.amplification,
       verdict.term AS verdict, d.reason, link.term AS link, d.candidates, d.via, d.band,
       r.noise_source
FROM blame_data d
JOIN blame_runs r ON r.compare_id = d.compare_id
JOIN names o ON o.name_id = d.op_id
JOIN names n ON n.name_id = d.npu_id
LEFT JOIN terms io ON io.term_id = d.io_id
LEFT JOIN terms role ON role.term_id = d.role_id
LEFT JOIN terms direction ON direction.term_id = d.direction_id
LEFT JOIN terms err_kind ON err_kind.term_id = d.err_kind_id
LEFT JOIN terms floor_source ON floor_source.term_id = d.floor_source_id
LEFT JOIN terms verdict ON verdict.term_id = d.verdict_id
LEFT JOIN terms link ON link.term_id = d.link_id;
-- Each tensor input linked to the earlier output that produced it, per side (rows by out_seq;
-- NULL where a row is not in the compare's output, e.g. not matched).
CREATE TABLE IF NOT EXISTS blame_edges (
  compare_id BIGINT USING COMPRESSION rle,
  side VARCHAR USING COMPRESSION dict_fsst,     -- npu | bench
  consumer_seq BIGINT USING COMPRESSION bitpacking,  -- the input's row
  producer_seq BIGINT,            -- the producing output's row (NULL: external)
  how VARCHAR USING COMPRESSION dict_fsst,      -- hash | md5 | statistics | reshape | external
  candidates INTEGER
);
