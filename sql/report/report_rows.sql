-- description: Every row of the report in display order (compare, then execution order), with the error figure the chart plots, forward/backward, input/output and the blame verdict when blame exists.
WITH r AS (
  SELECT r.*, c.mode, c.ord,
         coalesce(r.npu_name, r.bench_name) AS row_name,
         -- the part after the op's name: input.0, output.1, input.dim.0, parameters_grad...
         CASE WHEN starts_with(coalesce(r.npu_name, r.bench_name), r.op_name || '.')
              THEN substr(coalesce(r.npu_name, r.bench_name), length(r.op_name) + 2)
              ELSE regexp_extract(coalesce(r.npu_name, r.bench_name),
                                  '\.(?:forward|backward)(?:\.\d+)?\.(.*)$', 1) END AS arg
  FROM rep_rows r
  JOIN rep_compares c USING (compare_id)
),
figured AS (
  SELECT r.*,
    -- One comparable error per row (docs/report.md): statistics the larger relative error of
    -- max and L2 norm, tensor 1 - cosine (else MaxAbsErr), md5 1 when the digests differ.
    CASE r.mode
      WHEN 'statistics' THEN greatest(abs(r.max_rel_pct), abs(r.norm_rel_pct)) / 100
      WHEN 'tensor' THEN CASE WHEN r.cosine IS NOT NULL AND NOT isnan(r.cosine)
                              THEN greatest(0.0, 1.0 - r.cosine)
                              ELSE abs(r.max_abs_err) END
      WHEN 'md5' THEN CASE WHEN r.npu_md5 IS NOT NULL AND r.bench_md5 IS NOT NULL
                           THEN CAST(r.npu_md5 <> r.bench_md5 AS DOUBLE) END
    END AS own_err,
    CASE r.mode
      WHEN 'statistics' THEN 'relative error'
      WHEN 'tensor' THEN CASE WHEN r.cosine IS NOT NULL AND NOT isnan(r.cosine) THEN '1 - cosine'
                              ELSE 'max abs error' END
      WHEN 'md5' THEN 'md5 differs'
    END AS own_err_kind
  FROM r
)
SELECT
  f.* EXCLUDE (own_err, own_err_kind),
  coalesce(b.output_err, f.own_err) AS err,
  CASE WHEN b.output_err IS NOT NULL THEN 'blame output error' ELSE f.own_err_kind END AS err_kind,
  coalesce(regexp_extract(f.op_name, '\.(forward|backward)(?:\.\d+)?$', 1), '') AS direction,
  CASE WHEN f.arg LIKE 'input%' THEN 'input' WHEN f.arg LIKE 'output%' THEN 'output'
       ELSE 'other' END AS io,
  b.verdict AS blame_verdict, b.input_err AS blame_input_err,
  b.amplification AS blame_amplification, b.blame_rank, b.reason AS blame_reason
FROM figured f
LEFT JOIN rep_blame b ON b.compare_id = f.compare_id AND b.out_seq = f.out_seq
ORDER BY f.ord, f.out_seq
