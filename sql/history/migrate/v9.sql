-- History schema version 8 -> 9: the view blame_rows joins its short texts from terms by key
-- (as sql/history/schema/20_blame.sql does) instead of reading each from a list of every term,
-- which DuckDB copied into every row of the blame_runs join (a GROUP BY verdict over one 64-pair
-- run: 11.7 -> 0.3 s). Same columns, same order, same rows; no row is rewritten.
CREATE OR REPLACE VIEW blame_rows AS
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
