-- History schema version 12 -> 13: blame_data's reason is kept once each distinct text in the
-- new table reasons and its via (a row's name) in names, the rows holding their keys (reason_id,
-- via_id; 0: NULL); blame_edges' side and how are ENUMs. The view blame_rows reads them back (same
-- columns, same order, same rows). The same DDL as sql/history/schema/20_blame.sql (the named
-- compressions too). Rewrites every blame row and edge once, in compare and row order; the new
-- reasons, and the vias names lacks, are keyed in the order of their first row.
CREATE TABLE reasons (
  reason_id INTEGER,              -- 0: NULL; then 1, 2, 3, ... as the reasons were first recorded
  reason VARCHAR                  -- each reason once
);
INSERT INTO reasons VALUES (0, NULL);
INSERT INTO reasons
SELECT (row_number() OVER (ORDER BY compare_id, out_seq))::INTEGER, reason
FROM (SELECT compare_id, out_seq, reason FROM blame_data
      WHERE reason IS NOT NULL
      QUALIFY row_number() OVER (PARTITION BY reason ORDER BY compare_id, out_seq) = 1);
-- (a via is the name of a row of its compare: names holds it, but for a file written by hand)
INSERT INTO names
SELECT (SELECT coalesce(max(name_id), 0) FROM names)
         + (row_number() OVER (ORDER BY compare_id, out_seq))::INTEGER, via
FROM (SELECT compare_id, out_seq, via FROM blame_data d
      WHERE via IS NOT NULL AND NOT EXISTS (SELECT 1 FROM names h WHERE h.name = d.via)
      QUALIFY row_number() OVER (PARTITION BY via ORDER BY compare_id, out_seq) = 1);
CREATE TABLE blame_data_v13 (
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
INSERT INTO blame_data_v13 BY NAME
SELECT d.* EXCLUDE (reason, via), coalesce(rs.reason_id, 0) AS reason_id,
       coalesce(v.name_id, 0) AS via_id
FROM blame_data d
LEFT JOIN reasons rs ON rs.reason = d.reason
LEFT JOIN names v ON v.name = d.via
ORDER BY d.compare_id, d.out_seq;
CREATE TABLE blame_edges_v13 (
  compare_id BIGINT USING COMPRESSION rle,
  side ENUM('bench', 'npu'),
  consumer_seq BIGINT USING COMPRESSION bitpacking,  -- the input's row
  producer_seq BIGINT,            -- the producing output's row (NULL: external)
  how ENUM('constant', 'external', 'hash', 'md5', 'reshape', 'statistics'),
  candidates INTEGER
);
-- (rowid: the edges as they were recorded; a text outside the ENUMs fails the migration, which
-- then leaves the file as it was)
INSERT INTO blame_edges_v13 SELECT * FROM blame_edges ORDER BY rowid;
DROP VIEW blame_rows;
DROP TABLE blame_data;
ALTER TABLE blame_data_v13 RENAME TO blame_data;
DROP TABLE blame_edges;
ALTER TABLE blame_edges_v13 RENAME TO blame_edges;
CREATE VIEW blame_rows AS
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
