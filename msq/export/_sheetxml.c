/* Rows of a workbook sheet rendered as SpreadsheetML, in C (the fast path of msq/export/xlsx.py).
 *
 * xlsx.py's SQL renderer (_rows_query) is the reference: this file writes the same bytes for
 * each row -- <row r="N"> and one cell per column, numbers as printf("%.16g"), booleans as
 * boolean cells, texts as inline strings with the quote-prefix style when they start like a
 * formula, xml:space="preserve" at leading/trailing blanks, &<> escaped and control characters
 * as Excel's _xHHHH_ (CR as &#13;) -- and tests/export/test_xlsx.py checks that it does, on
 * every kind of cell. It reads the columns' Arrow buffers directly and releases the GIL, so the
 * zip writer thread deflates one batch while the next is rendered.
 *
 * "%.16g" is the hot spot (a number in most cells): printf takes ~400 ns a number. Here the 16
 * significant digits come from one multiplication in long double (64-bit mantissa), checked to
 * be far enough from a rounding tie; a number that is not gets its digits exactly from its
 * bits in 128-bit integers (exact_digits), and the rare one out of that range (and any
 * non-finite one) goes to snprintf; a zero (most differences of matched rows) is written as is. tests/export/test_xlsx.py compares them with printf on
 * random doubles of every kind, float32 values among them. Texts are scanned sixteen bytes at
 * a time for a byte to escape (maybe_special) and copied whole when they hold none.
 *
 * The statistics workbook's relative errors come as numbers (stat_result) and are printed here
 * as the SQL's rel_text prints them (percent_texts: Python's repr and "%", fmt_repr), not by
 * DuckDB's cast (~1,400 instructions a number).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../_source_crc.h"  /* msq_add_source_crc: SOURCE_CRC, see msq/cext.py */
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *p;
    size_t len, cap;
    /* the characters of the last relative error's text pct_cell wrote (-1: NULL), or of the
     * last chosen text chosen_cell wrote */
    long long shown_chars;
} Out;

static int out_reserve(Out *o, size_t extra) {
    if (o->len + extra <= o->cap) return 0;
    size_t cap = o->cap ? o->cap : 1 << 16;
    while (cap < o->len + extra) cap *= 2;
    char *p = realloc(o->p, cap);
    if (!p) return -1;
    o->p = p;
    o->cap = cap;
    return 0;
}


/* ---------------------------------------------------------------------------------------- */
/* printf("%.16g") */

static long double POW10[700];  /* 10^(k - 350) */

static void init_pow10(void) {
    for (int k = 0; k < 700; k++) POW10[k] = powl(10.0L, (long double)(k - 350));
}

static double POW10D[700];

static void init_pow10d(void) {
    for (int k = 0; k < 700; k++) POW10D[k] = (double)POW10[k];
}

#if defined(__SIZEOF_INT128__)
typedef unsigned __int128 u128;
static u128 POW5[33];  /* 5^k < 2^75 */

static void init_pow5(void) {
    POW5[0] = 1;
    for (int k = 1; k < 33; k++) POW5[k] = POW5[k - 1] * 5;
}
#endif

static const uint64_t POW10U[18] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL,
    1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL,
    100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL};

#if defined(__SSE2__)
#include <emmintrin.h>
#define SSE2_DIGITS 1
/* a < 10^16 as its sixteen digits' values (0 .. 9), one a byte, the first in the lowest: its
 * two halves of eight digits in 64-bit lanes, each divided by 10^4 (a multiplication by
 * 0xd1b71759 and a shift, exact below 10^8) into groups of four digits in 16-bit lanes, each
 * group copied into four lanes and divided there by 1000, 100, 10 and 1 at once (a
 * multiplication-high by a reciprocal, then one by a power of two), ten times each quotient
 * taken from the next: ~30 instructions, where two SWAR conversions of eight digits
 * (digit_bytes) took ~70 (format_g's, fmt_repr's numbers). The per-lane reciprocals and
 * shifts are the known SSE2 conversion of eight digits; tests/export checks every number's
 * text against printf's and repr's. */
static inline __m128i sixteen_digits(uint64_t a) {
    uint32_t hi = (uint32_t)(a / 100000000U), lo = (uint32_t)(a % 100000000U);
    __m128i v = _mm_set_epi64x((long long)lo, (long long)hi);
    __m128i q = _mm_srli_epi64(_mm_mul_epu32(v, _mm_set1_epi32((int)0xd1b71759)), 45);
    __m128i r = _mm_sub_epi32(v, _mm_mul_epu32(q, _mm_set1_epi32(10000)));
    /* 16-bit lanes: abcd, efgh, 0, 0 | ijkl, mnop, 0, 0; times four (the shifts below) */
    __m128i g = _mm_slli_epi16(_mm_or_si128(q, _mm_slli_epi64(r, 16)), 2);
    __m128i a1 = _mm_unpacklo_epi16(g, g), b1 = _mm_unpackhi_epi16(g, g);
    __m128i x = _mm_unpacklo_epi32(a1, a1), y = _mm_unpacklo_epi32(b1, b1);  /* each group x4 */
    const __m128i div = _mm_setr_epi16(8389, 5243, 13108, (short)32768,
                                       8389, 5243, 13108, (short)32768);
    const __m128i shift = _mm_setr_epi16(1 << 7, 1 << 11, 1 << 13, (short)(1 << 15),
                                         1 << 7, 1 << 11, 1 << 13, (short)(1 << 15));
    const __m128i ten = _mm_set1_epi16(10);
    x = _mm_mulhi_epu16(_mm_mulhi_epu16(x, div), shift);  /* a, ab, abc, abcd, e, ef, ... */
    y = _mm_mulhi_epu16(_mm_mulhi_epu16(y, div), shift);
    x = _mm_sub_epi16(x, _mm_slli_epi64(_mm_mullo_epi16(x, ten), 16));  /* a, b, c, d, ... */
    y = _mm_sub_epi16(y, _mm_slli_epi64(_mm_mullo_epi16(y, ten), 16));
    return _mm_packus_epi16(x, y);
}
#endif

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR_DIGITS 1
/* v < 10^8 as its eight digits' values (0 .. 9), one a byte, the first in the lowest (the
 * order they are written in on a little-endian machine), in one 64-bit word: its two halves of
 * four digits in 32-bit lanes, each split into hundreds and the rest in 16-bit lanes, each of
 * those into tens and ones in bytes; a division by 100 or 10 of every lane at once as a
 * multiplication and a shift that are exact for the lanes' values (< 10^4: x * 10486 >> 20;
 * < 100: x * 103 >> 10) and carry nothing into the next lane (~15 instructions, where four
 * two-digit table look-ups took ~30) */
static inline uint64_t digit_bytes(uint32_t v) {
    uint64_t x = (uint64_t)(v / 10000) | ((uint64_t)(v % 10000) << 32);
    uint64_t h = ((x * 10486) >> 20) & 0x0000007F0000007FULL;
    x = h | ((x - h * 100) << 16);
    uint64_t t = ((x * 103) >> 10) & 0x000F000F000F000FULL;
    return t | ((x - t * 10) << 8);
}

/* v < 10^8 as eight digits */
static inline void eight_digits(char *d, uint32_t v) {
    uint64_t b = digit_bytes(v) | 0x3030303030303030ULL;
    memcpy(d, &b, 8);
}
#else
static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* v < 10^8 as eight digits: two digits a table look-up, no loop (a loop of 64-bit divisions
 * by 100 took ~13 instructions a pair of digits, ~100 a number) */
static inline void eight_digits(char *d, uint32_t v) {
    uint32_t high = v / 10000, low = v % 10000;
    memcpy(d, DIGIT_PAIRS + 2 * (high / 100), 2);
    memcpy(d + 2, DIGIT_PAIRS + 2 * (high % 100), 2);
    memcpy(d + 4, DIGIT_PAIRS + 2 * (low / 100), 2);
    memcpy(d + 6, DIGIT_PAIRS + 2 * (low % 100), 2);
}
#endif

/* %.16g of a finite, non-zero |x| into buf (40 bytes: at most 23 written, whole copies of 16
 * bytes of digits made) from its 16 digits and decimal exponent */
static int format_g(char *buf, int negative, uint64_t digits, int exp10) {
    char d[32];  /* 16 digits, and room to copy 16 bytes from any of them */
#if defined(SSE2_DIGITS)
    __m128i v = sixteen_digits(digits);
    /* %g drops trailing zeros: the digits up to the last that is not 0 (the first is not:
     * digits >= 10^15) */
    unsigned nonzero = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())) & 0xFFFFu;
    int nd = 32 - __builtin_clz(nonzero);
    _mm_storeu_si128((__m128i *)d, _mm_add_epi8(v, _mm_set1_epi8('0')));
#elif defined(SWAR_DIGITS)
    uint32_t low = (uint32_t)(digits % 100000000U);
    uint64_t first = digit_bytes((uint32_t)(digits / 100000000U)), last = digit_bytes(low);
    /* %g drops trailing zeros: the zero bytes at the top of the last eight digits, or when
     * they all are, of the first eight (whose first digit is not 0: digits >= 10^15) */
    int nd = last ? 16 - __builtin_clzll(last) / 8 : 8 - __builtin_clzll(first) / 8;
    first |= 0x3030303030303030ULL;
    last |= 0x3030303030303030ULL;
    memcpy(d, &first, 8);
    memcpy(d + 8, &last, 8);
#else
    uint32_t low = (uint32_t)(digits % 100000000U);
    eight_digits(d, (uint32_t)(digits / 100000000U));
    eight_digits(d + 8, low);
    int nd = low ? 16 : 8;  /* the last eight digits are zeros: %g drops them */
    while (nd > 1 && d[nd - 1] == '0') nd--;  /* %g drops trailing zeros */
