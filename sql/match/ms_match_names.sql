-- description: MindSpore NPU row names rewritten for matching (spec §3.7): -cm turns Cell into Module (and applies a cell YAML), -am maps Mint/MintFunctional and the built-in API table; displayed names are unchanged.
WITH s AS (SELECT * FROM settings),
npu AS (SELECT row_seq, op_seq, row_in_op, disp_name FROM tensors WHERE side = 'npu'),
cells AS (
  SELECT n.row_seq, n.op_seq, n.row_in_op,
    CASE WHEN (SELECT cell_mapping FROM s) THEN regexp_replace(n.disp_name, 'Cell', 'Module')
         ELSE n.disp_name END AS name1
  FROM npu n
),
cell_yaml AS (
  SELECT c.row_seq, c.op_seq, c.row_in_op,
    CASE WHEN m.bench_key IS NOT NULL
         THEN regexp_replace(c.name1, regexp_escape(m.npu_key), replace(m.bench_key, '\', '\\'))
         ELSE c.name1 END AS name2
  FROM cells c
  LEFT JOIN mappings m
    ON m.kind = 'cell' AND (SELECT cell_mapping FROM s)
       AND m.npu_key = regexp_replace(substr(c.name1, strpos(c.name1, '.') + 1), '(\.[^.]*){4}$', '')
),
first_rows AS (
  SELECT op_seq, arg_min(name2, row_in_op) AS first_name FROM cell_yaml GROUP BY op_seq
),
apis AS (
  SELECT f.op_seq, split_part(f.first_name, '.', 1) AS prefix,
         split_part(f.first_name, '.', 1) || '.' || split_part(f.first_name, '.', 2) AS ms_api,
         m.bench_key AS pt_api
  FROM first_rows f
  LEFT JOIN mappings m ON m.kind = 'api' AND m.npu_key =
    split_part(f.first_name, '.', 1) || '.' || split_part(f.first_name, '.', 2)
)
SELECT y.row_seq,
  CASE WHEN NOT (SELECT api_mapping FROM s) THEN y.name2
       WHEN a.prefix = 'Mint' THEN replace(y.name2, 'Mint', 'Torch')
       WHEN a.prefix = 'MintFunctional' THEN replace(y.name2, 'MintFunctional', 'Functional')
       WHEN a.pt_api IS NOT NULL THEN replace(y.name2, a.ms_api, a.pt_api)
       ELSE y.name2 END AS match_name
FROM cell_yaml y JOIN apis a USING (op_seq)
