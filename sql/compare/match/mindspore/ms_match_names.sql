-- description: MindSpore NPU row names rewritten for matching (spec §3.7): -cm turns Cell into Module (and applies a cell YAML), -am maps Mint/MintFunctional and the built-in API table; in the default mode an API named by a user api YAML (-am FILE) whose PyTorch API is in the bench dump is left to that YAML (NULL here). Displayed names are unchanged.
WITH s AS (SELECT * FROM settings),
npu AS (
  SELECT t.row_seq, t.op_seq, t.row_in_op, t.disp_name, o.op_name
  FROM tensors t JOIN ops o ON o.side = 'npu' AND o.op_seq = t.op_seq
  WHERE t.side = 'npu'
),
cells AS (
  SELECT n.*,
    CASE WHEN (SELECT cell_mapping FROM s) THEN regexp_replace(n.disp_name, 'Cell', 'Module')
         ELSE n.disp_name END AS name1,
    -- the cell YAML key ({cell path}.{Class}): 1.1.0 cuts it out of each row name, which goes
    -- wrong for nested arguments (input.0.1); the default mode reads it off the Cell op's name
    CASE WHEN (SELECT compat FROM s)
         THEN regexp_replace(substr(n.disp_name, strpos(n.disp_name, '.') + 1), '(\.[^.]*){4}$', '')
         ELSE regexp_extract(n.op_name, '^Cell\.(.+)\.(forward|backward)\.\d+$', 1) END AS cell_key
  FROM npu n
),
cell_yaml AS (
  SELECT c.row_seq, c.op_seq, c.row_in_op, c.op_name,
    CASE WHEN m.bench_key IS NULL THEN c.name1
         WHEN (SELECT compat FROM s)
           THEN regexp_replace(c.name1, regexp_escape(m.npu_key), replace(m.bench_key, '\', '\\'))
         ELSE 'Module.' || m.bench_key || substr(c.name1, length('Module.' || m.npu_key) + 1)
    END AS name2
  FROM cells c
  LEFT JOIN mappings m
    ON m.kind = 'cell' AND (SELECT cell_mapping FROM s) AND m.npu_key = c.cell_key
       AND (c.name1 LIKE 'Module.%' OR (SELECT compat FROM s))
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
),
-- an entry whose PyTorch API the bench dump lacks cannot pair anything: it hides nothing
user_apis AS (
  SELECT DISTINCT ms_api FROM ms_user_api_args
  WHERE NOT (SELECT compat FROM s)
    AND pt_api IN (SELECT split_part(op_name, '.', 1) || '.' || split_part(op_name, '.', 2)
                   FROM ops WHERE side = 'bench')
)
SELECT y.row_seq,
  CASE WHEN (SELECT api_mapping FROM s)
            AND split_part(y.op_name, '.', 1) || '.' || split_part(y.op_name, '.', 2)
                IN (SELECT ms_api FROM user_apis) THEN NULL
       WHEN NOT (SELECT api_mapping FROM s) THEN y.name2
       WHEN a.prefix = 'Mint' THEN replace(y.name2, 'Mint', 'Torch')
       WHEN a.prefix = 'MintFunctional' THEN replace(y.name2, 'MintFunctional', 'Functional')
       WHEN a.pt_api IS NOT NULL THEN replace(y.name2, a.ms_api, a.pt_api)
       ELSE y.name2 END AS match_name
FROM cell_yaml y JOIN apis a USING (op_seq)