#endif
    char *p = buf;
    if (negative) *p++ = '-';
    if (exp10 < -4 || exp10 >= 16) {
        *p++ = d[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, d + 1, 16);  /* whole: a fixed copy is two moves, a variable one a call */
            p += nd - 1;
        }
        *p++ = 'e';
        int e = exp10;
        *p++ = e < 0 ? '-' : '+';
        if (e < 0) e = -e;
        if (e >= 100) { *p++ = (char)('0' + e / 100); e %= 100; }
        *p++ = (char)('0' + e / 10);
        *p++ = (char)('0' + e % 10);
    } else if (exp10 < 0) {
        *p++ = '0';
        *p++ = '.';
        memcpy(p, "000", 4);  /* -4 <= exp10 < 0: at most three zeros, then the digits */
        p += -exp10 - 1;
        memcpy(p, d, 16);
        p += nd;
    } else {
        int int_digits = exp10 + 1;  /* 1 .. 16 */
        /* d's 16 digits: the ones past nd are the zeros %g dropped (p has room for 40 bytes) */
        memcpy(p, d, 16);
        p += int_digits;
        if (nd > int_digits) {
            *p++ = '.';
            memcpy(p, d + int_digits, 16);
            p += nd - int_digits;
        }
    }
    return (int)(p - buf);
}

/* The 16 digits of |x| * 10^k (k = 15 - exp10, 0 <= k <= 32), rounded exactly as printf rounds
 * (to nearest, a tie to even), from the double's own bits: a = m * 2^q, so |x| * 10^k =
 * m * 5^k * 2^(q + k), an integer over a power of two that fits 128 bits. 0 when it does not
 * apply (then printf decides). Near a tie -- ~4 % of the statistics of a float32 model, whose
 * widened values often end in an exact ...5 at the 17th digit -- the long double product cannot
 * tell which way to round. */
#if defined(__SIZEOF_INT128__)
/* kept out of fmt16g: inlined, it slowed the common path by half (register pressure) */
static __attribute__((noinline)) uint64_t exact_digits(double a, int k) {
    if (k < 0 || k > 32) return 0;
    int exp2;
    double f = frexp(a, &exp2);                        /* a = f * 2^exp2, 0.5 <= f < 1 */
    uint64_t m = (uint64_t)ldexp(f, 53);               /* exact: 53 bits */
    int shift = -(exp2 - 53 + k);                      /* the power of two is 2^-shift */
    if (shift <= 0 || shift >= 128) return 0;
    unsigned __int128 n = m;
    for (int i = 0; i < k; i++) n *= 5;                /* m * 5^k < 2^53 * 5^32 < 2^128 */
    unsigned __int128 whole = n >> shift;
    unsigned __int128 rem = n - (whole << shift);
    unsigned __int128 half = (unsigned __int128)1 << (shift - 1);
    if (rem > half || (rem == half && (whole & 1))) whole++;
    if (whole < 1000000000000000ULL || whole > 10000000000000000ULL) return 0;
    return (uint64_t)whole;
}
#else  /* no 128-bit integers (MSVC): printf decides every near tie */
static uint64_t exact_digits(double a, int k) {
    (void)a;
    (void)k;
    return 0;
}
#endif

/* floor(log10(a)) of a finite a > 0, or one off (the loop of fmt16g moves to the right
 * exponent, and any start gives printf's digits): from the binary exponent (floor(e2 *
 * log10(2)) is (e2 * 78913) >> 18 for |e2| < 1650) and one comparison with the next power of
 * ten (POW10D, doubles: 0 and inf at the ends). log10() and floor() took ~130 instructions a
 * number, a third of fmt16g. Subnormals ask log10(). */

static int decimal_exponent(double a) {
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7ff);
    if (biased == 0) return (int)floor(log10(a));
    int e2 = biased - 1023;
    int e = (int)(((int64_t)e2 * 78913) >> 18);  /* floor: an arithmetic shift rounds down */
    return a >= POW10D[e + 1 + 350] ? e + 1 : e;
}

/* printf's 16 digits of a normal double a > 0 (*e: its decimal exponent, or one off on the
 * way in; settled on the way out), exactly from its bits in 128-bit integers, as exact_digits
 * does near a tie but with one multiplication by 5^k from a table (a = m * 2^q, a * 10^k =
 * m * 5^k / 2^s, k = 15 - e, s = -(q + k)), rounded to nearest, a tie to even. 0 when it does
 * not apply: a subnormal, |a| from ~1e15 on (s < 1) or below ~1e-17 (k > 32); then the long
 * double product below decides. The long double product took ~60 instructions a number and a
 * call to floorl, and exact_digits ~250 for the ~20 % of a float32 model's statistics that
 * came near a tie. */
static uint64_t digits16(double a, int *e) {
#if defined(__SIZEOF_INT128__)
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7ff);
    if (biased == 0) return 0;
    uint64_t m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
    int q = biased - 1075;
    for (int tries = 0; tries < 3; tries++) {
        int k = 15 - *e, s = -(q + k);
        if (k < 0 || k > 32 || s < 1 || s > 127) return 0;
        u128 n = (u128)m * POW5[k];                 /* < 2^53 * 5^32 < 2^128 */
        u128 whole = n >> s;
        if (whole < POW10U[15]) { (*e)--; continue; }
        if (whole >= POW10U[16]) { (*e)++; continue; }
        /* the bits below the point moved to the top, where 2^127 is one half: one shift,
         * where the remainder and the half as 128-bit masks took three (~23 instructions) */
        u128 frac = n << (128 - s), half = (u128)1 << 127;
        uint64_t d = (uint64_t)whole + (uint64_t)(frac > half || (frac == half && (whole & 1)));
        if (d == POW10U[16]) {  /* rounded up to the next power of ten */
            d = POW10U[15];
            (*e)++;
        }
        return d;
    }
    return 0;
#else
    (void)a;
    (void)e;
    return 0;
#endif
}

static int fmt16g(char *buf, double x) {
    if (x == 0.0) {  /* a zero difference in most matched rows: printf took ~2,600 instructions */
        if (signbit(x)) {
            memcpy(buf, "-0", 3);
            return 2;
        }
        memcpy(buf, "0", 2);
        return 1;
    }
    if (!isfinite(x)) return snprintf(buf, 40, "%.16g", x);
    int negative = signbit(x) != 0;
    double a = fabs(x);
    int e = decimal_exponent(a);
    uint64_t exact = digits16(a, &e);
    if (exact) return format_g(buf, negative, exact, e);
    e = decimal_exponent(a);
    for (int tries = 0; tries < 2; tries++) {
        int k = 15 - e + 350;
        if (k < 0 || k >= 700) break;
        long double y = (long double)a * POW10[k];  /* ~1e15 .. 1e16, relative error < 2^-62 */
        if (y < 1e15L) { e--; continue; }
        if (y >= 1e16L) { e++; continue; }
        long double whole = floorl(y);
        long double frac = y - whole;
        uint64_t n;
        if (frac > 0.49L && frac < 0.51L) {  /* too near a tie for the product: exactly */
            n = exact_digits(a, 15 - e);
            if (n == 0) break;  /* out of exact_digits' range: printf decides */
        } else {
            n = (uint64_t)whole + (frac > 0.5L ? 1 : 0);
        }
        if (n == 10000000000000000ULL) {
            n = 1000000000000000ULL;
            e++;
        }
        return format_g(buf, negative, n, e);
    }
    return snprintf(buf, 40, "%.16g", x);
}

/* ---------------------------------------------------------------------------------------- */
/* Python's repr of a double: what DuckDB's CAST(x AS VARCHAR) prints (its shortest round trip),
 * as the py_float macro (sql/compare/schema/10_macros.sql) gives it (any NaN "nan"). The
 * statistics workbook's relative errors ("12.5%") are printed here from their numbers
 * (percent_texts) instead of by DuckDB's cast (~1,400 instructions a number, ~90 M of a
 * 24,500-row pair). The digits: the fewest of 15, 16 or 17 that read back as x, each count
 * correctly rounded and its round trip decided exactly in 128-bit integers (x * 10^k =
 * m * 5^k / 2^s); fifteen digits that read back, their trailing zeros dropped, are the
 * shortest (a decimal of at most 15 digits is the only one of its length that reads back as
 * its double, DBL_DIG). Subnormals, exact powers of two (their interval is lopsided), and
 * numbers out of the 128-bit range (below ~1e-16, from ~1e15 on) take repr_slow: snprintf's
 * correctly rounded digits and strtod's reading, from one digit up. tests/export/test_xlsx.py
 * checks both against DuckDB's cast and Python's repr. */


/* repr's digits (*count of them, trailing zeros among them) and decimal exponent of a normal
 * double a > 0 that is not a power of two; 0 when not decided here (then repr_slow). a = m * 2^q
 * (m its 53-bit integer): its 17 digits are n / 2^s with n = m * 5^k, k = 16 - e, s = -(q + k),
 * one 128-bit product; 16 and 15 digits divide that by 10 and 100. Each count is correctly
 * rounded (half to even) and reads back as a when nearer a than half its ulp: with dist the
 * distance times 10^j * 2^s (j = 1 for 16 digits, 2 for 15), when 2 * dist < 5^k (never equal:
 * 5^k is odd). Sixteen digits first: most numbers (quotients of statistics) need 16 or 17, and
 * fifteen are tried only when 16 read back. */
