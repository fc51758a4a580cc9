-- description: Blame, one row per compared row: where the error enters (blame_judged, its reason's text made from its kind). output_err is the row's own error (row_error); input_err what its inputs bring (an output row: the worst of its op's inputs, blame_ops; a linked input: its producer's error); floor the error the row's dtype (or the reference noise run) explains; verdict local (beyond floor_factor x floor and amp_limit x input_err), inherited (explained by the inputs), clean (within the floor). A collective op's output not explained on this rank is provisionally inherited: the history's blame view weighs the other ranks.
SELECT * REPLACE (
  blame_reason_text(reason, err_kind, via, (SELECT amp_limit FROM blame_params)) AS reason)
FROM blame_judged
