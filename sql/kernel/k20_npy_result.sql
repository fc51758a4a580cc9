-- description: Kernel NPY-mode result (spec §8.3): the exact output columns per pair, with Accuracy (spec §4.3.7) from Cosine and MaxAbsErr; write it ordered by row_order.
-- Reads k10_npy_pairs and kernel_npy_metrics (computed by msq.kernel.metrics from the .npy files).
-- A pair stopped by a check (message ending in a newline) has empty metrics and an empty Accuracy.
SELECT
    p.rank,
    p.step,
    p.row_order,
    p.npu_name AS "NPU Name",
    p.bench_name AS "Bench Name",
    m.npu_dtype AS "NPU Dtype",
    m.bench_dtype AS "Bench Dtype",
    m.npu_shape AS "NPU Tensor Shape",
    m.bench_shape AS "Bench Tensor Shape",
    -- max/min of a bool tensor are booleans (TRUE/FALSE cells), every other statistic a number
    CASE WHEN m.npu_bool THEN union_value(b := m.npu_max <> 0)::UNION(b BOOLEAN, n DOUBLE)
         ELSE union_value(n := m.npu_max) END AS "NPU max",
    CASE WHEN m.npu_bool THEN union_value(b := m.npu_min <> 0)::UNION(b BOOLEAN, n DOUBLE)
         ELSE union_value(n := m.npu_min) END AS "NPU min",
    m.npu_mean AS "NPU mean",
    m.npu_norm AS "NPU l2norm",
    CASE WHEN m.bench_bool THEN union_value(b := m.bench_max <> 0)::UNION(b BOOLEAN, n DOUBLE)
         ELSE union_value(n := m.bench_max) END AS "Bench max",
    CASE WHEN m.bench_bool THEN union_value(b := m.bench_min <> 0)::UNION(b BOOLEAN, n DOUBLE)
         ELSE union_value(n := m.bench_min) END AS "Bench min",
    m.bench_mean AS "Bench mean",
    m.bench_norm AS "Bench l2norm",
    CASE
        WHEN NOT coalesce(m.computed, false) THEN ''
        WHEN m.cosine_label = 'unsupported' THEN 'None'
        -- 1.1.0 read the text "Nan" as float NaN, so a zero-norm side came out "Yes" (spec §4.3.7 BUG)
        WHEN m.cosine_label = 'Nan' THEN 'No'
        WHEN m.cosine < 0.99 AND m.max_abs > 0.001 THEN 'No'
        WHEN m.cosine < 0.9 OR m.max_abs > 1 THEN 'No'
        ELSE 'Yes'
    END AS "Accuracy Reached or Not",
    coalesce(m.check_message, '') || coalesce(m.metric_message, '') AS "Err_message",
    CASE WHEN m.cosine_label IS NOT NULL
         THEN union_value(s := m.cosine_label)::UNION(n DOUBLE, s VARCHAR)
         ELSE union_value(n := m.cosine) END AS "Cosine",
    m.max_abs AS "MaxAbsErr",
    CASE WHEN m.max_rel_label IS NOT NULL
         THEN union_value(s := m.max_rel_label)::UNION(n DOUBLE, s VARCHAR)
         ELSE union_value(n := m.max_rel) END AS "MaxRelativeErr",
    m.one_thousandth AS "One Thousandth Err Ratio",
    m.five_thousandths AS "Five Thousandths Err Ratio"
FROM k10_npy_pairs AS p
LEFT JOIN kernel_npy_metrics AS m
    ON m.rank = p.rank AND m.step = p.step
   AND m.compare_key = p.compare_key AND m.local_index = p.local_index