static int repr_fast(double a, uint64_t *digits, int *count, int *exp10) {
#if defined(__SIZEOF_INT128__)
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7ff);
    uint64_t frac = bits & ((1ULL << 52) - 1);
    if (biased == 0 || frac == 0) return 0;
    uint64_t m = frac | (1ULL << 52);
    int q = biased - 1075;
    int e = decimal_exponent(a);
    int k = 0, s = 0, found = 0;
    u128 n = 0, whole = 0;
    for (int tries = 0; tries < 3 && !found; tries++) {
        k = 16 - e;
        s = -(q + k);
        if (k < 0 || k > 32 || s < 1 || s > 116) return 0;  /* 100 * 2^s * 2 < 2^128 */
        n = (u128)m * POW5[k];                               /* < 2^53 * 5^32 < 2^128 */
        whole = n >> s;
        if (whole < POW10U[16]) e--;
        else if (whole >= POW10U[17]) e++;
        else found = 1;
    }
    if (!found) return 0;
    u128 unit = (u128)1 << s;
    u128 rem = n & (unit - 1);
    uint64_t w = (uint64_t)whole;  /* the 17 digits, truncated */
    u128 five = POW5[k];
    uint64_t d;
    int p;
    uint64_t d16 = w / 10;
    u128 r16 = ((u128)(w % 10) << s) + rem, half16 = 5 * unit;
    int up16 = r16 > half16 || (r16 == half16 && (d16 & 1));
    if (2 * (up16 ? 10 * unit - r16 : r16) < five) {  /* 16 read back: maybe 15 do too */
        uint64_t d15 = w / 100;
        u128 r15 = ((u128)(w % 100) << s) + rem, half15 = 50 * unit;
        int up15 = r15 > half15 || (r15 == half15 && (d15 & 1));
        if (2 * (up15 ? 100 * unit - r15 : r15) < five) {
            d = d15 + (uint64_t)up15;
            p = 15;
        } else {
            d = d16 + (uint64_t)up16;
            p = 16;
        }
    } else {  /* 17 digits, which always read back */
        u128 half = unit >> 1;
        d = w + (uint64_t)(rem > half || (rem == half && (w & 1)));
        p = 17;
    }
    if (d == POW10U[p]) {  /* rounded up to the next power of ten */
        d = POW10U[p - 1];
        e++;
    }
    *digits = d;
    *count = p;
    *exp10 = e;
    return 1;
#else
    (void)a; (void)digits; (void)count; (void)exp10;
    return 0;
#endif
}

/* repr's digits and exponent of any finite a > 0: the fewest digits (1 .. 17) that read back
 * as a, and of those the nearest a (snprintf's correctly rounded digits, or a neighbour: the
 * interval of a power of two is narrower below it than above) */
static void repr_slow(double a, uint64_t *digits, int *count, int *exp10) {
    char text[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(text, sizeof text, "%.*e", p - 1, a);
        uint64_t d = 0;
        const char *c = text;
        for (; *c && *c != 'e'; c++)
            if (*c >= '0' && *c <= '9') d = d * 10 + (uint64_t)(*c - '0');
        int e = *c == 'e' ? atoi(c + 1) : 0;
        /* the candidates: snprintf's first, then its neighbours of the same length */
        uint64_t cands[3] = {d, d - 1, d + 1};
        for (int i = 0; i < 3; i++) {
            uint64_t t = cands[i];
            if (t < POW10U[p - 1] || t >= POW10U[p]) continue;
            snprintf(text, sizeof text, "%llue%d", (unsigned long long)t, e - (p - 1));
            if (strtod(text, NULL) == a) {
                *digits = t;
                *count = p;
                *exp10 = e;
                return;
            }
        }
    }
    /* not reached: 17 digits always read back */
    *digits = 0;
    *count = 1;
    *exp10 = 0;
}

/* Python's repr of x into buf (48 bytes: at most 26 written, whole copies of 24 bytes of
 * digits made), any NaN "nan"; returns the length */
static int fmt_repr(char *buf, double x) {
    if (isnan(x)) {
        memcpy(buf, "nan", 3);
        return 3;
    }
    char *p = buf;
    if (signbit(x)) *p++ = '-';
    if (isinf(x)) {
        memcpy(p, "inf", 3);
        return (int)(p - buf) + 3;
    }
    if (x == 0.0) {
        memcpy(p, "0.0", 3);
        return (int)(p - buf) + 3;
    }
    double a = fabs(x);
    uint64_t digits;
    int e, nd;
    if (!repr_fast(a, &digits, &nd, &e)) repr_slow(a, &digits, &nd, &e);
    /* the nd digits (at most 17): all seventeen places of the number written (eight_digits
     * twice and one digit: a loop of divisions by 100 took ~100 instructions a number), d the
     * last nd of them; then without their trailing zeros. all has room for whole copies of 24
     * bytes from any digit (the caller's buf: 48 bytes), which a variable length made library
     * calls */
    char all[48];
#if defined(SSE2_DIGITS)
    all[0] = (char)('0' + digits / POW10U[16]);
    _mm_storeu_si128((__m128i *)(all + 1),
                     _mm_add_epi8(sixteen_digits(digits % POW10U[16]), _mm_set1_epi8('0')));
#else
    uint64_t top = digits / 100000000U;  /* < 10^9 */
    all[0] = (char)('0' + top / 100000000U);
    eight_digits(all + 1, (uint32_t)(top % 100000000U));
    eight_digits(all + 9, (uint32_t)(digits % 100000000U));
#endif
    const char *d = all + 17 - nd;
    while (nd > 1 && d[nd - 1] == '0') nd--;
    if (e >= -4 && e < 16) {  /* positional */
        if (e < 0) {
            *p++ = '0';
            *p++ = '.';
            memcpy(p, "000", 4);  /* -4 <= e < 0: at most three zeros (a loop took ~18 a number) */
            p += -e - 1;
            memcpy(p, d, 24);
            p += nd;
        } else if (nd <= e + 1) {  /* a whole number: its zeros, then ".0" */
            memcpy(p, d, (size_t)nd);
            p += nd;
            for (int i = nd; i < e + 1; i++) *p++ = '0';
            *p++ = '.';
            *p++ = '0';
        } else {
            memcpy(p, d, 24);
            p += e + 1;
            *p++ = '.';
            memcpy(p, d + e + 1, 24);
            p += nd - e - 1;
        }
    } else {  /* d.ddde+XX, two exponent digits at least */
        *p++ = d[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, d + 1, (size_t)(nd - 1));
            p += nd - 1;
        }
        *p++ = 'e';
        *p++ = e < 0 ? '-' : '+';
        int u = e < 0 ? -e : e;
        if (u >= 100) {
            *p++ = (char)('0' + u / 100);
            u %= 100;
        }
        *p++ = (char)('0' + u / 10);
        *p++ = (char)('0' + u % 10);
    }
    return (int)(p - buf);
}

/* A relative error's text as sql/compare/schema/10_macros.sql's rel_text prints it, into buf
 * (48 bytes: at most 27 written): the codes -1, -2, -3 as "N/A", " " and "0.0%", any other
 * number as its repr (fmt_repr) and "%"; returns the length */
static int pct_text(char *buf, double x) {
    if (x == -1.0) {
        memcpy(buf, "N/A", 3);
        return 3;
    }
    if (x == -2.0) {
        buf[0] = ' ';
        return 1;
    }
    if (x == -3.0) {
        memcpy(buf, "0.0%", 4);
        return 4;
    }
    int n = fmt_repr(buf, x);
    buf[n++] = '%';
    return n;
}

/* The most characters pct_text can write for a finite a = |x| > 0 that is no code, of
 * decimal exponent e (decimal_exponent's, exact away from a power of ten) and sign: its repr
 * with seventeen digits (the most it has), as fmt_repr lays it out, and "%" */
static int pct_chars_bound(int negative, int e) {
    int n;
    if (e >= -4 && e < 16) n = e < 0 ? 2 + (-e - 1) + 17 : 17 + 1;
    else n = 1 + 17 + 2 + (e <= -100 || e >= 100 ? 3 : 2);
    return negative + n + 1;
}

