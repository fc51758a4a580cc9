-- description: The MindSpore user api mapping (-am FILE.yaml, spec §3.8.3) as one row per corresponding position: entry number, the two APIs, input or output, and the MindSpore and PyTorch positions.
WITH m AS (
  SELECT ord AS entry,
         regexp_extract(npu_key, '^(.+)\.(input|output)\.(\d+)$', ['api', 'io', 'pos']) AS n,
         regexp_extract(bench_key, '^(.+)\.(input|output)\.(\d+)$', ['api', 'io', 'pos']) AS b
  FROM mappings
  WHERE kind = 'api_user'
)
SELECT entry, n.api AS ms_api, b.api AS pt_api, n.io AS io,
       CAST(n.pos AS INTEGER) AS ms_pos, CAST(b.pos AS INTEGER) AS pt_pos
FROM m
