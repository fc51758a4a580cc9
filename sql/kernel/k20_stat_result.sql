-- description: Kernel STATISTIC-mode result (spec §8.3): float32 absolute diffs of max/min/mean/L2, relative errors as "<text>%", and Accuracy = No when MaxDiff / (max(npu max, bench max) + 1e-10) > 0.5; write it ordered by row_order.
-- Number types follow 1.1.0 under its numpy 1.x (the msprobe baseline): the statistics are
-- float32, |n - b| and diff / bench stay float32, but "* 100" and "+ 1e-10" (Python numbers)
-- widen to float64. The relative text is Python's repr() of that float64, which is DuckDB's
-- DOUBLE -> VARCHAR text except for NaN's sign.
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
ratios AS (
    SELECT *,
        CAST(max_diff AS DOUBLE) / (CAST(larger_max AS DOUBLE) + 1e-10) AS magnitude,
        -- diff / bench only for a positive bench (else the integer 0: text "0%")
        CASE WHEN NOT isnan(bench_max) AND bench_max > 0
             THEN CAST(max_diff / bench_max AS DOUBLE) * 100 END AS max_rel,
        CASE WHEN NOT isnan(bench_min) AND bench_min > 0
             THEN CAST(min_diff / bench_min AS DOUBLE) * 100 END AS min_rel,
        CASE WHEN NOT isnan(bench_mean) AND bench_mean > 0
             THEN CAST(mean_diff / bench_mean AS DOUBLE) * 100 END AS mean_rel,
        CASE WHEN NOT isnan(bench_norm) AND bench_norm > 0
             THEN CAST(norm_diff / bench_norm AS DOUBLE) * 100 END AS norm_rel
    FROM diffs
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
    CASE WHEN check_message <> '' THEN NULL
         WHEN max_rel IS NULL THEN '0%'
         WHEN isnan(max_rel) THEN 'nan%'
         ELSE CAST(max_rel AS VARCHAR) || '%' END AS "MaxRelativeErr",
    CASE WHEN check_message <> '' THEN NULL
         WHEN min_rel IS NULL THEN '0%'
         WHEN isnan(min_rel) THEN 'nan%'
         ELSE CAST(min_rel AS VARCHAR) || '%' END AS "MinRelativeErr",
    CASE WHEN check_message <> '' THEN NULL
         WHEN mean_rel IS NULL THEN '0%'
         WHEN isnan(mean_rel) THEN 'nan%'
         ELSE CAST(mean_rel AS VARCHAR) || '%' END AS "MeanRelativeErr",
    CASE WHEN check_message <> '' THEN NULL
         WHEN norm_rel IS NULL THEN '0%'
         WHEN isnan(norm_rel) THEN 'nan%'
         ELSE CAST(norm_rel AS VARCHAR) || '%' END AS "NormRelativeErr"
FROM ratios
