-- description: --compat msprobe-1.1 has no verdicts of msq's own (its marks are msprobe's, sql/compare/rules/compat/marks.sql): no rows, the columns of the default mode's verdicts.
SELECT NULL::BIGINT AS out_seq, NULL::VARCHAR AS mark, NULL::VARCHAR AS rule,
       NULL::VARCHAR AS reason, NULL::VARCHAR AS unmatched_reason, NULL::VARCHAR AS unmatched_kind
WHERE false
