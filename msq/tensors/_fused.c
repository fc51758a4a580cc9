/*
 * msq.tensors._fused: every real-data metric aggregate of a tensor pair in ONE pass over memory.
 *
 * The numpy kernel (metrics.py) makes ~20 passes per chunk; this loop reads each element pair once
 * and produces the same aggregates: the three dot products, the largest |n-b|, the largest relative
 * error |(n'-b')/b'| (n', b': after the epsilon shift where bench is 0) in the tensors' own dtype,
 * and the counts of relative errors below the 1/1000 and 5/1000 thresholds.
 *
 * Exactness: every elementwise value is the one numpy (and so msprobe 1.1.0) computes: float32
 * arithmetic for float32/bfloat16 pairs, float16 arithmetic for float16 pairs done as numpy does it
 * (widen to float32, operate, round to float16 to nearest even), float64 for the dot products and
 * the absolute difference. Maxima and counts are therefore identical to the numpy kernel. The dot
 * products are summed in a fixed order of our own (8 interleaved lanes, combined pairwise), not
 * BLAS's, so Cosine may differ from a single np.dot in the last bits; metrics.py only uses this
 * kernel for tensors larger than one chunk, where the numpy kernel is not bit-exact either.
 *
 * Determinism: the AVX2/F16C loop and the portable loop perform the same IEEE operations in the
 * same order (lane j of the 8 accumulators takes elements i with i % 8 == j), and the build
 * disables floating-point contraction (-ffp-contract=off), so results do not depend on the CPU.
 *
 * Elements that are inf or NaN are not handled here: the call reports them and the caller redoes
 * that chunk with the numpy kernel, which applies msprobe's position check.
 *
 * Interface (buffers are C-contiguous, native byte order, same element count):
 *   stats(npu, bench, npu_kind, bench_kind, compat, eps, t1, t5, base) -> tuple | None
 *     kinds: 0 float32, 1 bfloat16 (raw uint16 bits), 2 float16 (raw uint16 bits);
 *     float16 must pair with float16, float32/bfloat16 with float32/bfloat16.
 *     eps: the bench dtype's machine epsilon; t1, t5: 0.001 and 0.005 in the compute dtype.
 *     base: flat index of the buffers' first element in the whole tensor (for the content hash).
 *     Returns (dot_nb, dot_nn, dot_bb, max_abs, max_rel, rel_nan, c1, c5, had_zero, sq_diff,
 *     hash_npu, hash_bench), or None when an element is inf or NaN (the caller then uses the
 *     numpy kernel for these elements).
 *   hash_words(words, base) -> int: the content hash of a uint32 word buffer (see below).
 *
 * sq_diff is the sum of squared differences of the values the dot products see (blame's
 * relative L2 error), summed in the dot products' lanes and order.
 *
 * Content hash (blame links an op's input to the earlier output with the same content): every
 * value is taken as a 32-bit word (the float32 bits of float32, bfloat16 and float16 values; the
 * numpy kernel takes wider dtypes as several words), and the hash of a tensor is
 *     H = sum over words t of  M(t / HASH_BLOCK) * R[t % HASH_BLOCK] * word_t   (mod 2^64)
 * with R a fixed table of 32-bit constants and M a 64-bit mix of the block number (splitmix64).
 * A sum of per-word terms: chunks and ranges hashed apart add up to the hash of the whole, in any
 * order, and the numpy kernel (metrics.py) computes the same number. It identifies content, it is
 * not a cryptographic digest.
 *   isa() -> "avx2" | "generic";  use_generic(flag) forces the portable loop (tests).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../_source_crc.h"  /* msq_add_source_crc: SOURCE_CRC, see msq/cext.py */

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#define MSQ_POSIX_IO 1
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#define MSQ_POSIX_IO 0
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define MSQ_X86 1
#include <immintrin.h>
#else
#define MSQ_X86 0
#endif

enum { KIND_F32 = 0, KIND_BF16 = 1, KIND_F16 = 2 };
#define LANES 8
/* lane counters are int32 in the vector loop: flush them at least this often (elements) */
#define FLUSH_ELEMS (1 << 24)
/* words per block of the content hash (a multiple of LANES) */
#define HASH_BLOCK 4096

typedef struct {
    double nb[LANES], nn[LANES], bb[LANES], ss[LANES];
    double amax;
    float rmax;
    int rnan, bad, zero;
    int64_t c1, c5;
    /* content hash: running totals, the open block's sums, its number and the position in it */
    uint64_t hn, hb, blk_n, blk_b, q;
    Py_ssize_t j;
    int hash_here; /* 0: the hash is taken by a separate pass (unaligned base) */
} Acc;

static void acc_init(Acc *a, Py_ssize_t base) {
    memset(a, 0, sizeof(*a));
    a->amax = 0.0; /* |x| >= 0, and a pair reaching here has at least one element */
    a->rmax = -INFINITY;
    a->q = (uint64_t)(base / HASH_BLOCK);
    a->j = base % HASH_BLOCK;
    a->hash_here = (base % LANES) == 0;
}

/* ------------------------------------------------------------------------------ content hash */

/* one word more than a block: the AVX-512 loop loads the odd multipliers one word on */
static uint32_t hash_r[HASH_BLOCK + 1];

static uint32_t fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static void hash_init(void) {
    for (uint32_t j = 0; j < HASH_BLOCK; j++) hash_r[j] = fmix32(j * 0x9e3779b9u + 0x7f4a7c15u);
}