/* printf("%lld", n) for a row number (snprintf took ~1,100 instructions a row) */
static int fmt_row(char *buf, long long n) {
    char d[24];
    int len = 0;
    unsigned long long u = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
    do {
        d[len++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    int k = 0;
    if (n < 0) buf[k++] = '-';
    while (len) buf[k++] = d[--len];
    buf[k] = 0;
    return k;
}

/* ---------------------------------------------------------------------------------------- */
/* columns */

typedef struct {
    const uint8_t *valid;   /* Arrow validity bitmap, or NULL (all valid) */
    const int32_t *offs;    /* strings */
    const char *data;       /* strings: bytes; doubles: double[]; booleans: bitmap */
    const char *end;        /* the end of data's buffer (NULL: not known) */
    int64_t offset;         /* the array's offset into its buffers */
    /* NULL, or a sparse array's: each row's place in this array (-1: none, a NULL), nrows of
     * them (a row past them: none); sparse_rows made it */
    const int32_t *rows;
    int64_t nrows;
} Arr;

/* COL_PCT and COL_CHOSEN last: render counts the characters of their cells as it writes them
 * (kind >= COL_PCT) */
enum { COL_TEXT, COL_CELL, COL_PCT, COL_CHOSEN };

/* COL_CHOSEN's texts: at most this many bytes each, kept with room to load sixteen bytes past
 * any of them (plain_copy) */
#define PICK_MAX 47

typedef struct {
    int kind;
    Arr s;          /* COL_TEXT: the text; COL_CELL: its 's' member; COL_CHOSEN: the row's
                     * own text (NULL on most rows) */
    Arr n, b;       /* COL_CELL: 'n' (double) and 'b' (boolean) members; COL_PCT: n, the
                     * relative errors (doubles) written as their texts (pct_text);
                     * COL_CHOSEN: b, the flag that picks one of two texts */
    /* COL_CHOSEN: the texts picked (pick[0] where the row's flag is false or NULL, pick[1]
     * where true, pick[2] where the row has its own text; shown: pick[2] is given, else that
     * own text is written), their bytes and characters */
    char pick[3][PICK_MAX + 17];
    size_t pick_len[3];
    long long pick_chars[3];
    int shown;
} Column;

static int bit(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }
static int is_valid(const Arr *a, int64_t i) { return !a->valid || bit(a->valid, a->offset + i); }

/* styles: [mark] = (plain, quote-prefixed) attribute, and their lengths */
/* eight bytes each, copied whole (a fixed-size copy is two moves; one of a variable length was
 * a library call, ~25 instructions a cell): the room reserved for a cell has the slack */
static const char ST[3][8] = {"", " s=\"1\"", " s=\"2\""};
static const char STQ[3][8] = {" s=\"3\"", " s=\"4\"", " s=\"5\""};
static const size_t ST_LEN[3] = {0, 6, 6}, STQ_LEN[3] = {6, 6, 6};

/* Each cell is written into room reserved once (out_reserve), not piece by piece: a text cell
 * took ~350 instructions in five reservations, strlen calls and small memcpy calls. */
#define LIT(p, lit) do { memcpy((p), (lit), sizeof(lit) - 1); (p) += sizeof(lit) - 1; } while (0)

static int empty_cell(Out *o, int mark) {
    if (out_reserve(o, 16)) return -1;
    char *p = o->p + o->len;
    LIT(p, "<c");
    memcpy(p, ST[mark], 8);
    p += ST_LEN[mark];
    LIT(p, "/>");
    o->len = (size_t)(p - o->p);
    return 0;
}

/* The numbers a render printed last, by their bits (a direct-mapped table, MEMO_SIZE entries
 * of 32 bytes, the index from a multiplicative hash of the bits): a number printed before is
 * copied from it, not printed again. A statistics sheet's numbers repeat (a bench statistic
 * equal to the NPU's in ~40 % of root-8x8-5000's rows, an op's input its previous op's
 * output): ~31 % of a batch's non-zero numbers found here, where fmt16g took ~208
 * instructions a number. The same bits always print the same text; zero (its own fast path,
 * never looked up) is the empty entry's key. */
#define MEMO_BITS 12
#define MEMO_SIZE (1 << MEMO_BITS)
typedef struct {
    uint64_t key;   /* the number's bits; 0: empty */
    char text[23];  /* fmt16g's text (at most 23 bytes) */
    uint8_t len;
} Memo;

static int num_cell(Out *o, int mark, double x, Memo *memo) {
    if (out_reserve(o, 80)) return -1;
    char *p = o->p + o->len;
    LIT(p, "<c");
    memcpy(p, ST[mark], 8);
    p += ST_LEN[mark];
    LIT(p, "><v>");
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    Memo *m = memo && x != 0.0 ? &memo[(bits * 0x9E3779B97F4A7C15ULL) >> (64 - MEMO_BITS)] : NULL;
    if (m && m->key == bits) {
        memcpy(p, m->text, 24);  /* whole (the text and its length byte): p has the room */
        p += m->len;
    } else {
        int n = fmt16g(p, x);  /* at most 40 bytes, as snprintf's buffer */
        if (m && n <= 23) {
            m->key = bits;
            memcpy(m->text, p, 23);
            m->len = (uint8_t)n;
        }
        p += n;
    }
    LIT(p, "</v></c>");
    o->len = (size_t)(p - o->p);
    return 0;
}

static int bool_cell(Out *o, int mark, int v) {
    if (out_reserve(o, 40)) return -1;
    char *p = o->p + o->len;
    LIT(p, "<c");
    memcpy(p, ST[mark], 8);
    p += ST_LEN[mark];
    if (v) LIT(p, " t=\"b\"><v>1</v></c>");
    else LIT(p, " t=\"b\"><v>0</v></c>");
    o->len = (size_t)(p - o->p);
    return 0;
}

static int starts_like_formula(const char *s, size_t n) {
    if (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@') return 1;
    /* the fullwidth forms: U+FF1D = EF BC 9D, U+FF0B = EF BC 8B, U+FF0D = EF BC 8D, U+FF20 = EF BC A0 */
    if (n >= 3 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBC) {
        unsigned char c = (unsigned char)s[2];
        return c == 0x9D || c == 0x8B || c == 0x8D || c == 0xA0;
    }
    return 0;
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\n'; }

/* &, <, > as entities; C0 controls (but TAB and LF) as _xHHHH_, CR as &#13;, U+FFFE/U+FFFF as
 * _xFFFE_/_xFFFF_ (xlsx._fix_controls) */
/* the bytes escaped() may rewrite: one table look-up a byte instead of six tests (most bytes of
 * a sheet's texts are plain) */
static unsigned char SPECIAL[256];

/* what escaped() writes for a SPECIAL byte (but 0xEF, which it looks at with the bytes after
 * it): eight bytes each (copied whole: a strlen and a memcpy call a rewrite took ~40
 * instructions; "<class 'int'>", a dtype, is in ~15 % of a statistics sheet's rows), of
 * which REPLACE_LEN count */
static char REPLACE[256][8];
static unsigned char REPLACE_LEN[256];

static void init_special(void) {
    for (int c = 0; c < 0x20; c++) SPECIAL[c] = c != '\t' && c != '\n';  /* CR among them */
    SPECIAL['&'] = SPECIAL['<'] = SPECIAL['>'] = 1;
    SPECIAL[0xEF] = 1;  /* the lead byte of U+FFFE / U+FFFF */
    for (int c = 0; c < 0x20; c++) {
        if (c == '\t' || c == '\n') continue;
        if (c == '\r') memcpy(REPLACE[c], "&#13;", 5);
        else snprintf(REPLACE[c], sizeof REPLACE[c], "_x%04X_", c);
        REPLACE_LEN[c] = (unsigned char)strlen(REPLACE[c]);
    }
    memcpy(REPLACE['&'], "&amp;", 5);
    memcpy(REPLACE['<'], "&lt;", 4);
    memcpy(REPLACE['>'], "&gt;", 4);
    REPLACE_LEN['&'] = 5;
    REPLACE_LEN['<'] = REPLACE_LEN['>'] = 4;
}

/* Whether s may hold a byte escaped() rewrites: a control character (TAB and LF too), &, <, >
 * or 0xEF. Sixteen bytes a step with SSE2 (every x86-64 has it), where the table look-up of
 * escaped() took ~4 instructions a byte; most texts (names, dtypes, shapes) hold none, and are
 * copied whole. Elsewhere: 1 (escaped() looks at every byte, as it did). */
#if defined(__SSE2__)
#include <emmintrin.h>

static int maybe_special(const char *s, size_t n) {
    const __m128i amp = _mm_set1_epi8('&'), lt = _mm_set1_epi8('<'), gt = _mm_set1_epi8('>');
    const __m128i ef = _mm_set1_epi8((char)0xEF), space = _mm_set1_epi8(0x20);
    if (n < 16) {  /* no 16 bytes to load: byte by byte */
        for (size_t i = 0; i < n; i++)
            if (SPECIAL[(unsigned char)s[i]]) return 1;
        return 0;
    }
    /* the last step overlaps the one before: it ends at s + n, never past it */
    for (size_t i = 0;; i += 16) {
        if (i + 16 > n) i = n - 16;
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        /* v < 0x20 as unsigned bytes: min(v, 0x20) != 0x20 */
        __m128i low = _mm_xor_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, space), space),
                                    _mm_set1_epi8(-1));
        __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, amp), _mm_cmpeq_epi8(v, lt)),
                                   _mm_or_si128(_mm_cmpeq_epi8(v, gt), _mm_cmpeq_epi8(v, ef)));
        if (_mm_movemask_epi8(_mm_or_si128(hit, low))) return 1;
        if (i + 16 == n) return 0;
    }
}
#else
static int maybe_special(const char *s, size_t n) {
    (void)s;
    return n > 0;
}
#endif

#if defined(__SSE2__)
/* the bytes of v that maybe_special looks for, as a movemask */
static inline unsigned special_bits(__m128i v) {
    const __m128i amp = _mm_set1_epi8('&'), lt = _mm_set1_epi8('<'), gt = _mm_set1_epi8('>');
    const __m128i ef = _mm_set1_epi8((char)0xEF), space = _mm_set1_epi8(0x20);
    __m128i low = _mm_xor_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, space), space), _mm_set1_epi8(-1));
    __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, amp), _mm_cmpeq_epi8(v, lt)),
                               _mm_or_si128(_mm_cmpeq_epi8(v, gt), _mm_cmpeq_epi8(v, ef)));
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(hit, low));
}

/* s copied to p sixteen bytes at a time while no byte of it may need escaping (maybe_special):
 * the end of the copy, or NULL where a byte may (or a short text is too near the end of its
 * buffer, ``end``, to load sixteen bytes): escaped() then writes it from p again. A text of
 * fewer than 16 bytes is loaded with the bytes after it (when its buffer has them) and the
 * look masked to its own; the copies may write up to 16 bytes past the text into p's room.
 * A short text took a byte-by-byte look-up and a memcpy call, ~60 instructions. */
static char *plain_copy(char *p, const char *s, size_t n, const char *end) {
    if (n < 16) {
        if (!end || end < s || (size_t)(end - s) < 16) return NULL;
        __m128i v = _mm_loadu_si128((const __m128i *)s);
        if (special_bits(v) & ((1u << n) - 1)) return NULL;
        _mm_storeu_si128((__m128i *)p, v);
        return p + n;
    }
    /* the last step overlaps the one before: it ends at s + n, never past it */
    for (size_t i = 0;; i += 16) {
        if (i + 16 > n) i = n - 16;
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        if (special_bits(v)) return NULL;
        _mm_storeu_si128((__m128i *)(p + i), v);
        if (i + 16 == n) return p + n;
    }
}
#else
static char *plain_copy(char *p, const char *s, size_t n, const char *end) {
    (void)p; (void)s; (void)n; (void)end;
    return NULL;
}
#endif

/* s escaped into p, which has room for 7 bytes a byte of s (the longest rewrite, _xHHHH_ of
 * one byte) and 16 more; returns the end. ``end``: the end of the buffer s is in (NULL: not
 * known), see plain_copy. */
