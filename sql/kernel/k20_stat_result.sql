-- description: Kernel STATISTIC-mode result (spec §8.3): float32 absolute diffs of max/min/mean/L2, relative errors as "<float32 text>%", and Accuracy = No when MaxDiff / (max(npu max, bench max) + 1e-10) > 0.5; write it ordered by row_order.
-- Needs msq_f32_repr(FLOAT) -> VARCHAR (numpy's str() of a float32, registered by msq.kernel).
-- DuckDB orders NaN above every number, so each comparison that may see a NaN says so: a NaN
-- compares false in 1.1.0's numpy code.
WITH checked AS (
    SELECT *,
        CASE
            -- 1.1.0 meant to say this but tested the names after filling them with ''
            WHEN NOT (npu_exists AND bench_exists) THEN E'Dump file not found.\n'
            ELSE CASE WHEN npu_shape = '' OR bench_shape = ''
                          THEN E'This is type of scalar data, can not compare.\n'
                      WHEN npu_shape <> bench_shape THEN E'Tensor shapes do not match.\n'
                      ELSE '' END
              || CASE WHEN npu_dtype <> bench_dtype
                          THEN E'Dtype of NPU and bench Tensor do not match. Skipped.\n'
                      ELSE '' END
        END AS check_message
    FROM k10_stat_pairs
),
diffs AS (
    SELECT *,
        CASE WHEN check_message = '' THEN abs(npu_max - bench_max) END AS max_diff,
        CASE WHEN check_message = '' THEN abs(npu_min - bench_min) END AS min_diff,
        CASE WHEN check_message = '' THEN abs(npu_mean - bench_mean) END AS mean_diff,
        CASE WHEN check_message = '' THEN abs(npu_norm - bench_norm) END AS norm_diff,
        -- Python's max(a, b): b only when b > a (false whenever a NaN is involved)
        CASE WHEN NOT isnan(npu_max) AND NOT isnan(bench_max) AND bench_max > npu_max
             THEN bench_max ELSE npu_max END AS larger_max
    FROM checked
),
magnitudes AS (
    SELECT *, max_diff / (larger_max + CAST(1e-10 AS FLOAT)) AS magnitude FROM diffs
)
SELECT
    rank,
    step,
    row_order,
    npu_name AS "NPU Name",
    bench_name AS "Bench Name",
    npu_dtype AS "NPU Dtype",
    bench_dtype AS "Bench Dtype",
    npu_shape AS "NPU Tensor Shape",
    bench_shape AS "Bench Tensor Shape",
    npu_max AS "NPU max",
    npu_min AS "NPU min",
    npu_mean AS "NPU mean",
    npu_norm AS "NPU l2norm",
    bench_max AS "Bench max",
    bench_min AS "Bench min",
    bench_mean AS "Bench mean",
    bench_norm AS "Bench l2norm",
    CASE WHEN check_message <> '' THEN ''
         WHEN NOT isnan(magnitude) AND magnitude > 0.5 THEN 'No'
         ELSE 'Yes' END AS "Accuracy Reached or Not",
    check_message AS "Err_message",
    max_diff AS "Max diff",
    min_diff AS "Min diff",
    mean_diff AS "Mean diff",
    norm_diff AS "L2norm diff",
    -- diff / bench only for a positive bench, else the integer 0 (text "0%")
    CASE WHEN check_message <> '' THEN NULL
         WHEN NOT isnan(bench_max) AND bench_max > 0
             THEN msq_f32_repr(max_diff / bench_max * 100) || '%'
         ELSE '0%' END AS "MaxRelativeErr",
    CASE WHEN check_message <> '' THEN NULL
         WHEN NOT isnan(bench_min) AND bench_min > 0
             THEN msq_f32_repr(min_diff / bench_min * 100) || '%'
         ELSE '0%' END AS "MinRelativeErr",
    CASE WHEN check_message <> '' THEN NULL
         WHEN NOT isnan(bench_mean) AND bench_mean > 0
             THEN msq_f32_repr(mean_diff / bench_mean * 100) || '%'
         ELSE '0%' END AS "MeanRelativeErr",
    CASE WHEN check_message <> '' THEN NULL
         WHEN NOT isnan(bench_norm) AND bench_norm > 0
             THEN msq_f32_repr(norm_diff / bench_norm * 100) || '%'
         ELSE '0%' END AS "NormRelativeErr"
FROM magnitudes