static uint64_t block_mult(uint64_t q) { /* splitmix64 */
    uint64_t z = q + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* close the open block: its sums, weighted by the block's multiplier, join the totals */
static inline void hash_flush(Acc *a) {
    uint64_t m = block_mult(a->q);
    a->hn += m * a->blk_n;
    a->hb += m * a->blk_b;
    a->blk_n = a->blk_b = 0;
    a->q++;
    a->j = 0;
}

static inline void hash_word(Acc *a, uint32_t wn, uint32_t wb) {
    uint64_t r = hash_r[a->j];
    a->blk_n += r * wn;
    a->blk_b += r * wb;
    if (++a->j == HASH_BLOCK) hash_flush(a);
}

static inline uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The hash of one buffer of words starting at flat word index `base` (any alignment). */
static uint64_t hash_words_at(const uint32_t *w, Py_ssize_t k, Py_ssize_t base) {
    Acc a;
    acc_init(&a, base);
    for (Py_ssize_t i = 0; i < k; i++) hash_word(&a, w[i], 0);
    if (a.j) hash_flush(&a);
    return a.hn;
}

/* ------------------------------------------------------------------ float16 <-> float32 (portable) */

static float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
    if (e == 0) {
        float v = ldexpf((float)m, -24); /* zero or subnormal: exact */
        return sign ? -v : v;
    }
    if (e == 31)
        bits = sign | 0x7f800000u | (m << 13);
    else
        bits = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* float32 -> float16 bits, round to nearest even, overflow to inf (IEEE, as numpy's conversion). */
static uint16_t f2h(float value) {
    uint32_t f;
    memcpy(&f, &value, 4);
    uint32_t sign = f & 0x80000000u;
    f ^= sign;
    uint16_t out;
    if (f >= (143u << 23)) {                   /* >= 2^16 (or inf/NaN): inf or NaN */
        out = (f > 0x7f800000u) ? 0x7e00 : 0x7c00;
    } else if (f < (113u << 23)) {             /* below 2^-14: float16 subnormal or zero */
        const uint32_t magic_bits = 126u << 23; /* 0.5: aligns the subnormal ulp, rounds by FPU */
        float v, magic;
        memcpy(&v, &f, 4);
        memcpy(&magic, &magic_bits, 4);
        v += magic;
        uint32_t vb;
        memcpy(&vb, &v, 4);
        out = (uint16_t)(vb - magic_bits);
    } else {                                    /* normal: rebias, round to nearest even */
        uint32_t odd = (f >> 13) & 1u;
        f += (uint32_t)(15 - 127) * (1u << 23) + 0xfffu + odd;
        out = (uint16_t)(f >> 13);              /* a carry into the exponent rounds up to inf */
    }
    return (uint16_t)(out | (sign >> 16));
}

static float round_half(float x) { return h2f(f2h(x)); }

static float bf16_to_f(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float load_value(const void *p, Py_ssize_t i, int kind) {
    switch (kind) {
    case KIND_F32: return ((const float *)p)[i];
    case KIND_BF16: return bf16_to_f(((const uint16_t *)p)[i]);
    default: return h2f(((const uint16_t *)p)[i]);
    }
}

/* --------------------------------------------------------------------------- the portable loop */

/* One element pair, into lane `lane`. The reference semantics; the vector loop mirrors it. */
static inline void step(Acc *a, int lane, float n, float b, int half, int compat, float eps,
                        float t1, float t5) {
    if (!isfinite(n) || !isfinite(b)) a->bad = 1;
    int zero = (b == 0.0f);
    a->zero |= zero;
    float e = zero ? eps : 0.0f; /* numpy adds eps*[b==0] to every element, as here */
    float bs = b + e;
    float ns = n + e;
    if (half) ns = round_half(ns);
    float d = ns - bs;
    if (half) d = round_half(d);
    float q = d / bs;
    if (half) q = round_half(q);
    float r = fabsf(q);
    if (r != r)
        a->rnan = 1;
    else if (r > a->rmax)
        a->rmax = r;
    a->c1 += (r < t1);
    a->c5 += (r < t5);
    double dn = compat ? (double)ns : (double)n;
    double db = compat ? (double)bs : (double)b;
    a->nb[lane] += dn * db;
    a->nn[lane] += dn * dn;
    a->bb[lane] += db * db;
    double sd = dn - db;
    a->ss[lane] += sd * sd;
    double ad = fabs(sd);
    if (ad > a->amax) a->amax = ad;
    if (a->hash_here) hash_word(a, float_bits(n), float_bits(b));
}

static void run_generic(Acc *a, const void *np_, const void *bp, Py_ssize_t k, int nk, int bk,
                        int compat, float eps, float t1, float t5) {
    int half = (bk == KIND_F16);
    for (Py_ssize_t i = 0; i < k; i++)
        step(a, (int)(i % LANES), load_value(np_, i, nk), load_value(bp, i, bk), half, compat, eps,
             t1, t5);
}

/* ---------------------------------------------------------------------- the AVX2 + F16C loop */
#if MSQ_X86
/* Software prefetch PREFETCH_BYTES ahead of both streams. The hardware prefetchers stop at every
 * 4 KiB page boundary; without this the loop waits on memory at each new page and runs at about
 * half its in-cache speed on data streamed from the page cache (measured here: float32 pairs 1.5
 * -> 0.65 ns per pair; any distance from 1 to 16 KiB did as well). A prefetch never faults, so
 * reading ahead past the end of a buffer or a mapping is harmless. */
#define PREFETCH_BYTES 4096

static inline Py_ssize_t kind_bytes(int kind) { return kind == KIND_F32 ? 4 : 2; }

/* a macro, not a function: a plain inline function's prefetches were dropped when GCC 12 inlined
 * it into the AVX-512 loops (target attribute), leaving them at memory speed */
#define PREFETCH_AHEAD(np_, bp, i, nsz, bsz)                                                       \
    do {                                                                                           \
        __builtin_prefetch((const char *)(np_) + (i) * (nsz) + PREFETCH_BYTES, 0, 3);              \
        __builtin_prefetch((const char *)(bp) + (i) * (bsz) + PREFETCH_BYTES, 0, 3);               \
    } while (0)

#define AVX_TARGET __attribute__((target("avx2,f16c")))

AVX_TARGET static inline __m256 load8(const void *p, Py_ssize_t i, int kind) {
    switch (kind) {
    case KIND_F32: return _mm256_loadu_ps((const float *)p + i);
    case KIND_BF16: {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    default: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    }
}

AVX_TARGET static inline __m256 round_half8(__m256 x) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

AVX_TARGET static inline double hmax_pd(__m256d v) {
    double t[4];
    _mm256_storeu_pd(t, v);
    double m = t[0];
    for (int j = 1; j < 4; j++)
        if (t[j] > m) m = t[j];
    return m;
}

AVX_TARGET static inline float hmax_ps(__m256 v) {
    float t[8];
    _mm256_storeu_ps(t, v);
    float m = t[0];
    for (int j = 1; j < 8; j++)
        if (t[j] > m) m = t[j];
    return m;
}

AVX_TARGET static inline int64_t hsum_epi32(__m256i v) {
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, v);
    int64_t s = 0;
    for (int j = 0; j < 8; j++) s += t[j];
    return s;
}

AVX_TARGET static inline uint64_t hsum_epi64(__m256i v) {
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)t, v);
    return (t[0] + t[1]) + (t[2] + t[3]);
}

AVX_TARGET static void run_avx2(Acc *a, const void *np_, const void *bp, Py_ssize_t k, int nk,
                                int bk, int compat, float eps, float t1, float t5) {
    const int half = (bk == KIND_F16);
    const __m256 zero_ps = _mm256_setzero_ps(), eps8 = _mm256_set1_ps(eps);
    const __m256 t1v = _mm256_set1_ps(t1), t5v = _mm256_set1_ps(t5);
    const __m256 abs_ps = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256d abs_pd = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
    const __m256i expmask = _mm256_set1_epi32(0x7f800000);
    __m256d nb_lo = _mm256_loadu_pd(a->nb), nb_hi = _mm256_loadu_pd(a->nb + 4);
    __m256d nn_lo = _mm256_loadu_pd(a->nn), nn_hi = _mm256_loadu_pd(a->nn + 4);
    __m256d bb_lo = _mm256_loadu_pd(a->bb), bb_hi = _mm256_loadu_pd(a->bb + 4);
    __m256d ss_lo = _mm256_loadu_pd(a->ss), ss_hi = _mm256_loadu_pd(a->ss + 4);
    __m256d amax = _mm256_set1_pd(a->amax);
    /* the open hash block's sums, as four 64-bit lanes per side (even and odd words added) */
    const int hash_here = a->hash_here;
    __m256i hsn = _mm256_setzero_si256(), hsb = _mm256_setzero_si256();
    __m256 rmax = _mm256_set1_ps(a->rmax);
    __m256 nanacc = zero_ps, zeroacc = zero_ps;
    __m256i badacc = _mm256_setzero_si256(), c1 = _mm256_setzero_si256(),
            c5 = _mm256_setzero_si256();
    Py_ssize_t body = k - k % LANES, since_flush = 0;
    const Py_ssize_t nsz = kind_bytes(nk), bsz = kind_bytes(bk);
    for (Py_ssize_t i = 0; i < body; i += LANES) {
        if (i % 16 == 0) PREFETCH_AHEAD(np_, bp, i, nsz, bsz);
        __m256 n = load8(np_, i, nk), b = load8(bp, i, bk);
        /* inf/NaN: exponent bits all ones */
        badacc = _mm256_or_si256(
            badacc, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(n), expmask), expmask));
        badacc = _mm256_or_si256(
            badacc, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(b), expmask), expmask));
        __m256 z = _mm256_cmp_ps(b, zero_ps, _CMP_EQ_OQ);
        zeroacc = _mm256_or_ps(zeroacc, z);
        __m256 e = _mm256_and_ps(z, eps8);
        __m256 bs = _mm256_add_ps(b, e);
        __m256 ns = _mm256_add_ps(n, e);
        __m256 d, q;
        if (half) {
            ns = round_half8(ns);
            d = round_half8(_mm256_sub_ps(ns, bs));
            q = round_half8(_mm256_div_ps(d, bs));
        } else {
            d = _mm256_sub_ps(ns, bs);
            q = _mm256_div_ps(d, bs);
        }
        __m256 r = _mm256_and_ps(q, abs_ps);
        nanacc = _mm256_or_ps(nanacc, _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
        rmax = _mm256_max_ps(r, rmax); /* a NaN r yields the second operand: NaN is skipped */
        c1 = _mm256_sub_epi32(c1, _mm256_castps_si256(_mm256_cmp_ps(r, t1v, _CMP_LT_OQ)));
        c5 = _mm256_sub_epi32(c5, _mm256_castps_si256(_mm256_cmp_ps(r, t5v, _CMP_LT_OQ)));
        __m256 dn = compat ? ns : n, db = compat ? bs : b;
        __m256d n_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(dn));
        __m256d n_hi = _mm256_cvtps_pd(_mm256_extractf128_ps(dn, 1));
        __m256d b_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(db));
        __m256d b_hi = _mm256_cvtps_pd(_mm256_extractf128_ps(db, 1));
        nb_lo = _mm256_add_pd(nb_lo, _mm256_mul_pd(n_lo, b_lo));
        nb_hi = _mm256_add_pd(nb_hi, _mm256_mul_pd(n_hi, b_hi));
        nn_lo = _mm256_add_pd(nn_lo, _mm256_mul_pd(n_lo, n_lo));
        nn_hi = _mm256_add_pd(nn_hi, _mm256_mul_pd(n_hi, n_hi));
        bb_lo = _mm256_add_pd(bb_lo, _mm256_mul_pd(b_lo, b_lo));
        bb_hi = _mm256_add_pd(bb_hi, _mm256_mul_pd(b_hi, b_hi));
        amax = _mm256_max_pd(_mm256_and_pd(_mm256_sub_pd(n_lo, b_lo), abs_pd), amax);
        __m256d sd_lo = _mm256_sub_pd(n_lo, b_lo), sd_hi = _mm256_sub_pd(n_hi, b_hi);
        ss_lo = _mm256_add_pd(ss_lo, _mm256_mul_pd(sd_lo, sd_lo));
        ss_hi = _mm256_add_pd(ss_hi, _mm256_mul_pd(sd_hi, sd_hi));
        amax = _mm256_max_pd(_mm256_and_pd(sd_lo, abs_pd), amax);
        amax = _mm256_max_pd(_mm256_and_pd(sd_hi, abs_pd), amax);
        if (hash_here) {
            /* 32x32 -> 64-bit products: even words, then odd words shifted down */
            __m256i rv = _mm256_loadu_si256((const __m256i *)(hash_r + a->j));
            __m256i ro = _mm256_srli_epi64(rv, 32);
            __m256i wn = _mm256_castps_si256(n), wb = _mm256_castps_si256(b);
            hsn = _mm256_add_epi64(hsn, _mm256_mul_epu32(wn, rv));
            hsn = _mm256_add_epi64(hsn, _mm256_mul_epu32(_mm256_srli_epi64(wn, 32), ro));
            hsb = _mm256_add_epi64(hsb, _mm256_mul_epu32(wb, rv));
            hsb = _mm256_add_epi64(hsb, _mm256_mul_epu32(_mm256_srli_epi64(wb, 32), ro));
            a->j += LANES;
            if (a->j == HASH_BLOCK) {
                a->blk_n += hsum_epi64(hsn);
                a->blk_b += hsum_epi64(hsb);
                hsn = hsb = _mm256_setzero_si256();
                hash_flush(a);
            }
        }
        since_flush += LANES;
        if (since_flush >= FLUSH_ELEMS) {
            a->c1 += hsum_epi32(c1);
            a->c5 += hsum_epi32(c5);
            c1 = c5 = _mm256_setzero_si256();
            since_flush = 0;
        }
    }
    a->c1 += hsum_epi32(c1);
    a->c5 += hsum_epi32(c5);
    _mm256_storeu_pd(a->nb, nb_lo);
    _mm256_storeu_pd(a->nb + 4, nb_hi);
    _mm256_storeu_pd(a->nn, nn_lo);
    _mm256_storeu_pd(a->nn + 4, nn_hi);
    _mm256_storeu_pd(a->bb, bb_lo);
    _mm256_storeu_pd(a->bb + 4, bb_hi);
    _mm256_storeu_pd(a->ss, ss_lo);
    _mm256_storeu_pd(a->ss + 4, ss_hi);
    a->blk_n += hsum_epi64(hsn);
    a->blk_b += hsum_epi64(hsb);
    double am = hmax_pd(amax);
    if (am > a->amax) a->amax = am;
    float rm = hmax_ps(rmax);
    if (rm > a->rmax) a->rmax = rm;
    if (_mm256_movemask_ps(nanacc)) a->rnan = 1;
    if (_mm256_movemask_ps(zeroacc)) a->zero = 1;
    if (!_mm256_testz_si256(badacc, badacc)) a->bad = 1;
    /* the tail goes through the portable step, into the same lanes */
    for (Py_ssize_t i = body; i < k; i++)
        step(a, (int)(i % LANES), load_value(np_, i, nk), load_value(bp, i, bk), half, compat, eps,
             t1, t5);
}