static char *escaped(char *p, const char *s, size_t n, const char *end) {
    char *copied = plain_copy(p, s, n, end);
    if (copied) return copied;
    if (!maybe_special(s, n)) {
        memcpy(p, s, n);
        return p + n;
    }
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!SPECIAL[c]) continue;
        const char *rep = REPLACE[c];  /* 8 bytes, copied whole; REPLACE_LEN[c] of them count */
        size_t len = REPLACE_LEN[c], skip = 0;
        if (c == 0xEF) {
            len = 0;
            if (i + 2 < n && (unsigned char)s[i + 1] == 0xBF
                && ((unsigned char)s[i + 2] == 0xBE || (unsigned char)s[i + 2] == 0xBF)) {
                rep = (unsigned char)s[i + 2] == 0xBE ? "_xFFFE_" : "_xFFFF_";
                len = 7;
                skip = 2;
            }
        }
        if (!len) continue;  /* TAB, LF, or 0xEF starting another character */
        memcpy(p, s + run, i - run);
        p += i - run;
        memcpy(p, rep, 8);
        p += len;
        i += skip;
        run = i + 1;
    }
    memcpy(p, s + run, n - run);
    return p + (n - run);
}

static int text_cell(Out *o, int mark, const char *s, size_t n, const char *end) {
    if (n == 0) return empty_cell(o, mark);
    if (n > (SIZE_MAX - 96) / 7 || out_reserve(o, 7 * n + 96)) return -1;
    char *p = o->p + o->len;
    LIT(p, "<c");
    int quoted = starts_like_formula(s, n);
    memcpy(p, quoted ? STQ[mark] : ST[mark], 8);
    p += quoted ? STQ_LEN[mark] : ST_LEN[mark];
    if (blank(s[0]) || blank(s[n - 1])) LIT(p, " t=\"inlineStr\"><is><t xml:space=\"preserve\">");
    else LIT(p, " t=\"inlineStr\"><is><t>");
    p = escaped(p, s, n, end);
    LIT(p, "</t></is></c>");
    o->len = (size_t)(p - o->p);
    return 0;
}

static int text_of(Out *o, int mark, const Arr *a, int64_t i) {
    if (!is_valid(a, i)) return empty_cell(o, mark);
    int64_t j = a->offset + i;
    return text_cell(o, mark, a->data + a->offs[j], (size_t)(a->offs[j + 1] - a->offs[j]),
                     a->end);
}

/* a relative error's cell: its text (pct_text) as text_cell writes it, printed where it goes
 * (the text holds no byte to escape: digits, ".", "e", "+", "-", "%", "N/A", "nan", "inf",
 * " "), not first into a text array and then copied out of it */
static int pct_cell(Out *o, int mark, const Arr *a, int64_t i) {
    o->shown_chars = -1;
    if (!is_valid(a, i)) return empty_cell(o, mark);
    char text[64];
    int n = pct_text(text, ((const double *)a->data)[a->offset + i]);
    o->shown_chars = n;  /* one byte a character: ASCII */
    if (out_reserve(o, 128)) return -1;
    char *p = o->p + o->len;
    LIT(p, "<c");
    int quoted = starts_like_formula(text, (size_t)n);
    memcpy(p, quoted ? STQ[mark] : ST[mark], 8);
    p += quoted ? STQ_LEN[mark] : ST_LEN[mark];
    if (blank(text[0]) || blank(text[n - 1])) LIT(p, " t=\"inlineStr\"><is><t xml:space=\"preserve\">");
    else LIT(p, " t=\"inlineStr\"><is><t>");
    memcpy(p, text, 32);  /* whole (at most 27 bytes count): p has the room */
    p += n;
    LIT(p, "</t></is></c>");
    o->len = (size_t)(p - o->p);
    return 0;
}

/* COL_CHOSEN: row i's own text where it has one (1: its bytes in *t, *n, its buffer's end in
 * *end), else the pick it shows (0: which one in *k) */
static inline __attribute__((always_inline)) int chosen_text(const Column *c, int64_t i,
                                                             const char **t, size_t *n,
                                                             const char **end, int *k) {
    if (is_valid(&c->s, i)) {
        if (c->shown) {
            *k = 2;
            return 0;
        }
        int64_t j = c->s.offset + i;
        *t = c->s.data + c->s.offs[j];
        *n = (size_t)(c->s.offs[j + 1] - c->s.offs[j]);
        *end = c->s.end;
        return 1;
    }
    *k = is_valid(&c->b, i) && bit((const uint8_t *)c->b.data, c->b.offset + i);
    return 0;
}

/* UTF-8 text's characters (code points): its bytes that are not continuation bytes */
static long long utf8_chars(const char *t, size_t n) {
    long long count = 0;
    for (size_t b = 0; b < n; b++) count += ((unsigned char)t[b] & 0xC0) != 0x80;
    return count;
}

/* COL_CHOSEN's cell of row i; its text's characters in o->shown_chars. Inlined, as the
 * empty cell of most rows is: a call and chosen_text's took ~45 instructions more a cell than
 * the text cell of an empty text (a batch's Result on most rows). */
static inline __attribute__((always_inline)) int chosen_cell(Out *o, int mark, const Column *c,
                                                             int64_t i) {
    const char *t, *end;
    size_t n;
    int k;
    if (chosen_text(c, i, &t, &n, &end, &k)) {
        o->shown_chars = utf8_chars(t, n);
        return text_cell(o, mark, t, n, end);
    }
    o->shown_chars = c->pick_chars[k];
    if (!c->pick_len[k]) return empty_cell(o, mark);  /* most rows: a pass's '' */
    return text_cell(o, mark, c->pick[k], c->pick_len[k], c->pick[k] + sizeof c->pick[k]);
}

static int cell(Out *o, int mark, const Column *c, int64_t i, Memo *memo) {
    /* a sheet's cells first (a statistics row's twelve), then its texts */
    if (c->kind != COL_CELL) {
        if (c->kind == COL_TEXT) return text_of(o, mark, &c->s, i);
        if (c->kind == COL_PCT) return pct_cell(o, mark, &c->n, i);
        return chosen_cell(o, mark, c, i);
    }
    if (is_valid(&c->n, i))
        return num_cell(o, mark, ((const double *)c->n.data)[c->n.offset + i], memo);
    if (is_valid(&c->b, i))
        return bool_cell(o, mark, bit((const uint8_t *)c->b.data, c->b.offset + i));
    if (c->s.rows) {  /* a sparse text: the row's place among the rows that have one */
        int64_t q = i < c->s.nrows ? c->s.rows[i] : -1;
        return q < 0 ? empty_cell(o, mark) : text_of(o, mark, &c->s, q);
    }
    return text_of(o, mark, &c->s, i);
}

/* The most characters (Unicode code points) of a's texts in rows order[start:start+count]
 * (order NULL: rows start .. start+count-1) that are not NULL, and best: max_chars' count.
 * like: where a's text is NULL, like's is counted instead (a's texts are NULL where they are
 * the column's before them, like: render's twins 2); NULL: none is. */
static long long most_chars(const Arr *a, const int64_t *order, long long start, long long count,
                            long long best, const Arr *like) {
    for (long long k = 0; k < count; k++) {
        int64_t r = order ? order[start + k] : start + k;
        const Arr *t = a;
        if (!is_valid(t, r)) {
            if (!like || !is_valid(like, r)) continue;
            t = like;
        }
        int64_t j = t->offset + r;
        int32_t from = t->offs[j], to = t->offs[j + 1];
        if (to - from <= best) continue;  /* no more characters than bytes */
        long long n = utf8_chars(t->data + from, (size_t)(to - from));
        if (n > best) best = n;
    }
    return best;
}

/* Whether row i's texts of a and b are the same (both NULL, or the same bytes): the cells
 * rendered of them are then the same bytes too (a cell is its text and the row's mark) */
static int same_text(const Arr *a, const Arr *b, int64_t i) {
    int va = is_valid(a, i), vb = is_valid(b, i);
    if (va != vb) return 0;
    if (!va) return 1;
    int64_t ja = a->offset + i, jb = b->offset + i;
    int32_t n = a->offs[ja + 1] - a->offs[ja];
    if (n != b->offs[jb + 1] - b->offs[jb]) return 0;
    return n == 0 || memcmp(a->data + a->offs[ja], b->data + b->offs[jb], (size_t)n) == 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Python */

/* Rendered rows: the buffer render wrote, handed over as it is (a read-only buffer object,
 * which zipfile, CRC-32 and deflate read as bytes) instead of copied into a bytes object: the
 * copy and its fresh pages took ~1.6 ms of CPU a 20,000-row batch (~18 MB). */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len;
    size_t cap;  /* p's room */
} Rendered;

/* Buffers of rendered rows let go, kept for the next render (keep_buffers): a fresh ~20 MB
 * buffer a 20,000-row batch took ~4,400 page faults a 24,500-row workbook, ~5 ms of system
 * time. Read and written with the GIL held. */
#define SPARES 2
#define SPARE_MAX ((size_t)1 << 26)  /* 64 MB: a larger buffer is freed */
static char *SPARE[SPARES];
static size_t SPARE_CAP[SPARES];
static int KEEP;  /* keep_buffers(True) was called, and no keep_buffers(False) since */

static void rendered_dealloc(PyObject *self) {
    Rendered *r = (Rendered *)self;
    int kept = 0;
    for (int k = 0; KEEP && !kept && r->p && r->cap <= SPARE_MAX && k < SPARES; k++) {
        if (!SPARE[k]) {
            SPARE[k] = r->p;
            SPARE_CAP[k] = r->cap;
            kept = 1;
        }
    }
    if (!kept) free(r->p);
    PyObject_Free(self);
}

/* the largest spare buffer as the start of o (o empty), if there is one */
static void take_spare(Out *o) {
    int best = -1;
    for (int k = 0; k < SPARES; k++)
        if (SPARE[k] && (best < 0 || SPARE_CAP[k] > SPARE_CAP[best])) best = k;
    if (best < 0) return;
    o->p = SPARE[best];
    o->cap = SPARE_CAP[best];
    SPARE[best] = NULL;
}

/* keep_buffers(keep) -> None: from keep_buffers(True) on, the buffers of rendered rows are
 * kept when let go (at most two of at most 64 MB) for the renders after; keep_buffers(False)
 * frees them and keeps none (xlsx.batch_sheets: the pairs of a batch) */
