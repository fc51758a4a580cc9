-- description: One line per recorded compare (what msq runs prints): when, label, mode, rank, step, counts and the advisor's first suspect.
SELECT
  compare_id,
  started_at,
  label,
  mode,
  rank,
  step,
  n_rows AS rows,
  n_red AS red,
  n_yellow AS yellow,
  suspect AS first_suspect
FROM compares