/* ------------------------------------------------------------------- the AVX-512 loop (16 wide)
 * The same IEEE operations as step(), 16 elements at a time; each half of 8 feeds the 8 double
 * lanes in element order (elements i..i+7, then i+8..i+15), so every lane sums exactly what and
 * in the order the portable loop does. Maxima, counts and hash sums are order-free.
 *
 * Two checks of the 8-wide loop are implied here instead of tested per element:
 *   - inf/NaN: a lane of the n*n or b*b sums is not finite exactly when an element was inf or
 *     NaN (a finite float32 squared is < 2^256 in double, so finite sums never overflow; the
 *     epsilon shift keeps finite values finite, inf and NaN as they are), checked once per call;
 *   - a NaN relative error: with finite inputs, bs is never 0 (a zero bench gets epsilon), so
 *     d / bs is finite or +-inf and never NaN: rnan stays 0 whenever the result is used (a call
 *     that saw an inf or NaN returns None).
 * Each (npu kind, bench kind, compat) is compiled as its own loop (always_inline + constants). */
#define AVX512_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,f16c,fma,popcnt")))

AVX512_TARGET static inline __m512 load16(const void *p, Py_ssize_t i, int kind) {
    if (kind == KIND_F32) return _mm512_loadu_ps((const float *)p + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i));
    if (kind == KIND_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

AVX512_TARGET static inline __m512 round_half16(__m512 x) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

AVX512_TARGET static inline __m256 hi_ps(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

AVX512_TARGET static inline int all_finite_pd(__m512d v) {
    /* inf and NaN: exponent bits all ones */
    const __m512i expmask = _mm512_set1_epi64(0x7ff0000000000000LL);
    __m512i bits = _mm512_and_si512(_mm512_castpd_si512(v), expmask);
    return _mm512_cmpeq_epi64_mask(bits, expmask) == 0;
}

AVX512_TARGET __attribute__((always_inline)) static inline void
body_avx512(Acc *a, const void *np_, const void *bp, Py_ssize_t k, const int nk, const int bk,
            const int compat, float eps, float t1, float t5) {
    const int half = (bk == KIND_F16);
    Py_ssize_t i = 0;
    /* the hash block position advances 16 words a step: start it on a multiple of 16 */
    if (a->hash_here && (a->j % 16) != 0)
        for (; i < LANES && i < k; i++)
            step(a, (int)(i % LANES), load_value(np_, i, nk), load_value(bp, i, bk), half, compat,
                 eps, t1, t5);
    const __m512 zero_ps = _mm512_setzero_ps(), eps16 = _mm512_set1_ps(eps);
    const __m512 t1v = _mm512_set1_ps(t1), t5v = _mm512_set1_ps(t5);
    __m512d nb = _mm512_loadu_pd(a->nb), nn = _mm512_loadu_pd(a->nn);
    __m512d bb = _mm512_loadu_pd(a->bb), ss = _mm512_loadu_pd(a->ss);
    __m512d amax = _mm512_set1_pd(a->amax);
    __m512 rmax = _mm512_set1_ps(a->rmax);
    __m512i hsn = _mm512_setzero_si512(), hsb = _mm512_setzero_si512();
    const int hash_here = a->hash_here;
    __mmask16 zeros = 0;
    uint64_t c1 = 0, c5 = 0;
    Py_ssize_t body = i + (k - i) / 16 * 16;
    const Py_ssize_t nsz = kind_bytes(nk), bsz = kind_bytes(bk);
    for (; i < body; i += 16) {
        PREFETCH_AHEAD(np_, bp, i, nsz, bsz);
        __m512 n = load16(np_, i, nk), b = load16(bp, i, bk);
        __mmask16 z = _mm512_cmp_ps_mask(b, zero_ps, _CMP_EQ_OQ);
        zeros |= z;
        /* eps added where bench is 0; elsewhere b and n as they are (the portable step adds +0
         * there, which only turns a -0 npu into +0: no sum, difference or maximum below sees it) */
        __m512 bs = _mm512_mask_add_ps(b, z, b, eps16);
        __m512 ns = _mm512_mask_add_ps(n, z, n, eps16);
        __m512 d, q;
        if (half) {
            /* a half value is its own rounding: only n + eps needs rounding back to half */
            if (z) ns = round_half16(ns);
            d = round_half16(_mm512_sub_ps(ns, bs));
            q = round_half16(_mm512_div_ps(d, bs));
        } else {
            d = _mm512_sub_ps(ns, bs);
            q = _mm512_div_ps(d, bs);
        }
        __m512 r = _mm512_abs_ps(q);
        rmax = _mm512_max_ps(r, rmax);
        c1 += (uint64_t)_mm_popcnt_u32(_cvtmask16_u32(_mm512_cmp_ps_mask(r, t1v, _CMP_LT_OQ)));
        c5 += (uint64_t)_mm_popcnt_u32(_cvtmask16_u32(_mm512_cmp_ps_mask(r, t5v, _CMP_LT_OQ)));
        __m512 dn = compat ? ns : n, db = compat ? bs : b;
        __m512d n_lo = _mm512_cvtps_pd(_mm512_castps512_ps256(dn));
        __m512d n_hi = _mm512_cvtps_pd(hi_ps(dn));
        __m512d b_lo = _mm512_cvtps_pd(_mm512_castps512_ps256(db));
        __m512d b_hi = _mm512_cvtps_pd(hi_ps(db));
        /* the product of two floats is exact in double (24 + 24 bits): a fused multiply-add
         * rounds once, where the product and the sum did, so these sums are the portable
         * step's bit for bit (the difference below is not exact: its square stays mul + add) */
        nb = _mm512_fmadd_pd(n_lo, b_lo, nb);
        nb = _mm512_fmadd_pd(n_hi, b_hi, nb);
        nn = _mm512_fmadd_pd(n_lo, n_lo, nn);
        nn = _mm512_fmadd_pd(n_hi, n_hi, nn);
        bb = _mm512_fmadd_pd(b_lo, b_lo, bb);
        bb = _mm512_fmadd_pd(b_hi, b_hi, bb);
        __m512d sd_lo = _mm512_sub_pd(n_lo, b_lo), sd_hi = _mm512_sub_pd(n_hi, b_hi);
        ss = _mm512_add_pd(ss, _mm512_mul_pd(sd_lo, sd_lo));
        ss = _mm512_add_pd(ss, _mm512_mul_pd(sd_hi, sd_hi));
        /* vrangepd 0x0B: the larger magnitude, sign cleared (amax is >= 0): max(|sd|, amax) */
        amax = _mm512_range_pd(sd_lo, amax, 0x0B);
        amax = _mm512_range_pd(sd_hi, amax, 0x0B);
        if (hash_here) {
            /* 32x32 -> 64-bit products: even words, then odd words shifted down; the odd
             * multipliers are loaded one word on, where vpmuludq reads them (low halves) */
            __m512i rv = _mm512_loadu_si512((const void *)(hash_r + a->j));
            __m512i ro = _mm512_loadu_si512((const void *)(hash_r + a->j + 1));
            __m512i wn = _mm512_castps_si512(n), wb = _mm512_castps_si512(b);
            hsn = _mm512_add_epi64(hsn, _mm512_mul_epu32(wn, rv));
            hsn = _mm512_add_epi64(hsn, _mm512_mul_epu32(_mm512_srli_epi64(wn, 32), ro));
            hsb = _mm512_add_epi64(hsb, _mm512_mul_epu32(wb, rv));
            hsb = _mm512_add_epi64(hsb, _mm512_mul_epu32(_mm512_srli_epi64(wb, 32), ro));
            a->j += 16;
            if (a->j == HASH_BLOCK) {
                a->blk_n += (uint64_t)_mm512_reduce_add_epi64(hsn);
                a->blk_b += (uint64_t)_mm512_reduce_add_epi64(hsb);
                hsn = hsb = _mm512_setzero_si512();
                hash_flush(a);
            }
        }
    }
    if (!all_finite_pd(nn) || !all_finite_pd(bb)) a->bad = 1;
    a->c1 += (int64_t)c1;
    a->c5 += (int64_t)c5;
    _mm512_storeu_pd(a->nb, nb);
    _mm512_storeu_pd(a->nn, nn);
    _mm512_storeu_pd(a->bb, bb);
    _mm512_storeu_pd(a->ss, ss);
    a->blk_n += (uint64_t)_mm512_reduce_add_epi64(hsn);
    a->blk_b += (uint64_t)_mm512_reduce_add_epi64(hsb);
    double am = _mm512_reduce_max_pd(amax);
    if (am > a->amax) a->amax = am;
    float rm = _mm512_reduce_max_ps(rmax);
    if (rm > a->rmax) a->rmax = rm;
    if (zeros) a->zero = 1;
    /* the tail goes through the portable step, into the same lanes */
    for (; i < k; i++)
        step(a, (int)(i % LANES), load_value(np_, i, nk), load_value(bp, i, bk), half, compat, eps,
             t1, t5);
}

#define BODY512(NK, BK)                                                                            \
    AVX512_TARGET static void run512_##NK##_##BK(Acc *a, const void *np_, const void *bp,           \
                                                 Py_ssize_t k, int compat, float eps, float t1,    \
                                                 float t5) {                                       \
        if (compat)                                                                                \
            body_avx512(a, np_, bp, k, KIND_##NK, KIND_##BK, 1, eps, t1, t5);                      \
        else                                                                                       \
            body_avx512(a, np_, bp, k, KIND_##NK, KIND_##BK, 0, eps, t1, t5);                      \
    }
BODY512(F32, F32)
BODY512(F32, BF16)
BODY512(BF16, F32)
BODY512(BF16, BF16)
BODY512(F16, F16)

static void run_avx512(Acc *a, const void *np_, const void *bp, Py_ssize_t k, int nk, int bk,
                       int compat, float eps, float t1, float t5) {
    if (nk == KIND_F16)
        run512_F16_F16(a, np_, bp, k, compat, eps, t1, t5);
    else if (nk == KIND_F32)
        (bk == KIND_F32 ? run512_F32_F32 : run512_F32_BF16)(a, np_, bp, k, compat, eps, t1, t5);
    else
        (bk == KIND_F32 ? run512_BF16_F32 : run512_BF16_BF16)(a, np_, bp, k, compat, eps, t1, t5);
}
#endif

/* ------------------------------------------------------------------------------ module glue */

enum { ISA_GENERIC = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };
static int isa_cap = ISA_AVX512; /* the best loop allowed (use_isa / use_generic: tests) */

static int cpu_isa(void) {
#if MSQ_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("f16c") && __builtin_cpu_supports("popcnt"))
        return ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return ISA_AVX2;
#endif
    return ISA_GENERIC;
}

static int active_isa(void) {
    int have = cpu_isa();
    return have < isa_cap ? have : isa_cap;
}

static const char *ISA_NAMES[] = {"generic", "avx2", "avx512"};

static double lane_sum(const double *v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

static Py_ssize_t kind_size(int kind) { return kind == KIND_F32 ? 4 : 2; }

static PyObject *fused_stats(PyObject *self, PyObject *args) {
    Py_buffer nbuf, bbuf;
    int nk, bk, compat;
    float eps, t1, t5;
    Py_ssize_t base = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*iipfff|n", &nbuf, &bbuf, &nk, &bk, &compat, &eps, &t1, &t5,
                          &base))
        return NULL;
    PyObject *result = NULL;
    int ok_kinds = (nk >= 0 && nk <= 2 && bk >= 0 && bk <= 2) &&
                   ((nk == KIND_F16) == (bk == KIND_F16));
    if (!ok_kinds) {
        PyErr_SetString(PyExc_ValueError, "unsupported dtype pair for the fused kernel");
        goto done;
    }
    Py_ssize_t k = nbuf.len / kind_size(nk);
    if (nbuf.len % kind_size(nk) || bbuf.len % kind_size(bk) || bbuf.len / kind_size(bk) != k) {
        PyErr_SetString(PyExc_ValueError, "npu and bench buffers hold different element counts");
        goto done;
    }
    if (base < 0) {
        PyErr_SetString(PyExc_ValueError, "base must be 0 or more");
        goto done;
    }
    Acc a;
    acc_init(&a, base);
    int isa = active_isa();
    Py_BEGIN_ALLOW_THREADS
    switch (isa) {
#if MSQ_X86
    case ISA_AVX512: run_avx512(&a, nbuf.buf, bbuf.buf, k, nk, bk, compat, eps, t1, t5); break;
    case ISA_AVX2: run_avx2(&a, nbuf.buf, bbuf.buf, k, nk, bk, compat, eps, t1, t5); break;
#endif
    default: run_generic(&a, nbuf.buf, bbuf.buf, k, nk, bk, compat, eps, t1, t5);
    }
    if (!a.bad && !a.hash_here) { /* a base off the lane grid (tests only): hash in a pass of its own */
        a.hash_here = 1;
        for (Py_ssize_t i = 0; i < k; i++)
            hash_word(&a, float_bits(load_value(nbuf.buf, i, nk)),
                      float_bits(load_value(bbuf.buf, i, bk)));
    }
    if (a.j || a.blk_n || a.blk_b) hash_flush(&a);
    Py_END_ALLOW_THREADS
    if (a.bad) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = Py_BuildValue("(dddddiLLidKK)", lane_sum(a.nb), lane_sum(a.nn), lane_sum(a.bb),
                           a.amax, (double)a.rmax, a.rnan, (long long)a.c1, (long long)a.c5,
                           a.zero, lane_sum(a.ss), (unsigned long long)a.hn,
                           (unsigned long long)a.hb);
done:
    PyBuffer_Release(&nbuf);
    PyBuffer_Release(&bbuf);
    return result;
}

/* segments(npu, bench, offsets, kind, compat, eps, t1, t5): the element-wise aggregates of many
 * small pairs stored back to back (pair j: elements offsets[j] .. offsets[j+1]-1), each pair from
 * element 0 of its own (its hash starts a tensor). For the numpy kernel's vectorised groups of small
 * tensors, whose dot products stay numpy's BLAS calls (bit-identical to msprobe): one call instead of
 * a dozen numpy passes and two hash calls per pair. Returns a list of (max_abs, max_rel, c1, c5,
 * hash_npu, hash_bench) per pair, or None when an element is inf or NaN (a finite pair never has a
 * NaN relative error: a zero bench gets epsilon, so nothing is 0/0). */
static PyObject *fused_segments(PyObject *self, PyObject *args) {
    Py_buffer nbuf, bbuf, obuf;
    int kind, compat;
    float eps, t1, t5;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*ipfff", &nbuf, &bbuf, &obuf, &kind, &compat, &eps, &t1, &t5))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t size = (kind == KIND_F32) ? 4 : 2, m = obuf.len / (Py_ssize_t)sizeof(int64_t) - 1;
    const int64_t *off = (const int64_t *)obuf.buf;
    Py_ssize_t k = nbuf.len / size;
    int ok = (kind == KIND_F32 || kind == KIND_F16) && nbuf.len == bbuf.len && nbuf.len % size == 0 &&
             obuf.len % (Py_ssize_t)sizeof(int64_t) == 0 && m >= 0;
    for (Py_ssize_t j = 0; ok && j < m; j++)
        ok = off[j] >= 0 && off[j] <= off[j + 1] && off[j + 1] <= k;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError,
                        "segments: float32 or float16 buffers of one length, offsets rising in range");
        goto done;
    }
    /* only what a pair's row needs is kept (48 bytes a pair; a whole Acc is ~340) */
    typedef struct {
        double amax;
        float rmax;
        int64_t c1, c5;
        uint64_t hn, hb;
    } Seg;
    Seg *segs = PyMem_RawMalloc((size_t)(m ? m : 1) * sizeof(Seg));
    if (segs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int isa = active_isa(), bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < m && !bad; j++) {
        Acc a;
        acc_init(&a, 0);
        const char *np_ = (const char *)nbuf.buf + off[j] * size;
        const char *bp = (const char *)bbuf.buf + off[j] * size;
        Py_ssize_t n = (Py_ssize_t)(off[j + 1] - off[j]);
        switch (isa) {
#if MSQ_X86
        case ISA_AVX512: run_avx512(&a, np_, bp, n, kind, kind, compat, eps, t1, t5); break;
        case ISA_AVX2: run_avx2(&a, np_, bp, n, kind, kind, compat, eps, t1, t5); break;
#endif
        default: run_generic(&a, np_, bp, n, kind, kind, compat, eps, t1, t5);
        }
        if (a.j || a.blk_n || a.blk_b) hash_flush(&a);
        bad = a.bad;
        segs[j] = (Seg){a.amax, a.rmax, a.c1, a.c5, a.hn, a.hb};
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyMem_RawFree(segs);
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyList_New(m);
    for (Py_ssize_t j = 0; result != NULL && j < m; j++) {
        const Seg *g = &segs[j];
        PyObject *t = Py_BuildValue("(ddLLKK)", g->amax, (double)g->rmax, (long long)g->c1,
                                    (long long)g->c5, (unsigned long long)g->hn,
                                    (unsigned long long)g->hb);
        if (t == NULL) Py_CLEAR(result);
        else PyList_SET_ITEM(result, j, t);
    }
    PyMem_RawFree(segs);
done:
    PyBuffer_Release(&nbuf);
    PyBuffer_Release(&bbuf);
    PyBuffer_Release(&obuf);
    return result;
}

/* ------------------------------------------------------------------ small-file helpers (.pt) */

static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8); }
static uint32_t le32(const unsigned char *p) { return le16(p) | (le16(p + 2) << 16); }