static PyObject *keep_buffers(PyObject *self, PyObject *arg) {
    (void)self;
    int keep = PyObject_IsTrue(arg);
    if (keep < 0) return NULL;
    KEEP = keep;
    if (!keep)
        for (int k = 0; k < SPARES; k++) {
            free(SPARE[k]);
            SPARE[k] = NULL;
        }
    Py_RETURN_NONE;
}

static int rendered_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Rendered *r = (Rendered *)self;
    return PyBuffer_FillInfo(view, self, r->p ? r->p : (char *)"", r->len, 1, flags);
}

static Py_ssize_t rendered_length(PyObject *self) { return ((Rendered *)self)->len; }

static PyBufferProcs RENDERED_BUFFER = {rendered_getbuffer, NULL};
static PySequenceMethods RENDERED_SEQUENCE = {.sq_length = rendered_length};
static PyTypeObject RenderedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "msq.export._sheetxml.Rendered",
    .tp_basicsize = sizeof(Rendered),
    .tp_dealloc = rendered_dealloc,
    .tp_as_sequence = &RENDERED_SEQUENCE,
    .tp_as_buffer = &RENDERED_BUFFER,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "rows render wrote: a read-only buffer (bytes(x) copies it)",
};

/* The buffers of an Arrow array: (validity or None, offsets or None, data, offset). */
static int parse_arr(PyObject *t, Arr *a, Py_buffer *views, int *nviews) {
    PyObject *valid, *offs, *data, *rows = Py_None;
    long long offset;
    if (!PyArg_ParseTuple(t, "OOOL|O", &valid, &offs, &data, &offset, &rows)) return -1;
    PyObject *objs[3] = {valid, offs, data};
    const void *ptrs[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        if (objs[k] == Py_None) continue;
        if (PyObject_GetBuffer(objs[k], &views[*nviews], PyBUF_SIMPLE)) return -1;
        ptrs[k] = views[*nviews].buf;
        (*nviews)++;
    }
    a->valid = ptrs[0];
    a->offs = ptrs[1];
    a->data = ptrs[2];
    a->end = ptrs[2] ? (const char *)ptrs[2] + views[*nviews - 1].len : NULL;
    a->offset = offset;
    a->rows = NULL;
    a->nrows = 0;
    if (rows != Py_None) {  /* a sparse text array (render's cells' 's' only) */
        if (!a->offs || !a->data) {
            PyErr_SetString(PyExc_ValueError, "a sparse array is texts");
            return -1;
        }
        if (PyObject_GetBuffer(rows, &views[*nviews], PyBUF_SIMPLE)) return -1;
        a->rows = views[*nviews].buf;
        a->nrows = views[*nviews].len / (Py_ssize_t)sizeof(int32_t);
        (*nviews)++;
    }
    return 0;
}

/* A chosen column's picks: (text where the flag is false, where true, where the row has its
 * own text or None: that text), each UTF-8 bytes of at most PICK_MAX */
static int parse_picks(PyObject *t, Column *c) {
    PyObject *picks[3];
    if (!PyArg_ParseTuple(t, "OOO", &picks[0], &picks[1], &picks[2])) return -1;
    memset(c->pick, 0, sizeof c->pick);
    c->shown = picks[2] != Py_None;
    for (int k = 0; k < 3; k++) {
        c->pick_len[k] = 0;
        c->pick_chars[k] = 0;
        if (k == 2 && !c->shown) continue;
        char *bytes;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(picks[k], &bytes, &n)) return -1;
        if (n > PICK_MAX) {
            PyErr_Format(PyExc_ValueError, "a chosen column's text of more than %d bytes", PICK_MAX);
            return -1;
        }
        memcpy(c->pick[k], bytes, (size_t)n);
        c->pick_len[k] = (size_t)n;
        c->pick_chars[k] = utf8_chars(bytes, (size_t)n);
    }
    return 0;
}

#define MAX_COLS 64

/* render(columns, marks, order, start, count, first_row[, twins, chars]) -> Rendered (a buffer of
 * the bytes)
 *
 * columns: ("t", text) or ("c", n, s, b), each array as (validity, offsets, data, offset);
 * a cell's s may be sparse, (validity, offsets, data, offset, rows): the texts of the rows
 * that have one, rows each row's place among them (sparse_rows); ("k", flag, text, picks), a
 * chosen column: each row's text one of picks' constants (picks[0] where the boolean flag is
 * false or NULL, picks[1] where true) or, where the row's own text is not NULL, picks[2] (None:
 * that text): the statistics sheet's Result and Err_message, made here of a row's warn and
 * its unmatched message, not by a CASE of texts in DuckDB and its Arrow export of them;
 * marks: one byte per row (0 none, 1 red, 2 yellow) or None; order: int64 row indices (the
 * sheet's order) or None; rows order[start:start+count] become <row r="first_row">...;
 * twins: a byte a column (or None), non-zero for a text column whose text is often the text
 * column's before it in the same row (a bench name the NPU's: root-8x8-5000's names, dtypes
 * and shapes in 99.98 % of its rows): compared first, and where the same, that cell's bytes
 * are copied (a text cell took ~130 instructions); 2 instead: the column's text is NULL where it
 * is the column's before it (the query asked for it so: nullif, a NULL cell otherwise written
 * as the empty text), and there that cell's bytes are copied without a comparison, its DuckDB
 * Arrow export a validity bit instead of the text (a column after such a column is no twin,
 * and no such column follows another); chars: a writable buffer of an int64 a
 * column (or None), each text column's and relative error column's entry raised to the most
 * characters of its texts in the rows rendered (as max_chars and percent_chars count them;
 * -1 to start: a column whose every text is NULL stays so), for the column widths of a sheet
 * rendered before its head: a relative error's text is counted as it is printed
 * (percent_chars printed or bounded each again, ~38 M instructions a 6-pair root batch). */
