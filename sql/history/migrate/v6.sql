-- History schema version 5 -> 6: blame_rows is stored as blame_data (its names as keys into
-- names, like result_data) and blame_runs (run_id, floor_factor, amp_limit, noise_source: one row
-- a compare), and becomes a view of both with the same columns in the same order. The same DDL as
-- sql/history/schema/20_blame.sql. Rewrites every blame row once.
CREATE TABLE blame_runs (
  compare_id BIGINT,
  run_id VARCHAR,                 -- one msq compare: every rank and step it compared
  floor_factor DOUBLE,            -- local: output_err > floor_factor x floor ...
  amp_limit DOUBLE,               -- ... and > amp_limit x input_err
  noise_source VARCHAR            -- the reference noise run the floors came from (NULL: dtype floors)
);
CREATE TABLE blame_data (
  compare_id BIGINT,
  out_seq BIGINT,                 -- the row (result_rows.out_seq)
  op_seq INTEGER,                 -- the NPU op's place in its dump (execution order)
  op_id INTEGER,                  -- names.name_id of op_name, the dump.json entry (0: NULL)
  npu_id INTEGER,                 -- names.name_id of npu_name (0: NULL)
  io VARCHAR,                     -- input | output
  role VARCHAR,                   -- output | linked input | external input | in-place input | constant input
  direction VARCHAR,              -- forward | backward | '' (neither)
  is_module BOOLEAN,
  collective BOOLEAN,             -- a Distributed.* op (weighed across ranks by the view blame)
  err_kind VARCHAR,               -- how output_err was computed (row_error.err_kind)
  input_err DOUBLE,               -- what the inputs bring (an output: its op's worst input)
  output_err DOUBLE,              -- the row's own error (row_error.err)
  floor DOUBLE,                   -- the error its dtype (or the noise run) explains
  floor_source VARCHAR,           -- 'dtype <name>', 'noise run', 'md5 (equal or not)'
  amplification DOUBLE,           -- output_err / input_err (inf: equal inputs, different output)
  verdict VARCHAR,                -- local | inherited | clean, on its own rank (see the view blame)
  reason VARCHAR,
  link VARCHAR,                   -- an input's link to its producer: hash, md5, statistics, reshape, external, constant
  candidates INTEGER,             -- earlier outputs with that content (the nearest one is taken)
  via VARCHAR,                    -- the producer of an input, or the worst input of an output
  band DOUBLE                     -- what the row adds over its inputs: its noise band when this compare is a noise run
);

-- the names of blame rows the history does not hold yet (none when msq recorded them: a blame
-- row is an output row), keyed after the largest in the order of their first row
INSERT INTO names
SELECT (SELECT coalesce(max(name_id), 0) FROM names)
         + (row_number() OVER (ORDER BY compare_id, out_seq, slot))::INTEGER, name
FROM (SELECT compare_id, out_seq, unnest([0, 1]) AS slot, unnest([op_name, npu_name]) AS name
      FROM blame_rows) u
WHERE name IS NOT NULL AND NOT EXISTS (SELECT 1 FROM names h WHERE h.name = u.name)
QUALIFY row_number() OVER (PARTITION BY name ORDER BY compare_id, out_seq, slot) = 1;

-- what every row of a compare shares (one value each: msq records them from one row)
INSERT INTO blame_runs
SELECT compare_id, any_value(run_id), any_value(floor_factor), any_value(amp_limit),
       any_value(noise_source)
FROM blame_rows GROUP BY compare_id ORDER BY compare_id;

INSERT INTO blame_data
SELECT b.compare_id, b.out_seq, b.op_seq, coalesce(o.name_id, 0), coalesce(n.name_id, 0), b.io,
       b.role, b.direction, b.is_module, b.collective, b.err_kind, b.input_err, b.output_err,
       b.floor, b.floor_source, b.amplification, b.verdict, b.reason, b.link, b.candidates, b.via,
       b.band
FROM blame_rows b
LEFT JOIN names o ON o.name = b.op_name
LEFT JOIN names n ON n.name = b.npu_name
ORDER BY b.rowid;
DROP TABLE blame_rows;
CREATE VIEW blame_rows AS
SELECT d.compare_id, r.run_id, d.out_seq, d.op_seq, o.name AS op_name, n.name AS npu_name, d.io,
       d.role, d.direction, d.is_module, d.collective, d.err_kind, d.input_err, d.output_err,
       d.floor, d.floor_source, r.floor_factor, r.amp_limit, d.amplification, d.verdict, d.reason,
       d.link, d.candidates, d.via, d.band, r.noise_source
FROM blame_data d
JOIN blame_runs r ON r.compare_id = d.compare_id
JOIN names o ON o.name_id = d.op_id
JOIN names n ON n.name_id = d.npu_id;
