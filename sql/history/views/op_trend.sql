-- description: Every compared row of every compare with its run context (label, step, rank): filter on op_name or npu_name to follow one op across steps, ranks and runs.
SELECT
  c.label, c.step, c.rank, c.compare_id, c.started_at, c.mode,
  r.out_seq, r.op_name, r.npu_name, r.bench_name, r.kind,
  r.max_diff, r.min_diff, r.mean_diff, r.norm_diff,
  r.max_rel_pct, r.min_rel_pct, r.mean_rel_pct, r.norm_rel_pct,
  r.cosine, r.max_abs_err, r.max_rel_err, r.one_thousandth_err_ratio, r.five_thousandths_err_ratio,
  r.npu_max, r.npu_min, r.npu_mean, r.npu_norm,
  r.bench_max, r.bench_min, r.bench_mean, r.bench_norm,
  r.npu_md5, r.bench_md5,
  r.result, r.verdict, r.mark, r.severity
FROM result_rows r
JOIN compares c USING (compare_id)
