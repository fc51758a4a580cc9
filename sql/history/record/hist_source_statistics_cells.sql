-- description: hist_source_statistics' rows from result_statistics where that is a table (--compat's, or a user's --sql-dir result): each cell's members as the plain columns stat_result holds ("<cell>" the number, the texts in the list cell_texts and the statistics' booleans in cell_bools, here on every row; union_extract is NULL for a member the cell does not hold), whether the row has any cell's text (has_cell_text), and the relative errors as history columns from each side's statistics (hist_rel_pct, hist_rel_pct_text).
SELECT c.* REPLACE (union_extract(c."Max diff", 'n') AS "Max diff",
                    union_extract(c."Min diff", 'n') AS "Min diff",
                    union_extract(c."Mean diff", 'n') AS "Mean diff",
                    union_extract(c."L2norm diff", 'n') AS "L2norm diff",
                    union_extract(c."NPU max", 'n') AS "NPU max",
                    union_extract(c."NPU min", 'n') AS "NPU min",
                    union_extract(c."NPU mean", 'n') AS "NPU mean",
                    union_extract(c."NPU l2norm", 'n') AS "NPU l2norm",
                    union_extract(c."Bench max", 'n') AS "Bench max",
                    union_extract(c."Bench min", 'n') AS "Bench min",
                    union_extract(c."Bench mean", 'n') AS "Bench mean",
                    union_extract(c."Bench l2norm", 'n') AS "Bench l2norm"),
       -- each cell's text and a statistic's boolean as stat_result's lists hold them
       -- (stat_result.sql), here on every row: the history's SELECT reads a member where the
       -- row's has_cell_text says it has a text, or where a statistic's number is NULL
       [union_extract(c."Max diff", 's'),
                   union_extract(c."Min diff", 's'),
                   union_extract(c."Mean diff", 's'),
                   union_extract(c."L2norm diff", 's'),
                   union_extract(c."NPU max", 's'),
                   union_extract(c."NPU min", 's'),
                   union_extract(c."NPU mean", 's'),
                   union_extract(c."NPU l2norm", 's'),
                   union_extract(c."Bench max", 's'),
                   union_extract(c."Bench min", 's'),
                   union_extract(c."Bench mean", 's'),
                   union_extract(c."Bench l2norm", 's')] AS cell_texts,
       [union_extract(c."NPU max", 'b'),
                   union_extract(c."NPU min", 'b'),
                   union_extract(c."NPU mean", 'b'),
                   union_extract(c."NPU l2norm", 'b'),
                   union_extract(c."Bench max", 'b'),
                   union_extract(c."Bench min", 'b'),
                   union_extract(c."Bench mean", 'b'),
                   union_extract(c."Bench l2norm", 'b')] AS cell_bools,
       -- whether the row has any cell's text (stat_result's has_cell_text)
       (union_extract(c."Max diff", 's') IS NOT NULL OR
        union_extract(c."Min diff", 's') IS NOT NULL OR
        union_extract(c."Mean diff", 's') IS NOT NULL OR
        union_extract(c."L2norm diff", 's') IS NOT NULL OR
        union_extract(c."NPU max", 's') IS NOT NULL OR
        union_extract(c."NPU min", 's') IS NOT NULL OR
        union_extract(c."NPU mean", 's') IS NOT NULL OR
        union_extract(c."NPU l2norm", 's') IS NOT NULL OR
        union_extract(c."Bench max", 's') IS NOT NULL OR
        union_extract(c."Bench min", 's') IS NOT NULL OR
        union_extract(c."Bench mean", 's') IS NOT NULL OR
        union_extract(c."Bench l2norm", 's') IS NOT NULL) AS has_cell_text,
       o.op_name, m.mark, m.rules AS mark_rules,
       hist_rel_pct(c.kind = 'matched', x.n_max, x.b_max) AS max_rel_pct,
       hist_rel_pct(c.kind = 'matched', x.n_min, x.b_min) AS min_rel_pct,
       hist_rel_pct(c.kind = 'matched', x.n_mean, x.b_mean) AS mean_rel_pct,
       hist_rel_pct(c.kind = 'matched', x.n_norm, x.b_norm) AS norm_rel_pct,
       hist_rel_pct_text(c.kind = 'matched', x.n_max, x.b_max) AS max_rel_pct_text,
       hist_rel_pct_text(c.kind = 'matched', x.n_min, x.b_min) AS min_rel_pct_text,
       hist_rel_pct_text(c.kind = 'matched', x.n_mean, x.b_mean) AS mean_rel_pct_text,
       hist_rel_pct_text(c.kind = 'matched', x.n_norm, x.b_norm) AS norm_rel_pct_text
FROM result_statistics c
LEFT JOIN hist_row_ops o USING (out_seq)
-- each side's four statistics as numbers (<stat>_num; NULL on an absent side), which the
-- relative errors are computed from
LEFT JOIN (SELECT r.out_seq,
                  n.max_num AS n_max, n.min_num AS n_min, n.mean_num AS n_mean, n.norm_num AS n_norm,
                  b.max_num AS b_max, b.min_num AS b_min, b.mean_num AS b_mean, b.norm_num AS b_norm
           FROM compare_rows r
           LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
           LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row) x USING (out_seq)
LEFT JOIN marks m USING (out_seq)
