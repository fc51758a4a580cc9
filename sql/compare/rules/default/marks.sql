-- kind: mark
-- description: Red and yellow rows of the default mode: the verdicts' marks (sql/compare/rules/default/verdicts.sql, docs/rules.md), with the rule that fired.
SELECT out_seq, mark, rule AS rules FROM verdicts WHERE mark IS NOT NULL