/* pt_members(data) -> (root, pickle_span, byteorder_span, ((key, start, size), ...)) | None
 * for a whole small torch.save archive in memory: root is the archive's folder ("name/"), a span
 * is (start, size) of a member's bytes (byteorder_span None when there is no such member), and
 * the last item lists the members under root + "data/" by their key. None whenever the archive is
 * not the plain kind torch.save writes: no local header at 0, no end-of-directory record in the
 * last 64 KiB, zip64, a record or member outside the file, a compressed member, two sizes that
 * differ, a non-ASCII or repeated name, not exactly one "<root>/data.pkl". msq's Python zip reader
 * (ptfile._Zip) then reads the file and reports what is wrong; for an archive this accepts it finds
 * the same members at the same places. Every check is a bounds check on `data`: nothing is
 * decompressed, and nothing outside it is read. */
#define PT_MAX_MEMBERS 64

typedef struct {
    const unsigned char *name;
    uint32_t nlen;
    Py_ssize_t start, size;
} Member;

static int ends_with(const Member *m, const char *tail) {
    size_t t = strlen(tail);
    return m->nlen >= t && memcmp(m->name + m->nlen - t, tail, t) == 0;
}

static PyObject *fused_pt_members(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *d = (const unsigned char *)b.buf;
    Py_ssize_t n = b.len;
    PyObject *out = NULL;
    Member mem[PT_MAX_MEMBERS];
    if (n < 22 || memcmp(d, "PK\x03\x04", 4) != 0) goto none;
    Py_ssize_t lo = n - 22 - 65535 > 0 ? n - 22 - 65535 : 0, pos = -1;
    for (Py_ssize_t i = n - 4; i >= lo; i--)
        if (d[i] == 'P' && memcmp(d + i, "PK\x05\x06", 4) == 0) {
            pos = i;
            break;
        }
    if (pos < 0 || pos + 22 > n) goto none;
    uint32_t count = le16(d + pos + 10), cd_size = le32(d + pos + 12), cd_off = le32(d + pos + 16);
    if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) goto none; /* zip64 */
    if (count > PT_MAX_MEMBERS || (Py_ssize_t)cd_off + (Py_ssize_t)cd_size > n) goto none;
    const unsigned char *cd = d + cd_off;
    Py_ssize_t at = 0;
    int pkl = -1;
    for (uint32_t r = 0; r < count; r++) {
        if (at + 46 > (Py_ssize_t)cd_size || memcmp(cd + at, "PK\x01\x02", 4) != 0) goto none;
        const unsigned char *rec = cd + at;
        uint32_t method = le16(rec + 10), csize = le32(rec + 20), size = le32(rec + 24);
        uint32_t nlen = le16(rec + 28), xlen = le16(rec + 30), clen = le16(rec + 32);
        uint32_t header = le32(rec + 42);
        Py_ssize_t next = at + 46 + (Py_ssize_t)nlen + xlen + clen;
        if (next > (Py_ssize_t)cd_size) goto none;
        if (method != 0 || csize != size || size == 0xFFFFFFFFu || header == 0xFFFFFFFFu)
            goto none;
        if ((Py_ssize_t)header + 30 > n || memcmp(d + header, "PK\x03\x04", 4) != 0) goto none;
        Py_ssize_t start = (Py_ssize_t)header + 30 + le16(d + header + 26) + le16(d + header + 28);
        if (start + (Py_ssize_t)size > n) goto none;
        Member *m = &mem[r];
        m->name = rec + 46;
        m->nlen = nlen;
        m->start = start;
        m->size = size;
        int slashes = 0;
        for (uint32_t c = 0; c < nlen; c++) {
            if (m->name[c] >= 0x80) goto none;
            slashes += m->name[c] == '/';
        }
        for (uint32_t q = 0; q < r; q++)
            if (mem[q].nlen == nlen && memcmp(mem[q].name, m->name, nlen) == 0) goto none;
        if (ends_with(m, "/data.pkl") && slashes == 1) {
            if (pkl >= 0) goto none;
            pkl = (int)r;
        }
        at = next;
    }
    if (pkl < 0) goto none;
    uint32_t rlen = mem[pkl].nlen - 8; /* "<root>/" */
    const unsigned char *root = mem[pkl].name;
    PyObject *order = Py_NewRef(Py_None), *keys = PyList_New(0);
    if (keys == NULL) {
        Py_DECREF(order);
        goto done;
    }
    for (uint32_t r = 0; r < count; r++) {
        const Member *m = &mem[r];
        if (m->nlen < rlen || memcmp(m->name, root, rlen) != 0) continue;
        const unsigned char *rest = m->name + rlen;
        uint32_t rest_len = m->nlen - rlen;
        PyObject *t = NULL;
        if (rest_len == 9 && memcmp(rest, "byteorder", 9) == 0) {
            Py_DECREF(order);
            order = Py_BuildValue("(nn)", m->start, m->size);
            if (order == NULL) {
                Py_DECREF(keys);
                goto done;
            }
            continue;
        }
        if (rest_len > 5 && memcmp(rest, "data/", 5) == 0) {
            t = Py_BuildValue("(s#nn)", (const char *)rest + 5, (Py_ssize_t)rest_len - 5,
                              m->start, m->size);
            if (t == NULL || PyList_Append(keys, t) < 0) {
                Py_XDECREF(t);
                Py_DECREF(order);
                Py_DECREF(keys);
                goto done;
            }
            Py_DECREF(t);
        }
    }
    out = Py_BuildValue("(s#(nn)NN)", (const char *)root, (Py_ssize_t)rlen, mem[pkl].start,
                        mem[pkl].size, order, keys);
    goto done;
