-- description: For each user api mapping entry, the name every NPU op of its MindSpore API would have as the PyTorch API (pt_api + the rest of the op name; without call counts under -f), and the same key for every bench op of its PyTorch API.
WITH s AS (SELECT * FROM settings),
e AS (SELECT DISTINCT entry, ms_api, pt_api FROM ms_user_api_args),
o AS (SELECT DISTINCT side, op_seq, api, rest FROM ms_user_api_rows)
SELECT e.entry, o.side, o.op_seq,
       CASE WHEN (SELECT fuzzy FROM s) THEN fuzzy_rename(e.pt_api || '.' || o.rest)
            ELSE e.pt_api || '.' || o.rest END AS key
FROM e
JOIN o ON (o.side = 'npu' AND o.api = e.ms_api) OR (o.side = 'bench' AND o.api = e.pt_api)
