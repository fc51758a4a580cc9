-- description: Blame, one row per compared row: where the error enters. output_err is the row's own error (row_error); input_err what its inputs bring (an output row: the worst of its op's inputs, blame_ops; a linked input: its producer's error); floor the error the row's dtype (or the reference noise run) explains; verdict local (beyond floor_factor x floor and amp_limit x input_err), inherited (explained by the inputs), clean (within the floor). A collective op's output not explained on this rank is provisionally inherited: the history's blame view weighs the other ranks.
WITH p AS (SELECT * FROM blame_params),
rows AS (
  SELECT
    r.out_seq, t.op_seq, bo.op_name, t.disp_name AS npu_name, t.io,
    t.dtype AS npu_dtype, b.dtype AS bench_dtype,
    -- blame_dtype_floor of the row's dtypes; the commonest first, each folded to a constant
    -- (a dtype that is none of them goes through the macro's lists: ~4x the CPU)
    CASE WHEN t.dtype IS NULL THEN blame_dtype_floor(NULL::VARCHAR)
         WHEN t.dtype = 'torch.float32' THEN blame_dtype_floor('torch.float32')
         WHEN t.dtype = '<class ''int''>' THEN blame_dtype_floor('<class ''int''>')
         WHEN t.dtype = 'torch.float16' THEN blame_dtype_floor('torch.float16')
         WHEN t.dtype = 'torch.bfloat16' THEN blame_dtype_floor('torch.bfloat16')
         ELSE blame_dtype_floor(t.dtype) END AS npu_floor,
    CASE WHEN b.dtype IS NULL THEN blame_dtype_floor(NULL::VARCHAR)
         WHEN b.dtype = 'torch.float32' THEN blame_dtype_floor('torch.float32')
         WHEN b.dtype = '<class ''int''>' THEN blame_dtype_floor('<class ''int''>')
         WHEN b.dtype = 'torch.float16' THEN blame_dtype_floor('torch.float16')
         WHEN b.dtype = 'torch.bfloat16' THEN blame_dtype_floor('torch.bfloat16')
         ELSE blame_dtype_floor(b.dtype) END AS bench_floor,
    e.err AS output_err, e.err_kind,
    bo.is_module, bo.has_inner, bo.direction, bo.collective, bo.prior_err,
    bi.link, bi.candidates, bi.producer_name, bi.producer_err, coalesce(bi.in_place, false) AS in_place,
    CASE WHEN t.io = 'output' THEN bo.input_err
         WHEN bi.in_place THEN bo.input_err
         WHEN bi.link IN ('external', 'constant') THEN NULL
         ELSE bi.producer_err END AS input_err,
    CASE WHEN t.io = 'output' THEN bo.worst_input
         WHEN bi.in_place THEN bo.worst_input
         ELSE bi.producer_name END AS via,
    CASE WHEN t.io = 'output' THEN 'output'
         WHEN bi.in_place THEN 'in-place input'
         WHEN bi.link = 'constant' THEN 'constant input'
         WHEN bi.link = 'external' THEN 'external input'
         ELSE 'linked input' END AS role,
    bd.band
  FROM compare_rows r
  JOIN tensors t ON t.side = 'npu' AND t.row_seq = r.npu_row
  JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
  JOIN blame_ops bo ON bo.op_seq = t.op_seq
  LEFT JOIN row_error e ON e.out_seq = r.out_seq
  LEFT JOIN blame_inputs bi ON bi.row_seq = t.row_seq
  LEFT JOIN (SELECT npu_name, max(band) AS band FROM blame_bands GROUP BY npu_name) bd
    ON bd.npu_name = t.disp_name
  WHERE r.kind = 'matched'
),
floored AS (
  SELECT rows.*,
    CASE WHEN (SELECT mode FROM settings) = 'md5' THEN 0.0
         ELSE greatest(npu_floor, bench_floor) END
      AS dtype_floor
  FROM rows
),
judged AS (
  SELECT f.*,
    greatest(dtype_floor, coalesce(band, 0.0)) AS floor,
    CASE WHEN coalesce(band, 0.0) > dtype_floor THEN 'noise run'
         WHEN (SELECT mode FROM settings) = 'md5' THEN 'md5 (equal or not)'
         ELSE 'dtype ' || replace(CASE WHEN npu_floor >= bench_floor
                                       THEN npu_dtype ELSE bench_dtype END, 'torch.', '')
    END AS floor_source,
    output_err > (SELECT floor_factor FROM p) * greatest(dtype_floor, coalesce(band, 0.0))
      AS beyond_floor,
    -- explained by what its inputs bring; an external input: by any error before its op
    CASE WHEN role = 'external input'
         THEN output_err <= (SELECT amp_limit FROM p) * coalesce(prior_err, 0.0)
         WHEN role = 'output'
         THEN output_err <= (SELECT amp_limit FROM p) * coalesce(input_err, 0.0)
         ELSE true END AS explained
  FROM floored f
)
SELECT
  out_seq, op_seq, op_name, npu_name, io, role, direction, is_module, collective,
  err_kind, input_err, output_err, floor, floor_source,
  CASE WHEN output_err IS NULL OR input_err IS NULL THEN NULL
       WHEN input_err > 0 AND isfinite(input_err) THEN output_err / input_err
       WHEN input_err = 0 AND output_err > 0 THEN 'inf'::DOUBLE
       WHEN input_err = 0 THEN NULL
  END AS amplification,
  CASE WHEN output_err IS NULL THEN NULL
       WHEN NOT beyond_floor THEN 'clean'
       WHEN explained OR collective THEN 'inherited'
       ELSE 'local' END AS verdict,
  CASE WHEN output_err IS NULL THEN 'not comparable (' || err_kind || ')'
       WHEN NOT beyond_floor THEN 'within the floor'
       WHEN role = 'in-place input' THEN 'in-place op: msprobe records this input after the op; see its output'
       WHEN role = 'linked input' THEN 'produced by ' || via
       WHEN role = 'external input' AND explained
         THEN 'no producing op recorded; errors before this op explain it'
       WHEN role = 'external input'
         THEN 'no producing op recorded (parameter, data or an op the dump lacks) and nothing before it explains it'
       WHEN explained THEN 'explained by its input ' || coalesce(via, '?')
       WHEN collective THEN 'through the collective: the error comes from another rank (or the collective itself); compare every rank'
       WHEN is_module AND has_inner THEN 'inside the module, in code the dump does not record: its ops and inputs do not explain it'
       WHEN coalesce(input_err, 0) = 0 THEN 'error enters here: its inputs are equal'
       ELSE 'error enters here: beyond ' || printf('%g', (SELECT amp_limit FROM p))
            || ' x the error of its input ' || coalesce(via, '?')
  END AS reason,
  link, candidates, via,
  greatest(output_err - coalesce(input_err, 0.0), 0.0) AS band
FROM judged