none:
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&b);
    return out;
}

#if MSQ_POSIX_IO
/* read_small(path, nofollow, max_bytes) -> bytes | int: msq.tensors.meta.open_tensor's common case
 * in one call. Opens as meta.open_fd does (read only, O_NONBLOCK: a FIFO named like a tensor file
 * does not wait for a writer; O_NOFOLLOW when asked: a symlink fails with ELOOP; close-on-exec as
 * every descriptor Python opens), then a regular file of at most max_bytes comes back whole (read
 * until its size, or its end if it shrank meanwhile) and the descriptor is closed; any other file
 * comes back as the open descriptor, for meta.take_fd to decide (a large file is kept open, a
 * non-regular one refused). Errors raise OSError as os.open / os.read would (FileNotFoundError,
 * ELOOP, ...), with the path. Per small file this saves the four Python-level calls of open,
 * fstat, read and close (tensor_small: 22k files). With dirfd (an open directory), path is a
 * name in it (openat): the kernel then walks one component instead of the directory's whole
 * path again for every file (~0.7 us a file). */
static PyObject *fused_read_small(PyObject *self, PyObject *args) {
    PyObject *name, *path_obj = NULL; /* name as given (named in errors, as os.open does) */
    int nofollow, dirfd = AT_FDCWD;
    Py_ssize_t max_bytes;
    (void)self;
    if (!PyArg_ParseTuple(args, "Opn|i", &name, &nofollow, &max_bytes, &dirfd)) return NULL;
    if (!PyUnicode_FSConverter(name, &path_obj)) return NULL;
    const char *path = PyBytes_AS_STRING(path_obj);
    int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0);
    int fd, err = 0;
    struct stat st;
    PyObject *out = NULL;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        fd = openat(dirfd, path, flags);
        err = errno;
        Py_END_ALLOW_THREADS
        if (fd >= 0) break;
        if (err != EINTR || PyErr_CheckSignals() < 0) goto fail_open;
    }
    int fst;
    Py_BEGIN_ALLOW_THREADS
    fst = fstat(fd, &st);
    err = errno;
    Py_END_ALLOW_THREADS
    if (fst != 0) goto fail_fd;
    if (!S_ISREG(st.st_mode) || st.st_size > (off_t)max_bytes) {
        Py_DECREF(path_obj);
        return PyLong_FromLong(fd); /* the caller's now */
    }
    Py_ssize_t size = (Py_ssize_t)st.st_size, got = 0;
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) goto close_fd;
    char *buf = PyBytes_AS_STRING(out);
    while (got < size) {
        ssize_t n;
        Py_BEGIN_ALLOW_THREADS
        n = read(fd, buf + got, (size_t)(size - got));
        err = errno;
        Py_END_ALLOW_THREADS
        if (n == 0) break; /* shrank since fstat: what is there, as os.read's loop gives */
        if (n < 0) {
            if (err == EINTR && PyErr_CheckSignals() == 0) continue;
            Py_CLEAR(out);
            if (!PyErr_Occurred()) goto fail_fd;
            goto close_fd;
        }
        got += n;
    }
    if (got < size && _PyBytes_Resize(&out, got) < 0) out = NULL;
