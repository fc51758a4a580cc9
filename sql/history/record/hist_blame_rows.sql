-- description: The compare's blame rows as the history keeps them (inserted into blame_rows by name, with the run they belong to and the thresholds used).
-- (io, role, direction, verdict, link: blame_rows' ENUMs, compare/schema/40_blame.sql, as they
-- are: a directory compare's worker hands them over as Arrow dictionaries, which its driver
-- looks up by their dictionaries alone; the single-card recorder's SQL compares them with the
-- history's texts as texts)
SELECT
  p.run_id, b.out_seq, b.op_seq, b.op_name, b.npu_name, b.io, b.role, b.direction, b.is_module,
  b.collective, b.err_kind, b.input_err, b.output_err, b.floor, b.floor_source, p.floor_factor,
  p.amp_limit, b.amplification, b.verdict, b.reason, b.link, b.candidates, b.via, b.band,
  p.noise_source
FROM blame_rows b, blame_params p