static PyObject *render(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cols_obj, *marks_obj, *order_obj, *twins_obj = Py_None, *chars_obj = Py_None;
    long long start, count, first_row;
    if (!PyArg_ParseTuple(args, "OOOLLL|OO", &cols_obj, &marks_obj, &order_obj, &start, &count,
                          &first_row, &twins_obj, &chars_obj))
        return NULL;
    Py_ssize_t ncols = PySequence_Size(cols_obj);
    if (ncols < 0) return NULL;
    if (ncols > MAX_COLS) return PyErr_Format(PyExc_ValueError, "more than %d columns", MAX_COLS);
    Column cols[MAX_COLS];
    char twin[MAX_COLS] = {0};
    Py_buffer views[MAX_COLS * 12 + 2];
    int nviews = 0;
    PyObject *result = NULL;
    const uint8_t *marks = NULL;
    const int64_t *order = NULL;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyObject *t = PySequence_GetItem(cols_obj, c);
        if (!t) goto done;
        int ok = 0;
        const char *kind = NULL;
        PyObject *a = NULL, *b = NULL, *d = NULL;
        if (PyArg_ParseTuple(t, "sO|OO", &kind, &a, &b, &d)) {
            if (kind[0] == 't' && !b) {
                cols[c].kind = COL_TEXT;
                ok = !parse_arr(a, &cols[c].s, views, &nviews);
                if (ok && cols[c].s.rows) {  /* twins and widths read a text column by row */
                    PyErr_SetString(PyExc_ValueError, "a text column is not sparse");
                    ok = 0;
                }
            } else if (kind[0] == 'r' && !b) {
                cols[c].kind = COL_PCT;
                ok = !parse_arr(a, &cols[c].n, views, &nviews);
                if (ok && !cols[c].n.data && count > 0) {
                    PyErr_SetString(PyExc_ValueError, "relative errors have data");
                    ok = 0;
                }
            } else if (kind[0] == 'k' && b && d) {
                cols[c].kind = COL_CHOSEN;
                ok = !parse_arr(a, &cols[c].b, views, &nviews)
                     && !parse_arr(b, &cols[c].s, views, &nviews) && !parse_picks(d, &cols[c]);
                if (ok && (cols[c].s.rows || (count > 0 && (!cols[c].s.offs || !cols[c].s.data)))) {
                    PyErr_SetString(PyExc_ValueError, "a chosen column's own texts are texts");
                    ok = 0;
                }
            } else if (kind[0] == 'c' && b && d) {
                cols[c].kind = COL_CELL;
                ok = !parse_arr(a, &cols[c].n, views, &nviews)
                     && !parse_arr(b, &cols[c].s, views, &nviews)
                     && !parse_arr(d, &cols[c].b, views, &nviews);
            } else {
                PyErr_SetString(PyExc_ValueError,
                                "a column is ('t', text), ('r', numbers), ('c', n, s, b) or "
                                "('k', flag, text, picks)");
            }
        }
        Py_DECREF(t);
        if (!ok) goto done;
    }
    if (marks_obj != Py_None) {
        if (PyObject_GetBuffer(marks_obj, &views[nviews], PyBUF_SIMPLE)) goto done;
        marks = views[nviews++].buf;
    }
    if (order_obj != Py_None) {
        if (PyObject_GetBuffer(order_obj, &views[nviews], PyBUF_SIMPLE)) goto done;
        order = views[nviews++].buf;
    }
    if (twins_obj != Py_None) {
        Py_buffer tw;
        if (PyObject_GetBuffer(twins_obj, &tw, PyBUF_SIMPLE)) goto done;
        const char *t = tw.buf;
        int bad = tw.len > 0 && t[0] == 2;
        for (Py_ssize_t c = 1; c < ncols && c < tw.len; c++) {
            int text = cols[c].kind == COL_TEXT && cols[c - 1].kind == COL_TEXT;
            if (t[c] == 2) {  /* NULL where the same: meaningless for any other column */
                bad |= !text || twin[c - 1] == 2;
                twin[c] = 2;
            } else {
                twin[c] = t[c] && text && twin[c - 1] != 2;
            }
        }
        PyBuffer_Release(&tw);
        if (bad) {
            PyErr_SetString(PyExc_ValueError,
                            "twins 2 is a text column's after a text column that is not 2");
            goto done;
        }
    }
    /* chars: a writable int64 a column, each text and relative error column's most
     * characters (max_chars', percent_chars') raised to those of the rows rendered */
    Py_buffer chars_view = {0};
    long long *chars = NULL;
    if (chars_obj != Py_None) {
        if (PyObject_GetBuffer(chars_obj, &chars_view, PyBUF_WRITABLE)) goto done;
        if (chars_view.len < (Py_ssize_t)(ncols * sizeof(long long))) {
            PyBuffer_Release(&chars_view);
            PyErr_SetString(PyExc_ValueError, "chars has fewer places than columns");
            goto done;
        }
        chars = chars_view.buf;
    }
    Out o = {NULL, 0, 0, -1};
    take_spare(&o);
    int failed = 0;
    Memo *memo = calloc(MEMO_SIZE, sizeof(Memo));  /* NULL: every number printed */
    Py_BEGIN_ALLOW_THREADS
    /* the row numbers: the first printed (fmt_row), each next one counted up in its digits
     * (num[lo .. 23]; the 24 bytes from num + lo copied whole), not printed again (fmt_row's
     * divisions took ~100 instructions a row) */
    char num[48] = {0};
    int lo = 24;
    int counting = first_row >= 0;
    if (counting) {
        char first[24];
        int n = fmt_row(first, first_row);
        lo = 24 - n;
        memcpy(num + lo, first, (size_t)n);
    }
    for (long long r = 0; r < count && !failed; r++) {
        if (r == 64 && count > 256) {
            /* room for every row at the first 64 rows' size and an eighth more, reserved
             * once: doubling from 64 kB copied ~a batch's XML again in realloc */
            size_t want = o.len / 64 * (size_t)count;
            failed = out_reserve(&o, want + want / 8 - o.len);
            if (failed) break;
        }
        int64_t i = order ? order[start + r] : (int64_t)(start + r);
        int mark = marks ? marks[i] : 0;
        if (mark > 2) mark = 0;
        failed = out_reserve(&o, 48);
        if (failed) break;
        char *p = o.p + o.len;
        LIT(p, "<row r=\"");
        if (counting) {
            if (r) {  /* one more: the nines at the end become zeros, the digit before them one more */
                int k = 23;
                while (k >= lo && num[k] == '9') num[k--] = '0';
                if (k >= lo) num[k]++;
                else num[--lo] = '1';
            }
            memcpy(p, num + lo, 24);
            p += 24 - lo;
        } else {
            p += fmt_row(p, first_row + r);
        }
        LIT(p, "\">");
        o.len = (size_t)(p - o.p);
        size_t before = 0;  /* where the cell before began */
        for (Py_ssize_t c = 0; c < ncols && !failed; c++) {
            size_t here = o.len;
            if (twin[c] == 2 ? !is_valid(&cols[c].s, i)
                             : twin[c] && same_text(&cols[c - 1].s, &cols[c].s, i)) {
                size_t n = here - before;  /* the same cell: its bytes again */
                failed = out_reserve(&o, n);
                if (!failed) {
                    memcpy(o.p + here, o.p + before, n);
                    o.len += n;
                }
            } else {
                failed = cell(&o, mark, &cols[c], i, memo);
                /* a relative error's or a chosen text's characters, as its cell wrote it */
                if (chars && cols[c].kind >= COL_PCT && o.shown_chars > chars[c])
                    chars[c] = o.shown_chars;
            }
            before = here;
        }
        if (!failed) failed = out_reserve(&o, 6);
        if (!failed) {
            memcpy(o.p + o.len, "</row>", 6);
            o.len += 6;
        }
    }
    /* the texts' characters: the rows just rendered again, their offsets still in cache */
    for (Py_ssize_t c = 0; chars && !failed && c < ncols; c++)
        if (cols[c].kind == COL_TEXT && cols[c].s.offs && cols[c].s.data)
            chars[c] = most_chars(&cols[c].s, order, start, count, chars[c],
                                  twin[c] == 2 ? &cols[c - 1].s : NULL);
    Py_END_ALLOW_THREADS
    free(memo);
    if (chars) PyBuffer_Release(&chars_view);
    if (failed) {
        free(o.p);
        PyErr_NoMemory();
        goto done;
    }
    Rendered *rendered = PyObject_New(Rendered, &RenderedType);
    if (!rendered) {
        free(o.p);
        goto done;
    }
    rendered->p = o.p;  /* its own now */
    rendered->len = (Py_ssize_t)o.len;
    rendered->cap = o.cap;
    result = (PyObject *)rendered;
done:
    for (int k = 0; k < nviews; k++) PyBuffer_Release(&views[k]);
    return result;
}

/* The optional order argument of max_chars and percent_chars: int64 row indices, of which
 * order[start:start+count] are read (None: rows 0..count-1, *order left NULL). Its buffer is
 * held in views[*nviews] (released by the caller); -1 with the error set when it is shorter. */
static int take_order(PyObject *order_obj, long long start, long long count, Py_buffer *views,
                      int *nviews, const int64_t **order) {
    if (order_obj == Py_None) return 0;
    if (PyObject_GetBuffer(order_obj, &views[*nviews], PyBUF_SIMPLE)) return -1;
    Py_buffer *view = &views[(*nviews)++];
    *order = view->buf;
    if (start < 0 || (start + count) * (long long)sizeof(int64_t) > view->len) {
        PyErr_SetString(PyExc_ValueError, "rows past the order's end");
        return -1;
    }
    return 0;
}

/* max_chars(text, count[, order, start]) -> int or None
 *
 * The most characters (Unicode code points, as DuckDB's length() counts them) among the first
 * count strings of a text array (validity, offsets, data, offset) that are not NULL (with
 * order, int64 row indices: among rows order[start:start+count]); None when every one is
 * (DuckDB's max(length(x)) of the same rows). The workbook's column widths are taken from the
 * rows already fetched for rendering instead of a second query over the sheet. */