close_fd:
    close(fd);
    Py_DECREF(path_obj);
    return out;
fail_fd:
    close(fd);
fail_open:
    if (!PyErr_Occurred()) {
        errno = err;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, name);
    }
    Py_DECREF(path_obj);
    return NULL;
}
#endif

#if MSQ_POSIX_IO
#include <dirent.h>

static int tensor_suffix(const char *name, size_t n) {
    return (n >= 3 && memcmp(name + n - 3, ".pt", 3) == 0) ||
           (n >= 4 && memcmp(name + n - 4, ".npy", 4) == 0);
}

/* tensor_names(path) -> set: the names in the directory `path` that end with ".pt" or ".npy" and
 * are regular files, a symlink counting as what it leads to: what
 *     {e.name for e in os.scandir(path) if e.name.endswith((".pt", ".npy")) and e.is_file()}
 * gives (names decoded as os.fsdecode does; the type from the directory entry, else from stat
 * following links; an entry gone meanwhile, or a dangling link, is no file; the OSError of
 * opening or reading the directory, or of a stat, as os.scandir and DirEntry.is_file raise it),
 * with the GIL released while the directory is read and no Python object made per entry:
 * msq.tensors_bridge scans both tensor folders in a thread while the main thread imports the
 * tensor pool's modules (tensor_small: 11k names a folder, ~8 ms of the main thread each). */
