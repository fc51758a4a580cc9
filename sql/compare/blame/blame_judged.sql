-- description: Blame, one row per compared row (blame_rows' rows), its reason as its kind: where the error enters. output_err is the row's own error (row_error); input_err what its inputs bring (an output row: the worst of its op's inputs, blame_ops; a linked input: its producer's error); floor the error the row's dtype (or the reference noise run) explains; verdict local (beyond floor_factor x floor and amp_limit x input_err), inherited (explained by the inputs), clean (within the floor). A collective op's output not explained on this rank is provisionally inherited: the history's blame view weighs the other ranks. reason is a blame_reason (sql/compare/schema/40_blame.sql), which blame_reason_text makes the text blame_rows shows (with the row's via, err_kind or amp_limit): a batch of pairs stores these rows and makes the texts only where they are read.
WITH p AS (SELECT (SELECT floor_factor FROM blame_params) AS floor_factor, (SELECT amp_limit FROM blame_params) AS amp_limit,
  (SELECT mode FROM settings) = 'md5' AS md5)
SELECT
  out_seq, op_seq, op_name, npu_name, io, role, direction, is_module, collective,
  err_kind, input_err, output_err, floor, floor_source,
  CASE WHEN output_err IS NULL OR input_err IS NULL THEN NULL
       WHEN input_err > 0 AND isfinite(input_err) THEN output_err / input_err
       WHEN input_err = 0 AND output_err > 0 THEN 'inf'::DOUBLE
       WHEN input_err = 0 THEN NULL
  END AS amplification,
  CASE WHEN output_err IS NULL THEN NULL
       WHEN NOT beyond_floor THEN 'clean'::blame_verdict
       WHEN explained OR collective THEN 'inherited'::blame_verdict
       ELSE 'local'::blame_verdict END AS verdict,
  -- (the reason's kind: a byte a row; its text, with the via, err_kind or amp_limit some kinds
  -- name, made by blame_reason_text where it is read)
  CASE WHEN output_err IS NULL THEN 'not comparable ('::blame_reason
       WHEN NOT beyond_floor THEN 'within the floor'::blame_reason
       WHEN role = 'in-place input' THEN 'in-place op: msprobe records this input after the op; see its output'::blame_reason
       WHEN role = 'linked input' THEN 'produced by '::blame_reason
       WHEN role = 'external input' AND explained
         THEN 'no producing op recorded; errors before this op explain it'::blame_reason
       WHEN role = 'external input'
         THEN 'no producing op recorded (parameter, data or an op the dump lacks) and nothing before it explains it'::blame_reason
       WHEN explained THEN 'explained by its input '::blame_reason
       WHEN collective THEN 'through the collective: the error comes from another rank (or the collective itself); compare every rank'::blame_reason
       WHEN is_module AND has_inner THEN 'inside the module, in code the dump does not record: its ops and inputs do not explain it'::blame_reason
       WHEN coalesce(input_err, 0) = 0 THEN 'error enters here: its inputs are equal'::blame_reason
       ELSE 'error enters here: beyond '::blame_reason
  END AS reason,
  link, candidates, via,
  greatest(output_err - coalesce(input_err, 0.0), 0.0) AS band
FROM (
  SELECT f.*,
    greatest(dtype_floor, coalesce(band, 0.0)) AS floor,
    CASE WHEN coalesce(band, 0.0) > dtype_floor THEN 'noise run'
         WHEN md5 THEN 'md5 (equal or not)'
         -- 'dtype ' and the floor's dtype without 'torch.', the commonest dtypes as constants
         WHEN floor_dtype = 'torch.float32' THEN 'dtype float32'
         WHEN floor_dtype = '<class ''int''>' THEN 'dtype <class ''int''>'
         WHEN floor_dtype = 'torch.float16' THEN 'dtype float16'
         WHEN floor_dtype = 'torch.bfloat16' THEN 'dtype bfloat16'
         ELSE 'dtype ' || replace(floor_dtype, 'torch.', '')
    END AS floor_source,
    output_err > floor_factor * greatest(dtype_floor, coalesce(band, 0.0))
      AS beyond_floor,
    -- explained by what its inputs bring; an external input: by any error before its op
    CASE WHEN role = 'external input'
         THEN output_err <= amp_limit * coalesce(prior_err, 0.0)
         WHEN role = 'output'
         THEN output_err <= amp_limit * coalesce(input_err, 0.0)
         ELSE true END AS explained
  FROM (
  SELECT rows.*,
    CASE WHEN md5 THEN 0.0 ELSE dtypes_floor END AS dtype_floor
  FROM (
  SELECT
    t.out_seq, t.op_seq, bo.op_name, t.npu_name,
    -- (a tensor row's io is input or output: blame_tensors keeps it as is_input; io, role and
    -- verdict are ENUMs, sql/compare/schema/40_blame.sql: their constants typed, a byte a row)
    CASE WHEN t.is_input THEN 'input'::blame_io ELSE 'output'::blame_io END AS io,
    t.dtype_floor AS dtypes_floor, t.floor_dtype,  -- (blame_tensors: the larger dtype floor)
    t.err AS output_err, t.err_kind,
    bo.is_module, bo.has_inner, bo.direction, bo.collective, bo.prior_err,
    t.link, t.candidates, t.producer_name, t.producer_err,
    t.own_output AND bo.direction = 'forward' AS in_place,
    CASE WHEN NOT t.is_input THEN bo.input_err
         WHEN t.own_output AND bo.direction = 'forward' THEN bo.input_err
         WHEN t.link IN ('external', 'constant') THEN NULL
         ELSE t.producer_err END AS input_err,
    CASE WHEN NOT t.is_input THEN bo.worst_input
         WHEN t.own_output AND bo.direction = 'forward' THEN bo.worst_input
         ELSE t.producer_name END AS via,
    CASE WHEN NOT t.is_input THEN 'output'::blame_role
         WHEN t.own_output AND bo.direction = 'forward' THEN 'in-place input'::blame_role
         WHEN t.link = 'constant' THEN 'constant input'::blame_role
         WHEN t.link = 'external' THEN 'external input'::blame_role
         ELSE 'linked input'::blame_role END AS role,
    bd.band, p.floor_factor, p.amp_limit, p.md5
  -- the compared rows (blame_tensors has their errors, dtype floors and links)
  FROM blame_tensors t
  JOIN blame_ops bo ON bo.op_seq = t.op_seq
  CROSS JOIN p
  -- (by name: a batch of pairs has no bands, msq.blame.run.batch_blame)
  LEFT JOIN (SELECT npu_name, max(band) AS band FROM blame_bands GROUP BY npu_name) bd
    ON bd.npu_name = t.npu_name
  WHERE t.out_seq IS NOT NULL
) rows
) f
) judged
