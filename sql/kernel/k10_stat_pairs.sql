-- description: Kernel STATISTIC-mode pairing (spec §8.2): per (rank, step, compare key) the k-th NPU statistic.csv row by timestamp meets the k-th bench row; a one-sided key keeps an empty name on the other side.
-- Reads kernel_stat_rows(side, rank, step, seq, name, compare_key, ts, dtype, shape, max, min, mean, norm).
-- The compare key has no slot, so the inputs of one op pair up by timestamp, then file line order.
WITH ordered AS (
    SELECT *,
           row_number() OVER (PARTITION BY side, rank, step, compare_key ORDER BY ts, seq) - 1
               AS local_index
    FROM kernel_stat_rows
),
npu AS (SELECT * FROM ordered WHERE side = 'npu'),
bench AS (SELECT * FROM ordered WHERE side = 'bench')
SELECT
    coalesce(npu.rank, bench.rank) AS rank,
    coalesce(npu.step, bench.step) AS step,
    coalesce(npu.compare_key, bench.compare_key) AS compare_key,
    coalesce(npu.local_index, bench.local_index) AS local_index,
    npu.seq IS NOT NULL AS npu_exists,
    bench.seq IS NOT NULL AS bench_exists,
    coalesce(npu.name, '') AS npu_name,
    coalesce(bench.name, '') AS bench_name,
    npu.dtype AS npu_dtype, bench.dtype AS bench_dtype,
    npu.shape AS npu_shape, bench.shape AS bench_shape,
    npu.max AS npu_max, npu.min AS npu_min, npu.mean AS npu_mean, npu.norm AS npu_norm,
    bench.max AS bench_max, bench.min AS bench_min, bench.mean AS bench_mean,
    bench.norm AS bench_norm,
    row_number() OVER (
        PARTITION BY coalesce(npu.rank, bench.rank), coalesce(npu.step, bench.step)
        ORDER BY npu.seq IS NULL, coalesce(npu.ts, bench.ts), coalesce(npu.seq, bench.seq)
    ) AS row_order
FROM npu
FULL OUTER JOIN bench
    ON npu.rank = bench.rank AND npu.step = bench.step
   AND npu.compare_key = bench.compare_key AND npu.local_index = bench.local_index