static PyObject *fused_tensor_names(PyObject *self, PyObject *arg) {
    PyObject *path_obj = NULL, *out = NULL;
    (void)self;
    if (!PyUnicode_FSConverter(arg, &path_obj)) return NULL;
    const char *path = PyBytes_AS_STRING(path_obj);
    char *names = NULL, *failed = NULL; /* the kept names, each ended by a NUL */
    size_t used = 0, cap = 0;
    int err = 0, nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    DIR *dir = opendir(path);
    if (dir == NULL) {
        err = errno;
    } else {
        int fd = dirfd(dir);
        for (;;) {
            errno = 0;
            struct dirent *entry = readdir(dir);
            if (entry == NULL) {
                err = errno;
                break;
            }
            size_t n = strlen(entry->d_name);
            if (!tensor_suffix(entry->d_name, n)) continue;
            int regular = entry->d_type == DT_REG;
            if (entry->d_type == DT_LNK || entry->d_type == DT_UNKNOWN) {
                struct stat st;
                if (fstatat(fd, entry->d_name, &st, 0) != 0) {
                    if (errno == ENOENT) continue; /* gone, or a dangling link: not a file */
                    err = errno;
                    failed = strdup(entry->d_name);
                    nomem = failed == NULL;
                    break;
                }
                regular = S_ISREG(st.st_mode);
            }
            if (!regular) continue;
            if (used + n + 1 > cap) {
                size_t grow = cap ? cap * 2 : (size_t)1 << 16;
                while (grow < used + n + 1) grow *= 2;
                char *more = realloc(names, grow);
                if (more == NULL) {
                    nomem = 1;
                    break;
                }
                names = more;
                cap = grow;
            }
            memcpy(names + used, entry->d_name, n + 1);
            used += n + 1;
        }
        closedir(dir);
    }
    Py_END_ALLOW_THREADS
    if (nomem) {
        PyErr_NoMemory();
    } else if (err != 0) {
        errno = err;
        if (failed != NULL) {
            PyObject *name = PyUnicode_DecodeFSDefault(failed);
            PyObject *full = name ? PyUnicode_FromFormat("%S/%U", arg, name) : NULL;
            if (full != NULL) PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, full);
            Py_XDECREF(full);
            Py_XDECREF(name);
        } else {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, arg);
        }
    } else {
        out = PySet_New(NULL);
        for (size_t at = 0; out != NULL && at < used;) {
            size_t n = strlen(names + at);
            PyObject *name = PyUnicode_DecodeFSDefaultAndSize(names + at, (Py_ssize_t)n);
            if (name == NULL || PySet_Add(out, name) < 0) Py_CLEAR(out);
            Py_XDECREF(name);
            at += n + 1;
        }
    }
    free(names);
    free(failed);
    Py_DECREF(path_obj);
    return out;
}
#endif

/* numpy's own BLAS ddot (ILP64: 64-bit n and increments), found by msq.tensors.fused in the
 * library numpy's extension is linked to, and checked there against np.dot; NULL until then. */
typedef double (*ddot_fn)(int64_t n, const double *x, int64_t incx, const double *y, int64_t incy);
static ddot_fn blas_ddot = NULL;

static PyObject *fused_set_ddot(PyObject *self, PyObject *arg) {
    (void)self;
    void *p = PyLong_AsVoidPtr(arg);
    if (p == NULL && PyErr_Occurred()) return NULL;
    blas_ddot = (ddot_fn)p;
    Py_RETURN_NONE;
}

/* np.dot of two float64 vectors of n > 0 elements, as numpy computes it: one element is numpy's
 * "scalar" case, the product itself (a -0.0 stays -0.0); longer vectors go to DOUBLE_dot, a sum
 * from 0.0 of cblas_ddot over chunks of at most NPY_CBLAS_CHUNK = 2^30 elements, unit strides. */
static double np_dot(const double *x, const double *y, int64_t n) {
    if (n == 1) return x[0] * y[0];
    double sum = 0.0;
    while (n > 0) {
        int64_t chunk = n < ((int64_t)1 << 30) ? n : ((int64_t)1 << 30);
        sum += blas_ddot(chunk, x, 1, y, 1);
        x += chunk;
        y += chunk;
        n -= chunk;
    }
    return sum;
}

