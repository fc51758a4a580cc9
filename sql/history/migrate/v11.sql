-- History schema version 10 -> 11: what a blame row is (its io, role, direction, is_module,
-- collective, err_kind, floor_source, verdict and link: seven keys into terms and two booleans in
-- blame_data of versions 8-10) is kept once each distinct combination in the new table
-- blame_classes, with the texts themselves, and the rows hold its key (class_id); the view
-- blame_rows reads them back (same columns, same order, same rows). The same DDL as
-- sql/history/schema/20_blame.sql (blame_data's named compressions too). Rewrites every blame row
-- once, in compare and row order; the combinations are keyed in the order of their first row.
-- blame's terms stay in terms (nothing reads them there any more).
CREATE TABLE blame_classes (
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
-- each combination of keys once, with its key (a table of the file, dropped below: one write
-- transaction writes to one database)
CREATE TABLE blame_classes_v11 AS
SELECT (row_number() OVER (ORDER BY compare_id, out_seq))::INTEGER AS class_id, io_id, role_id,
       direction_id, is_module, collective, err_kind_id, floor_source_id, verdict_id, link_id
FROM (SELECT compare_id, out_seq, io_id, role_id, direction_id, is_module, collective, err_kind_id,
             floor_source_id, verdict_id, link_id
      FROM blame_data
      QUALIFY row_number() OVER (PARTITION BY io_id, role_id, direction_id, is_module, collective,
                                              err_kind_id, floor_source_id, verdict_id, link_id
                                 ORDER BY compare_id, out_seq) = 1);
INSERT INTO blame_classes
SELECT c.class_id, t_io.term, t_role.term, t_direction.term, c.is_module, c.collective,
       t_err_kind.term, t_floor_source.term, t_verdict.term, t_link.term
FROM blame_classes_v11 c
LEFT JOIN terms t_io ON t_io.term_id = c.io_id
LEFT JOIN terms t_role ON t_role.term_id = c.role_id
LEFT JOIN terms t_direction ON t_direction.term_id = c.direction_id
LEFT JOIN terms t_err_kind ON t_err_kind.term_id = c.err_kind_id
LEFT JOIN terms t_floor_source ON t_floor_source.term_id = c.floor_source_id
LEFT JOIN terms t_verdict ON t_verdict.term_id = c.verdict_id
LEFT JOIN terms t_link ON t_link.term_id = c.link_id
ORDER BY c.class_id;
CREATE TABLE blame_data_v11 (
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
  reason VARCHAR USING COMPRESSION dict_fsst,
  candidates INTEGER,             -- earlier outputs with that content (the nearest one is taken)
  via VARCHAR USING COMPRESSION dict_fsst,  -- the producer of an input, or the worst input of an output
  band DOUBLE                     -- what the row adds over its inputs: its noise band when this compare is a noise run
);
-- (IS NOT DISTINCT FROM: a NULL key or boolean equal to a NULL one)
INSERT INTO blame_data_v11 BY NAME
SELECT d.* EXCLUDE (io_id, role_id, direction_id, is_module, collective, err_kind_id,
                    floor_source_id, verdict_id, link_id), c.class_id
FROM blame_data d
JOIN blame_classes_v11 c
  ON c.io_id IS NOT DISTINCT FROM d.io_id AND c.role_id IS NOT DISTINCT FROM d.role_id
 AND c.direction_id IS NOT DISTINCT FROM d.direction_id
 AND c.is_module IS NOT DISTINCT FROM d.is_module AND c.collective IS NOT DISTINCT FROM d.collective
 AND c.err_kind_id IS NOT DISTINCT FROM d.err_kind_id
 AND c.floor_source_id IS NOT DISTINCT FROM d.floor_source_id
 AND c.verdict_id IS NOT DISTINCT FROM d.verdict_id AND c.link_id IS NOT DISTINCT FROM d.link_id
ORDER BY d.compare_id, d.out_seq;
DROP TABLE blame_classes_v11;
DROP VIEW blame_rows;
DROP TABLE blame_data;
ALTER TABLE blame_data_v11 RENAME TO blame_data;
CREATE VIEW blame_rows AS
SELECT d.compare_id, r.run_id, d.out_seq, d.op_seq, o.name AS op_name, n.name AS npu_name,
       c.io, c.role, c.direction, c.is_module, c.collective,
       c.err_kind, d.input_err, d.output_err, d.floor,
       c.floor_source, r.floor_factor, r.amp_limit, d.amplification,
       c.verdict, d.reason, c.link, d.candidates, d.via, d.band,
       r.noise_source
FROM blame_data d
JOIN blame_runs r ON r.compare_id = d.compare_id
JOIN names o ON o.name_id = d.op_id
JOIN names n ON n.name_id = d.npu_id
JOIN blame_classes c ON c.class_id = d.class_id;