static PyObject *max_chars(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *text, *order_obj = Py_None, *like_obj = Py_None;
    long long count, start = 0;
    if (!PyArg_ParseTuple(args, "OL|OLO", &text, &count, &order_obj, &start, &like_obj))
        return NULL;
    Py_buffer views[8];
    int nviews = 0;
    Arr a, like;
    long long best = -1;
    const int64_t *order = NULL;
    if (parse_arr(text, &a, views, &nviews) == 0 && count > 0) {
        if (take_order(order_obj, start, count, views, &nviews, &order)) goto done;
        if (like_obj != Py_None && parse_arr(like_obj, &like, views, &nviews)) goto done;
        if (!a.offs || !a.data || (like_obj != Py_None && (!like.offs || !like.data))) {
            PyErr_SetString(PyExc_ValueError, "a text array has offsets and data");
        } else {
            Py_BEGIN_ALLOW_THREADS
            best = most_chars(&a, order, order ? start : 0, count, best,
                              like_obj != Py_None ? &like : NULL);
            Py_END_ALLOW_THREADS
        }
    }
done:
    for (int k = 0; k < nviews; k++) PyBuffer_Release(&views[k]);
    if (PyErr_Occurred()) return NULL;
    if (best < 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(best);
}

/* chosen_chars(column, count[, order, start]) -> int or None
 *
 * The most characters of a chosen column's texts (column: render's ('k', flag, text, picks))
 * in its first count rows (with order: rows order[start:start+count]), as render counts them
 * with chars; None without rows. */
static PyObject *chosen_chars(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *col_obj, *order_obj = Py_None;
    long long count, start = 0;
    if (!PyArg_ParseTuple(args, "OL|OL", &col_obj, &count, &order_obj, &start)) return NULL;
    Py_buffer views[8];
    int nviews = 0;
    Column c;
    long long best = -1;
    const int64_t *order = NULL;
    const char *kind;
    PyObject *flag, *text, *picks;
    if (!PyArg_ParseTuple(col_obj, "sOOO", &kind, &flag, &text, &picks)) return NULL;
    if (kind[0] != 'k') return PyErr_Format(PyExc_ValueError, "not a chosen column");
    if (count <= 0) Py_RETURN_NONE;
    if (parse_arr(flag, &c.b, views, &nviews) || parse_arr(text, &c.s, views, &nviews)
        || parse_picks(picks, &c) || take_order(order_obj, start, count, views, &nviews, &order))
        goto done;
    if (c.s.rows || !c.s.offs || !c.s.data) {
        PyErr_SetString(PyExc_ValueError, "a chosen column's own texts are texts");
        goto done;
    }
    best = 0;
    for (long long r = 0; r < count; r++) {
        int64_t i = order ? order[start + r] : r;
        const char *t, *end;
        size_t n;
        int k;
        if (chosen_text(&c, i, &t, &n, &end, &k)) {
            if ((long long)n > best) {
                long long m = utf8_chars(t, n);
                if (m > best) best = m;
            }
        } else if (c.pick_chars[k] > best) {
            best = c.pick_chars[k];
        }
    }
done:
    for (int k = 0; k < nviews; k++) PyBuffer_Release(&views[k]);
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromLongLong(best);
}

/* percent_texts(numbers, count) -> (validity, offsets, data, 0)
 *
 * A text array (as render and max_chars read one) of count rows from a DOUBLE array ((validity,
 * offsets, data, offset)) of relative errors as sql/compare/schema/10_macros.sql's rel_text
 * prints them: -1 "N/A", -2 " ", -3 "0.0%" (the codes of the fixed texts), else the number's
 * Python repr (fmt_repr) followed by "%"; NULL stays NULL. The statistics workbook's relative
 * errors: the SQL keeps the number, and its text ("12.5%") is printed here. */
static PyObject *percent_texts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *num_obj;
    long long count;
    if (!PyArg_ParseTuple(args, "OL", &num_obj, &count)) return NULL;
    if (count < 0 || count > INT32_MAX) return PyErr_Format(PyExc_ValueError, "bad count");
    Py_buffer views[3];
    int nviews = 0;
    Arr num;
    PyObject *result = NULL;
    uint8_t *valid = NULL;
    int32_t *offs = NULL;
    Out o = {NULL, 0, 0};
    if (parse_arr(num_obj, &num, views, &nviews)) goto done;
    if (count > 0 && !num.data) {
        PyErr_SetString(PyExc_ValueError, "numbers have data");
        goto done;
    }
    size_t vbytes = (size_t)(count + 7) / 8;
    valid = calloc(vbytes ? vbytes : 1, 1);
    offs = malloc(sizeof(int32_t) * (size_t)(count + 1));
    if (!valid || !offs) {
        PyErr_NoMemory();
        goto done;
    }
    /* room for a typical text of every row, reserved once */
    int failed = out_reserve(&o, (size_t)count * 24 + 64);
    Py_BEGIN_ALLOW_THREADS
    offs[0] = 0;
    for (long long i = 0; i < count && !failed; i++) {
        if (is_valid(&num, i)) {
            failed = out_reserve(&o, 48);
            if (failed) break;
            double x = ((const double *)num.data)[num.offset + i];
            o.len += (size_t)pct_text(o.p + o.len, x);
            valid[i >> 3] |= (uint8_t)(1u << (i & 7));
        }
        if (o.len > INT32_MAX) failed = 1;
        offs[i + 1] = (int32_t)o.len;
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("(y#y#y#i)", (const char *)valid, (Py_ssize_t)vbytes,
                           (const char *)offs, (Py_ssize_t)(sizeof(int32_t) * (size_t)(count + 1)),
                           o.p ? o.p : "", (Py_ssize_t)o.len, 0);
done:
    free(valid);
    free(offs);
    free(o.p);
    for (int k = 0; k < nviews; k++) PyBuffer_Release(&views[k]);
    return result;
}

/* percent_chars(numbers, count[, order, start]) -> int or None
 *
 * max_chars of percent_texts(numbers, ...) without the texts: the most characters of a
 * relative error's text (pct_text) among the first count rows that are not NULL (with order,
 * int64 row indices: among rows order[start:start+count]); None when every one is. The C
 * renderer prints a relative error's text where its cell goes (COL_PCT), and the column's
 * width is the longest. A number's text is printed here only when it could be longer than the
 * longest so far: away from a power of ten its decimal exponent is decimal_exponent's, and
 * seventeen digits (pct_chars_bound) the most it can have; most rows of a column are of a few
 * exponents, and fmt_repr took ~315 instructions a number. */
static PyObject *percent_chars(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *num_obj, *order_obj = Py_None;
    long long count, start = 0;
    if (!PyArg_ParseTuple(args, "OL|OL", &num_obj, &count, &order_obj, &start)) return NULL;
    Py_buffer views[4];
    int nviews = 0;
    Arr a;
    long long best = -1;
    const int64_t *order = NULL;
    if (parse_arr(num_obj, &a, views, &nviews) == 0 && count > 0) {
        if (take_order(order_obj, start, count, views, &nviews, &order)) goto done;
        if (!a.data) {
            PyErr_SetString(PyExc_ValueError, "numbers have data");
        } else {
            Py_BEGIN_ALLOW_THREADS
            char text[64];
            for (long long k = 0; k < count; k++) {
                int64_t r = order ? order[start + k] : k;
                if (!is_valid(&a, r)) continue;
                double x = ((const double *)a.data)[a.offset + r];
                if (x != 0.0 && isfinite(x) && x != -1.0 && x != -2.0 && x != -3.0) {
                    double m = fabs(x);
                    uint64_t bits;
                    memcpy(&bits, &m, sizeof bits);
                    if ((bits >> 52) != 0) {  /* normal (a subnormal is printed) */
                        int e = decimal_exponent(m);
                        /* near a power of ten (within ~2^-40 relative) the exponent may be
                         * one off, and repr's rounding may carry into the next: printed */
                        double lo = POW10D[e + 350], hi = POW10D[e + 1 + 350];
                        if (m > lo * (1 + 0x1p-40) && m < hi * (1 - 0x1p-40)
                            && pct_chars_bound(signbit(x) != 0, e) <= best)
                            continue;
                    }
                }
                long long n = pct_text(text, x);
                if (n > best) best = n;
            }
            Py_END_ALLOW_THREADS
        }
    }
done:
    for (int k = 0; k < nviews; k++) PyBuffer_Release(&views[k]);
    if (PyErr_Occurred()) return NULL;
    if (best < 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(best);
}

/* sparse_rows(order, seq, count, sparse_seq) -> bytes: an int32 a row
 *
 * Where each of a sheet's count rows is among the few rows that have a text: seq is the rows'
 * int64 out_seq, order their indices in out_seq order (the sheet's), sparse_seq the out_seq of
 * the rows that have one (ascending, each a row's of seq); row p's entry is its place in
 * sparse_seq, or -1. The workbook reads the cells' mostly-NULL texts of the rows that have one
 * alone (msq.export.xlsx._spread_cell_texts: DuckDB's Arrow export appended every NULL), and
 * render reads them through this index (an Arr's rows), shared by every such column: they were
 * spread over every row first (arrays of count offsets each, copied into bytes, ~45 M
 * instructions a 6-pair root batch). */
static PyObject *sparse_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *order_obj, *seq_obj, *sparse_obj;
    long long count;
    if (!PyArg_ParseTuple(args, "OOLO", &order_obj, &seq_obj, &count, &sparse_obj)) return NULL;
    if (count < 0 || count > INT32_MAX) return PyErr_Format(PyExc_ValueError, "bad count");
    Py_buffer bufs[3];
    int nbufs = 0;
    PyObject *result = NULL;
    if (PyObject_GetBuffer(order_obj, &bufs[0], PyBUF_SIMPLE)) goto done;
    nbufs++;
    if (PyObject_GetBuffer(seq_obj, &bufs[1], PyBUF_SIMPLE)) goto done;
    nbufs++;
    if (PyObject_GetBuffer(sparse_obj, &bufs[2], PyBUF_SIMPLE)) goto done;
    nbufs++;
    if (bufs[0].len < count * 8 || bufs[1].len < count * 8) {
        PyErr_SetString(PyExc_ValueError, "order and seq hold count int64 each");
        goto done;
    }
    const int64_t *order = bufs[0].buf, *seq = bufs[1].buf, *sparse = bufs[2].buf;
    int64_t m = bufs[2].len / 8;
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(sizeof(int32_t) * (size_t)count));
    if (!result) goto done;
    int32_t *at = (int32_t *)PyBytes_AS_STRING(result);
    /* each row's index in the sparse rows (-1: none), by a merge in out_seq order */
    int64_t j = 0, matched = 0;
    for (long long k = 0; k < count; k++) {
        int64_t p = order[k];
        if (p < 0 || p >= count) {
            PyErr_SetString(PyExc_ValueError, "order out of range");
            Py_CLEAR(result);
            goto done;
        }
        int64_t s = seq[p];
        while (j < m && sparse[j] < s) j++;
        if (j < m && sparse[j] == s) {
            at[p] = (int32_t)j++;
            matched++;
        } else {
            at[p] = -1;
        }
    }
    if (matched != m) {  /* a sparse row not among the rows, or out of order */
        PyErr_SetString(PyExc_ValueError, "sparse_seq: not ascending out_seq of the rows");
        Py_CLEAR(result);
    }
done:
    for (int k = 0; k < nbufs; k++) PyBuffer_Release(&bufs[k]);
    return result;
}

/* fmt_repr(x) -> str: the number as percent_texts prints it (for the tests) */
static PyObject *py_fmt_repr(PyObject *self, PyObject *arg) {
    (void)self;
    double x = PyFloat_AsDouble(arg);
    if (x == -1.0 && PyErr_Occurred()) return NULL;
    char text[48];
    int n = fmt_repr(text, x);
    return PyUnicode_FromStringAndSize(text, n);
}

/* fmt16g(x) -> str: the number as render writes it (for the tests) */
static PyObject *py_fmt16g(PyObject *self, PyObject *arg) {
    (void)self;
    double x = PyFloat_AsDouble(arg);
    if (x == -1.0 && PyErr_Occurred()) return NULL;
    char text[48];
    int n = fmt16g(text, x);
    return PyUnicode_FromStringAndSize(text, n);
}

static PyMethodDef METHODS[] = {
    {"render", render, METH_VARARGS,
     "render(columns, marks, order, start, count, first_row[, twins, chars]) -> a buffer of <row> elements"},
    {"keep_buffers", keep_buffers, METH_O,
     "keep_buffers(keep) -> None: keep rendered rows' buffers for the next renders, or free them"},
    {"fmt16g", py_fmt16g, METH_O, "fmt16g(x) -> printf('%.16g', x)"},
    {"fmt_repr", py_fmt_repr, METH_O, "fmt_repr(x) -> repr(x), any NaN 'nan'"},
    {"percent_texts", percent_texts, METH_VARARGS,
     "percent_texts(numbers, count) -> a text array of relative errors as rel_text prints them"},
    {"percent_chars", percent_chars, METH_VARARGS,
     "percent_chars(numbers, count[, order, start]) -> the most characters of a relative "
     "error's text, or None"},
    {"sparse_rows", sparse_rows, METH_VARARGS,
     "sparse_rows(order, seq, count, sparse_seq) -> each row's place among the sparse rows"},
    {"chosen_chars", chosen_chars, METH_VARARGS,
     "chosen_chars(column, count[, order, start]) -> the most characters of a chosen column's "
     "texts, or None"},
    {"max_chars", max_chars, METH_VARARGS,
     "max_chars(text, count[, order, start, like]) -> the most characters of a non-NULL string "
     "(like's where text's is NULL), or None"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_sheetxml",
                                    "workbook rows as SpreadsheetML, in C (msq/export/_sheetxml.c)",
                                    -1, METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__sheetxml(void) {
    init_pow10();
    init_pow10d();
    init_special();
#if defined(__SIZEOF_INT128__)
    init_pow5();
#endif
    if (PyType_Ready(&RenderedType) < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m && msq_add_source_crc(m) < 0) Py_CLEAR(m);
    return m;
}