/* segment_dots(n64, b64, diff, offsets) -> [(n.b, n.n, b.b, d.d), ...]: per segment j (elements
 * offsets[j] .. offsets[j+1]-1 of the three float64 arrays) the four dot products the small pairs'
 * rows take, each the np.dot numpy computes for those slices (the same BLAS function, called as
 * numpy calls it), in one call instead of four np.dot calls and six slices a pair from Python. */
static PyObject *fused_segment_dots(PyObject *self, PyObject *args) {
    Py_buffer nbuf, bbuf, dbuf, obuf;
    (void)self;
    if (blas_ddot == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "segment_dots: numpy's ddot was not set");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &nbuf, &bbuf, &dbuf, &obuf)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t k = nbuf.len / (Py_ssize_t)sizeof(double);
    Py_ssize_t m = obuf.len / (Py_ssize_t)sizeof(int64_t) - 1;
    const int64_t *off = (const int64_t *)obuf.buf;
    int ok = nbuf.len == bbuf.len && nbuf.len == dbuf.len && nbuf.len % (Py_ssize_t)sizeof(double) == 0 &&
             obuf.len % (Py_ssize_t)sizeof(int64_t) == 0 && m >= 0;
    for (Py_ssize_t j = 0; ok && j < m; j++)
        ok = off[j] >= 0 && off[j] < off[j + 1] && off[j + 1] <= k;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "segment_dots: bad arrays or offsets");
        goto done;
    }
    const double *N = (const double *)nbuf.buf, *B = (const double *)bbuf.buf,
                 *D = (const double *)dbuf.buf;
    result = PyList_New(m);
    if (result == NULL) goto done;
    for (Py_ssize_t j = 0; j < m; j++) {
        int64_t s = off[j], n = off[j + 1] - off[j];
        PyObject *t = Py_BuildValue("(dddd)", np_dot(N + s, B + s, n), np_dot(N + s, N + s, n),
                                    np_dot(B + s, B + s, n), np_dot(D + s, D + s, n));
        if (t == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, j, t);
    }
done:
    PyBuffer_Release(&nbuf);
    PyBuffer_Release(&bbuf);
    PyBuffer_Release(&dbuf);
    PyBuffer_Release(&obuf);
    return result;
}

static PyObject *fused_hash_words(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t base = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*|n", &buf, &base)) return NULL;
    if (buf.len % 4 || base < 0) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "hash_words takes whole 32-bit words and a base >= 0");
        return NULL;
    }
    uint64_t h;
    Py_BEGIN_ALLOW_THREADS
    h = hash_words_at((const uint32_t *)buf.buf, buf.len / 4, base);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLongLong(h);
}

/* msprobe's format_value (metrics.r12): float(format(x, ".12f")), by the very two functions
 * format() and float() call (PyOS_double_to_string with 'f' and precision 12, then
 * PyOS_string_to_double): the same double for every input, without the format call and the str
 * it makes (up to five a tensor pair: ~0.7 us each in Python). */
static PyObject *fused_r12(PyObject *self, PyObject *arg) {
    (void)self;
    double x = PyFloat_AsDouble(arg);
    if (x == -1.0 && PyErr_Occurred()) return NULL;
    /* Fast path, |x| < ~1.1 (cosines, ratios, most errors): the text is n * 10^-12 with n the
     * exact x * 10^12 rounded half to even, and parsing it gives the double nearest to n / 10^12,
     * which is what IEEE division of the exact n by the exact 1e12 gives. y = x * 1e12 is within
     * half an ulp (<= 2^-13 below 2^40) of the exact product, so nearbyint(y) is that n whenever
     * y is farther than 2^-12 from a tie; otherwise the text is made. */
    double y = x * 1e12;
    if (fabs(y) < 1099511627776.0) { /* 2^40 */
        double n = nearbyint(y);
        if (0.5 - fabs(y - n) > 1.0 / 4096) return PyFloat_FromDouble(n / 1e12);
    }
    char *text = PyOS_double_to_string(x, 'f', 12, 0, NULL);
    if (text == NULL) return NULL;
    double r = PyOS_string_to_double(text, NULL, NULL);
    PyMem_Free(text);
    if (r == -1.0 && PyErr_Occurred()) return NULL;
    return PyFloat_FromDouble(r);
}

static PyObject *fused_isa(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(ISA_NAMES[active_isa()]);
}

static PyObject *fused_use_generic(PyObject *self, PyObject *arg) {
    (void)self;
    int flag = PyObject_IsTrue(arg);
    if (flag < 0) return NULL;
    isa_cap = flag ? ISA_GENERIC : ISA_AVX512;
    Py_RETURN_NONE;
}

static PyObject *fused_use_isa(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (name == NULL) return NULL;
    for (int i = 0; i < 3; i++)
        if (strcmp(name, ISA_NAMES[i]) == 0) {
            isa_cap = i;
            Py_RETURN_NONE;
        }
    PyErr_Format(PyExc_ValueError, "unknown loop %R: generic, avx2 or avx512", arg);
    return NULL;
}

static PyMethodDef methods[] = {
    {"stats", fused_stats, METH_VARARGS,
     "stats(npu, bench, npu_kind, bench_kind, compat, eps, t1, t5, base=0) -> (dot_nb, dot_nn, "
     "dot_bb, max_abs, max_rel, rel_nan, c1, c5, had_zero) or None when an inf/NaN was seen"},
    {"segments", fused_segments, METH_VARARGS,
     "segments(npu, bench, offsets, kind, compat, eps, t1, t5) -> [(max_abs, max_rel, c1, c5, "
     "hash_npu, hash_bench)] per pair, or None when an inf/NaN was seen"},
    {"pt_members", fused_pt_members, METH_O,
     "pt_members(data) -> (root, pickle_span, byteorder_span, ((key, start, size), ...)) of a "
     "plain torch.save zip in memory, or None"},
#if MSQ_POSIX_IO
    {"tensor_names", fused_tensor_names, METH_O,
     "tensor_names(path) -> set of the .pt/.npy names of regular files (or links to them) in path"},
    {"read_small", fused_read_small, METH_VARARGS,
     "read_small(path, nofollow, max_bytes, dirfd=AT_FDCWD) -> the whole file (a regular file of"
     " at most max_bytes) or its open descriptor (anything else); OSError as os.open"},
#endif
    {"hash_words", fused_hash_words, METH_VARARGS,
     "hash_words(words, base=0) -> int: content hash of uint32 words starting at word `base`"},
    {"r12", fused_r12, METH_O, "r12(x) -> float(format(x, '.12f')) (msprobe's format_value)"},
    {"set_ddot", fused_set_ddot, METH_O, "set_ddot(address): numpy's BLAS ddot (ILP64), or 0"},
    {"segment_dots", fused_segment_dots, METH_VARARGS,
     "segment_dots(n64, b64, diff, offsets) -> [(n.b, n.n, b.b, d.d)] per segment, as np.dot"},
    {"isa", fused_isa, METH_NOARGS, "isa() -> 'avx512', 'avx2' or 'generic': the loop stats() runs"},
    {"use_generic", fused_use_generic, METH_O, "use_generic(flag): force the portable loop"},
    {"use_isa", fused_use_isa, METH_O,
     "use_isa(name): the best loop allowed, 'generic', 'avx2' or 'avx512' (tests)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fused", "One-pass tensor-pair metric aggregates (see _fused.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fused(void) {
    hash_init();
    PyObject *m = PyModule_Create(&module);
    if (m && msq_add_source_crc(m) < 0) Py_CLEAR(m);
    return m;
}
