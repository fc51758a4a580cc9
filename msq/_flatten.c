/* The fast path of msq's dump reader: dump.json parsed (yyjson) and flattened into Arrow
 * column buffers in one C pass, without a Python object per value.
 *
 * It is the same flattening as msq/flatten.py (the reference, and the only path for anything
 * unusual): this code handles the shapes msprobe writes and *gives up* (returns None) on
 * anything else -- a parse error, a token Python's json would refuse (nan/inf spellings other
 * than NaN/Infinity/-Infinity), an integer of more than 18 digits, duplicate keys, deep nesting,
 * a non-string dtype, an argument msq would refuse ... -- and the caller then runs the Python
 * reader, which gives the exact rows, warnings and error messages (file:line:column). So the
 * C path never has to reproduce an error message, only the rows of well-formed dumps, and
 * tests/test_flatten_fast.py checks that it gives the Python reader's rows exactly.
 *
 * yyjson reads the numbers as it parses (an int stays an int: its text is a cell); those beyond
 * int64 or the double range stay raw texts (YYJSON_READ_BIGNUM_AS_RAW), and only Python's own
 * spellings of non-finite floats parse (yyjson.c built with MSQ_PYTHON_LITERALS, checked when
 * the module loads).
 * The parse is in situ (the caller's buffer has YYJSON_PADDING_SIZE spare bytes) and runs with
 * the GIL released: both sides of a compare flatten at once in two threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_source_crc.h"  /* msq_add_source_crc: SOURCE_CRC, see msq/cext.py */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "_vendor/yyjson/yyjson.h"

#define MAX_DEPTH 10          /* msq/flatten.py MAX_DEPTH: deeper arguments are refused there */
#define MAX_JSON_NESTING 400  /* deeper documents: Python's json decides (RecursionError) */
#define MAX_RAW_NUMBER 1000   /* longer number texts: Python decides (int digit limit) */

/* ---------------------------------------------------------------------------------------- */
/* growable buffers and Arrow columns                                                        */

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

/* growing a buffer (the rare path: buf_reserve's check is inlined in every append) */
static __attribute__((noinline)) int buf_grow(Buf *b, size_t extra) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(Buf *b, size_t extra) {
    if (__builtin_expect(b->len + extra <= b->cap, 1)) return 0;
    return buf_grow(b, extra);
}

/* inlined: an append of a constant size is a store, not a call of memcpy */
static inline int buf_put(Buf *b, const void *data, size_t n) {
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

static inline int buf_byte(Buf *b, char v) {
    if (buf_reserve(b, 1)) return -1;
    b->p[b->len++] = v;
    return 0;
}

static void buf_free(Buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* K_U64, K_U8: arrow_stream's input only (the tensor pool's hashes; text_codes' codes) */
enum { K_STR, K_I32, K_I64, K_F64, K_BOOL, K_U64, K_U8 };

typedef struct {
    int kind;
    int nullable;
    Buf data;   /* values (K_STR: the bytes; K_BOOL: one byte per value) */
    Buf offs;   /* K_STR: int32 offsets, n + 1 of them */
    Buf valid;  /* one byte per value: 1 valid, 0 null */
    int64_t n, nulls;
} Col;

typedef struct {
    size_t data, offs, valid;
    int64_t n, nulls;
} ColMark;

static int col_init(Col *c, int kind, int nullable) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->nullable = nullable;
    if (kind == K_STR) {
        int32_t zero = 0;
        return buf_put(&c->offs, &zero, sizeof zero);
    }
    return 0;
}

static void col_free(Col *c) {
    buf_free(&c->data);
    buf_free(&c->offs);
    buf_free(&c->valid);
}

static inline int col_valid(Col *c, int ok) {
    if (!ok) c->nulls++;
    c->n++;
    return buf_byte(&c->valid, ok ? 1 : 0);
}

static inline int col_str(Col *c, const char *s, size_t n) {
    /* Arrow's string type: int32 offsets (2 GiB a column; a dump.json is at most 1 GiB) */
    if (c->data.len + n > INT32_MAX || buf_put(&c->data, s, n)) return -1;
    int32_t end = (int32_t)c->data.len;
    if (buf_put(&c->offs, &end, sizeof end)) return -1;
    return col_valid(c, 1);
}

/* a one-character string (the statistics' kinds) */
static inline int col_char(Col *c, char ch) {
    if (c->data.len + 1 > INT32_MAX || buf_byte(&c->data, ch)) return -1;
    int32_t end = (int32_t)c->data.len;
    if (buf_put(&c->offs, &end, sizeof end)) return -1;
    return col_valid(c, 1);
}

static inline int col_null(Col *c) {
    if (c->kind == K_STR) {
        int32_t end = (int32_t)c->data.len;
        if (buf_put(&c->offs, &end, sizeof end)) return -1;
    } else {
        static const char zeros[8] = {0};
        size_t width = c->kind == K_I32 ? 4 : c->kind == K_BOOL ? 1 : 8;
        if (buf_put(&c->data, zeros, width)) return -1;
    }
    return col_valid(c, 0);
}

static inline int col_i32(Col *c, int32_t v) { return buf_put(&c->data, &v, 4) || col_valid(c, 1); }
static inline int col_i64(Col *c, int64_t v) { return buf_put(&c->data, &v, 8) || col_valid(c, 1); }
static inline int col_f64(Col *c, double v) { return buf_put(&c->data, &v, 8) || col_valid(c, 1); }
static inline int col_bool(Col *c, int v) { return buf_byte(&c->data, v ? 1 : 0) || col_valid(c, 1); }

/* A row's appends to the tensors columns (emit_row, stat_cols) check no room of their own:
 * rows_room made room for one more value in every row column first (its validity byte, its
 * offset or fixed-width value, and a one-byte string's byte), so only a string's bytes are
 * checked (r_str). The same buffers and bytes as the col_ appends above. */
static inline void r_valid(Col *c, int ok) {
    c->valid.p[c->valid.len++] = ok ? 1 : 0;
    c->n++;
    if (!ok) c->nulls++;
}

static inline void r_end(Col *c) {
    int32_t end = (int32_t)c->data.len;
    memcpy(c->offs.p + c->offs.len, &end, sizeof end);
    c->offs.len += sizeof end;
}

static inline int r_str(Col *c, const char *s, size_t n) {
    if (c->data.len + n > INT32_MAX || buf_put(&c->data, s, n)) return -1;
    r_end(c);
    r_valid(c, 1);
    return 0;
}

static inline void r_char(Col *c, char ch) {  /* a one-byte string: data.len <= n here */
    c->data.p[c->data.len++] = ch;
    r_end(c);
    r_valid(c, 1);
}

static inline void r_null(Col *c) {
    if (c->kind == K_STR) {
        r_end(c);
    } else {
        size_t width = c->kind == K_I32 ? 4 : c->kind == K_BOOL ? 1 : 8;
        memset(c->data.p + c->data.len, 0, width);
        c->data.len += width;
    }
    r_valid(c, 0);
}

static inline void r_i32(Col *c, int32_t v) {
    memcpy(c->data.p + c->data.len, &v, 4);
    c->data.len += 4;
    r_valid(c, 1);
}

static inline void r_i64(Col *c, int64_t v) {
    memcpy(c->data.p + c->data.len, &v, 8);
    c->data.len += 8;
    r_valid(c, 1);
}

static inline void r_f64(Col *c, double v) {
    memcpy(c->data.p + c->data.len, &v, 8);
    c->data.len += 8;
    r_valid(c, 1);
}

static inline void r_bool(Col *c, int v) {
    c->data.p[c->data.len++] = v ? 1 : 0;
    r_valid(c, 1);
}

/* b's capacity at least `total` bytes */
static int buf_room(Buf *b, size_t total) {
    return total > b->len ? buf_reserve(b, total - b->len) : 0;
}

static ColMark col_mark(Col *c) {
    ColMark m = {c->data.len, c->offs.len, c->valid.len, c->n, c->nulls};
    return m;
}

static void col_reset(Col *c, ColMark m) {
    c->data.len = m.data;
    c->offs.len = m.offs;
    c->valid.len = m.valid;
    c->n = m.n;
    c->nulls = m.nulls;
}

/* n bytes at a and b equal, compared by overlapping loads (texts of a few bytes: no memcmp call) */
static inline int same_short(const char *a, const char *b, size_t n) {
    if (n >= 8) {
        if (n > 16) return memcmp(a, b, n) == 0;
        uint64_t x0, y0, x1, y1;
        memcpy(&x0, a, 8);
        memcpy(&y0, b, 8);
        memcpy(&x1, a + n - 8, 8);
        memcpy(&y1, b + n - 8, 8);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    if (n >= 4) {
        uint32_t x0, y0, x1, y1;
        memcpy(&x0, a, 4);
        memcpy(&y0, b, 4);
        memcpy(&x1, a + n - 4, 4);
        memcpy(&y1, b + n - 4, 4);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    return n == 0 || (a[0] == b[0] && a[n >> 1] == b[n >> 1] && a[n - 1] == b[n - 1]);
}

/* ---------------------------------------------------------------------------------------- */
/* the flattener                                                                             */

/* columns of the tensors table, in msq/flatten.py _COLUMNS order */
enum {
    C_OP_SEQ, C_ROW_IN_OP, C_NAME, C_DISP_NAME, C_IO, C_DISP_IO, C_DTYPE, C_SHAPE, C_MD5,
    C_DATA_NAME, C_IS_TENSOR, C_NUMEL, C_STATS, /* then 4 x (num, kind, str) */
    C_IO_K = C_STATS + 12,  /* the row's place among its op's rows of its disp_io, from 1 */
    N_ROW_COLS
};
/* columns of the ops table; row_key: the op's rows' disp_name in order, joined by U+001F;
 * n_in_rows / n_out_rows: its rows whose io is input / output (what op_keys aggregates) */
enum { O_NAME, O_N_ROWS, O_N_ARGS, O_N_INPUT, O_N_OUTPUT, O_ROW_KEY, O_N_IN_ROWS, O_N_OUT_ROWS,
       O_STRUCT_KEY, N_OP_COLS };

static const char *ROW_NAMES[N_ROW_COLS] = {
    "op_seq", "row_in_op", "name", "disp_name", "io", "disp_io", "dtype", "shape", "md5",
    "data_name", "is_tensor", "numel",
    "max_num", "max_kind", "max_str", "min_num", "min_kind", "min_str",
    "mean_num", "mean_kind", "mean_str", "norm_num", "norm_kind", "norm_str", "io_k"};
static const char *OP_NAMES[N_OP_COLS] = {"op_name", "n_rows", "n_input_args", "n_input",
                                          "n_output", "row_key", "n_in_rows", "n_out_rows",
                                          "struct_key"};

typedef struct {
    Col rows[N_ROW_COLS];
    Col ops[N_OP_COLS];
    int64_t row_cap;    /* every row column has room for this many values (rows_room) */
    int64_t row_hint;   /* the rows first made room for: the document's rows as guessed */
    int real_data, fix_direction;
    int32_t op_seq, row_in_op;
    int32_t k_in, k_out;  /* the op's rows so far whose disp_io is input / output */
    const char *io;     /* "input" / "output" */
    const char *op;     /* the current op name */
    size_t op_len;
    Buf name;           /* the argument name being built */
    Buf tmp;
    Buf shape;          /* a row's shape text (list_text), reused row after row */
    struct ShapeSlot *shapes;  /* shapes seen (shape_seen), SHAPE_SLOTS of them, or NULL */
    Buf shape_texts;    /* their texts */
    int nomem;          /* allocation failed */
    const char *why;    /* why the fast path gave up (NULL: it did not) */
} Flat;

/* give up: the Python reader takes over */
#define GIVE_UP(f, reason) do { (f)->why = (reason); return -1; } while (0)

static int is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* A number as Python's json reads it: an int (exact, its text a cell) or a float. */
typedef struct {
    int is_int;
    int64_t i;
    double d;
} Num;

static int read_num_other(Flat *f, yyjson_val *v, Num *out);

static inline int read_num(Flat *f, yyjson_val *v, Num *out) {
    /* yyjson read the number as it parsed the document (the same correctly rounded double as
     * its yyjson_read_number gives the text); an int of more than 18 digits is left to Python,
     * as before (its |value| is 10^18 or more: JSON has no leading zeros) */
    if (yyjson_is_real(v)) {
        out->is_int = 0;
        out->d = yyjson_get_real(v);
        return 0;
    }
    return read_num_other(f, v, out);
}

/* read_num's ints and raw texts (a statistics dump's floats take the inlined path above) */
static __attribute__((noinline)) int read_num_other(Flat *f, yyjson_val *v, Num *out) {
    if (yyjson_is_uint(v) || yyjson_is_sint(v)) {
        int64_t i;
        if (yyjson_is_uint(v)) {
            uint64_t u = yyjson_get_uint(v);
            if (u >= 1000000000000000000ULL) GIVE_UP(f, "a long integer");
            i = (int64_t)u;
        } else {
            i = yyjson_get_sint(v);
            if (i <= -1000000000000000000LL) GIVE_UP(f, "a long integer");
        }
        out->is_int = 1;
        out->i = i;   /* "-0" is the int 0 */
        out->d = (double)i;
        return 0;
    }
    /* a raw text: a number yyjson does not read into an int64 or a finite double
     * (YYJSON_READ_BIGNUM_AS_RAW) */
    const char *raw = yyjson_get_raw(v);
    size_t len = yyjson_get_len(v);
    if (len == 0 || len > 64) GIVE_UP(f, "a long number");
    if (is_letter(raw[0]) || (raw[0] == '-' && len > 1 && is_letter(raw[1]))) {
        /* Python's json knows exactly these three spellings */
        if (len == 3 && memcmp(raw, "NaN", 3) == 0) out->d = NAN;
        else if (len == 8 && memcmp(raw, "Infinity", 8) == 0) out->d = INFINITY;
        else if (len == 9 && memcmp(raw, "-Infinity", 9) == 0) out->d = -INFINITY;
        else GIVE_UP(f, "a non-finite literal Python does not read");
        out->is_int = 0;
        return 0;
    }
    if (memchr(raw, '.', len) || memchr(raw, 'e', len) || memchr(raw, 'E', len)) {
        char text[72];
        memcpy(text, raw, len);
        text[len] = 0;
        yyjson_val val;
        yyjson_read_err err;
        const char *end = yyjson_read_number(text, &val, YYJSON_READ_ALLOW_INF_AND_NAN, NULL, &err);
        if (!end || end != text + len || !yyjson_is_real(&val)) GIVE_UP(f, "a float");
        out->is_int = 0;
        out->d = yyjson_get_real(&val);
        return 0;
    }
    size_t k = raw[0] == '-' ? 1 : 0;
    if (len - k > 18) GIVE_UP(f, "a long integer");
    int64_t i = 0;
    for (size_t j = k; j < len; j++) {
        if (raw[j] < '0' || raw[j] > '9') GIVE_UP(f, "an odd integer");
        i = i * 10 + (raw[j] - '0');
    }
    out->is_int = 1;
    out->i = k ? -i : i;   /* "-0" is the int 0 */
    out->d = (double)out->i;
    return 0;
}

/* a number: read by yyjson, or left raw (a big one) */
static int is_number(yyjson_val *v) { return yyjson_is_num(v) || yyjson_is_raw(v); }

/* str(value) of an int, or of a list of ints/bools (Python's repr), into f->tmp */
static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static int int_text(Buf *b, int64_t i) {
    char text[24];
    char *end = text + sizeof text, *p = end;
    uint64_t u = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
    while (u >= 100) {  /* two digits at a time */
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * (u % 100), 2);
        u /= 100;
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * u, 2);
    } else {
        *--p = (char)('0' + u);
    }
    if (i < 0) *--p = '-';
    return buf_put(b, p, (size_t)(end - p));
}

static int list_text(Flat *f, yyjson_val *list, Buf *out, int *all_int, int64_t *prod,
                     int *overflow) {
    out->len = 0;
    *all_int = 1;
    *prod = 1;
    *overflow = 0;
    if (buf_put(out, "[", 1)) return -2;
    size_t idx, max;
    yyjson_val *e;
    yyjson_arr_foreach(list, idx, max, e) {
        if (idx && buf_put(out, ", ", 2)) return -2;
        if (yyjson_is_bool(e)) {
            *all_int = 0;
            if (buf_put(out, yyjson_get_bool(e) ? "True" : "False", yyjson_get_bool(e) ? 4 : 5))
                return -2;
        } else if (is_number(e)) {
            Num num;
            if (read_num(f, e, &num)) return -1;
            if (!num.is_int) GIVE_UP(f, "a float in a list");
            if (int_text(out, num.i)) return -2;
            if (!*overflow && __builtin_mul_overflow(*prod, num.i, prod)) *overflow = 1;
        } else {
            GIVE_UP(f, "a list of other than ints");
        }
    }
    if (buf_put(out, "]", 1)) return -2;
    return 0;
}

#define MEM(expr) do { if (expr) { f->nomem = 1; return -1; } } while (0)

static int has_dup_keys(Flat *f, yyjson_val *obj) {
    size_t n = yyjson_obj_size(obj);
    if (n < 2) return 0;
    if (n > 64) GIVE_UP(f, "a large object");
    yyjson_val *keys[64];
    size_t idx, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(obj, idx, max, k, v) {
        for (size_t j = 0; j < idx; j++)
            if (yyjson_get_len(keys[j]) == yyjson_get_len(k)
                && memcmp(yyjson_get_str(keys[j]), yyjson_get_str(k), yyjson_get_len(k)) == 0)
                GIVE_UP(f, "duplicate keys");
        keys[idx] = k;
    }
    return 0;
}

/* one statistic: (num, kind, str) columns, as flatten._kind */
static int stat_cols(Flat *f, int s, yyjson_val *v) {
    Col *num = &f->rows[C_STATS + 3 * s], *kind = num + 1, *str = num + 2;
    if (!v || yyjson_is_null(v)) {
        r_null(num);
        r_char(kind, 'n');
        r_null(str);
    } else if (yyjson_is_bool(v)) {
        r_f64(num, yyjson_get_bool(v) ? 1.0 : 0.0);
        r_char(kind, 'b');
        r_null(str);
    } else if (is_number(v)) {
        Num n;
        if (read_num(f, v, &n)) return -1;
        if (n.is_int) {
            f->tmp.len = 0;
            MEM(int_text(&f->tmp, n.i));
            r_f64(num, n.d);
            r_char(kind, 'i');
            MEM(r_str(str, f->tmp.p, f->tmp.len));
        } else {
            r_f64(num, n.d);
            r_char(kind, 'f');
            r_null(str);
        }
    } else if (yyjson_is_str(v)) {
        r_null(num);
        r_char(kind, 's');
        MEM(r_str(str, yyjson_get_str(v), yyjson_get_len(v)));
    } else {
        GIVE_UP(f, "a statistic that is a list or an object");
    }
    return 0;
}

/* The text holds \ud or \uD (as two memmem calls would find it, in one pass: a dump has few
 * backslashes, and memchr skips the rest at memory speed; two memmem passes were a tenth of
 * reading a dump) */
static int has_surrogate_escape(const char *p, size_t n) {
    const char *end = p + n;
    while (p < end && (p = memchr(p, '\\', (size_t)(end - p))) != NULL) {
        if (end - p >= 3 && p[1] == 'u' && (p[2] == 'd' || p[2] == 'D')) return 1;
        p++;
    }
    return 0;
}

static int contains(const char *hay, size_t n, const char *needle) {
    return memmem(hay, n, needle, strlen(needle)) != NULL;
}

/* ".input." in f".{text}." */
static int dotted_has(Flat *f, const char *text, size_t n, const char *word) {
    f->tmp.len = 0;
    if (buf_put(&f->tmp, ".", 1) || buf_put(&f->tmp, text, n) || buf_put(&f->tmp, ".", 1)) {
        f->nomem = 1;
        return 0;
    }
    return contains(f->tmp.p, f->tmp.len, word);
}

/* the row column whose buffers row column i is given (emit_row does not write it), or -1 */
static int aliased(const Flat *f, int i) {
    if (i == C_DISP_NAME && !f->real_data) return C_NAME;
    if (i == C_DISP_IO && f->fix_direction) return C_IO;
    return -1;
}

/* room for one more row in every row column (the r_ appends), made for twice as many rows at
 * a time */
static __attribute__((noinline)) int rows_room(Flat *f) {
    /* a string column's bytes a row, as a statistics dump's rows have them (an average name is
     * ~40 bytes; r_str grows a column whose texts are longer) */
    static const unsigned char TEXT_BYTES[N_ROW_COLS] = {
        [C_NAME] = 48, [C_DISP_NAME] = 48, [C_IO] = 6, [C_DISP_IO] = 6, [C_DTYPE] = 16,
        [C_SHAPE] = 16, [C_MD5] = 1, [C_DATA_NAME] = 2, [C_STATS + 1] = 1, [C_STATS + 2] = 1,
        [C_STATS + 4] = 1, [C_STATS + 5] = 1, [C_STATS + 7] = 1, [C_STATS + 8] = 1,
        [C_STATS + 10] = 1, [C_STATS + 11] = 1};
    int64_t cap = f->row_cap ? 2 * f->row_cap : f->row_hint;
    for (int i = 0; i < N_ROW_COLS; i++) {
        if (aliased(f, i) >= 0) continue;  /* not written (emit_row) */
        Col *c = &f->rows[i];
        size_t width = c->kind == K_STR ? TEXT_BYTES[i] : c->kind == K_BOOL ? 1
                       : c->kind == K_I32 ? 4 : 8;
        if (buf_room(&c->valid, (size_t)cap) || buf_room(&c->data, (size_t)cap * width)
            || (c->kind == K_STR && buf_room(&c->offs, (size_t)(cap + 1) * 4)))
            return -1;
    }
    f->row_cap = cap;
    return 0;
}

/* one row: flatten.Flattener._row; stats[4] may be NULL (no statistic) */
static int emit_row(Flat *f, const char *dtype, size_t dtype_len, const char *shape,
                    size_t shape_len, yyjson_val *md5, yyjson_val **stats,
                    int has_numel, int64_t numel, const char *data_name, size_t dn_len,
                    int is_tensor) {
    const char *name = f->name.p;
    size_t name_len = f->name.len;
    const char *disp = name;
    size_t disp_len = name_len;
    if (f->real_data && !(dn_len == 2 && memcmp(data_name, "-1", 2) == 0)) {
        disp = data_name;
        disp_len = dn_len;
        for (size_t j = dn_len; j > 0; j--)
            if (data_name[j - 1] == '.') { disp_len = j - 1; break; }
    }
    const char *io, *disp_io;
    if (f->fix_direction) {
        io = disp_io = f->io;
    } else {
        io = dotted_has(f, name, name_len, ".input.") ? "input" : "output";
        disp_io = (dotted_has(f, disp, disp_len, ".input.")
                   || dotted_has(f, disp, disp_len, ".kwargs.")) ? "input" : "output";
        if (f->nomem) return -1;
    }
    Col *c = f->rows;
    if (c[0].n >= f->row_cap) MEM(rows_room(f));
    r_i32(&c[C_OP_SEQ], f->op_seq);
    r_i32(&c[C_ROW_IN_OP], f->row_in_op);
    f->row_in_op++;
    r_i32(&c[C_IO_K], disp_io[0] == 'i' ? ++f->k_in : ++f->k_out);
    /* disp_name is name but in real-data mode, disp_io is io in the default mode: those columns
     * are not written but given as the same buffers (aliased, cols_list) */
    MEM(r_str(&c[C_NAME], name, name_len)
        || (f->real_data && r_str(&c[C_DISP_NAME], disp, disp_len))
        || r_str(&c[C_IO], io, io[0] == 'i' ? 5 : 6)
        || (!f->fix_direction && r_str(&c[C_DISP_IO], disp_io, disp_io[0] == 'i' ? 5 : 6)));
    if (dtype) MEM(r_str(&c[C_DTYPE], dtype, dtype_len));
    else r_null(&c[C_DTYPE]);
    if (shape) MEM(r_str(&c[C_SHAPE], shape, shape_len));
    else r_null(&c[C_SHAPE]);
    if (md5 && !yyjson_is_null(md5)) {
        if (!yyjson_is_str(md5)) GIVE_UP(f, "an md5 that is not a string");
        MEM(r_str(&c[C_MD5], yyjson_get_str(md5), yyjson_get_len(md5)));
    } else {
        r_null(&c[C_MD5]);
    }
    MEM(r_str(&c[C_DATA_NAME], data_name, dn_len));
    r_bool(&c[C_IS_TENSOR], is_tensor);
    if (has_numel) r_i64(&c[C_NUMEL], numel);
    else r_null(&c[C_NUMEL]);
    for (int s = 0; s < 4; s++)
        if (stat_cols(f, s, stats ? stats[s] : NULL)) return -1;
    return 0;
}

/* the name of an argument: f->name is the prefix; index < 0 means None (".0") */
static void name_push(Flat *f, size_t *saved, const char *seg, size_t n) {
    *saved = f->name.len;
    if (buf_put(&f->name, ".", 1) || buf_put(&f->name, seg, n)) f->nomem = 1;
}

static void name_push_index(Flat *f, size_t *saved, long long index) {
    *saved = f->name.len;
    if (buf_put(&f->name, ".", 1) || int_text(&f->name, (int64_t)index)) f->nomem = 1;
}

/* Shapes seen, by a hash of their dimensions: a dump's ~14,600 tensors have ~960 distinct
 * shapes, and list_text reads and formats each dimension (~500 instructions a shape); a shape
 * of at most SHAPE_DIMS dimensions, each an int below 10^18 (what list_text reads as an int),
 * is looked up in a table of the last shape of each hash, its text and product kept. */
#define SHAPE_SLOTS 4096
#define SHAPE_DIMS 6

typedef struct ShapeSlot {
    int32_t n;       /* dimensions; -1: an empty slot */
    uint32_t text_at, text_len;  /* its text in Flat.shape_texts */
    int64_t prod;    /* its product (no overflow: an overflowing shape gives up) */
    uint64_t dims[SHAPE_DIMS];
} ShapeSlot;

/* The shape's dimensions and hash (0: not one kept: too many dimensions, or one other than an
 * int below 10^18) */
static uint64_t shape_key(yyjson_val *list, uint64_t *dims, int32_t *n) {
    size_t count = yyjson_arr_size(list);
    if (count > SHAPE_DIMS) return 0;
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ count;
    size_t idx, max;
    yyjson_val *e;
    yyjson_arr_foreach(list, idx, max, e) {
        if (!yyjson_is_uint(e)) return 0;
        uint64_t u = yyjson_get_uint(e);
        if (u >= 1000000000000000000ULL) return 0;
        dims[idx] = u;
        h = (h ^ u) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 29;
    }
    *n = (int32_t)count;
    return h | 1;
}

static ShapeSlot *shape_slot(Flat *f, uint64_t h) {
    if (!f->shapes) {
        f->shapes = malloc(SHAPE_SLOTS * sizeof(ShapeSlot));
        if (!f->shapes) return NULL;
        for (int i = 0; i < SHAPE_SLOTS; i++) f->shapes[i].n = -1;
    }
    return &f->shapes[(h >> 17) & (SHAPE_SLOTS - 1)];
}

static int tensor_row(Flat *f, yyjson_val *item) {
    yyjson_val *shape = NULL, *grad = NULL, *dtype = NULL, *data_name = NULL, *md5 = NULL;
    yyjson_val *stats[4] = {NULL, NULL, NULL, NULL};
    int has_shape = 0;
    size_t idx, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(item, idx, max, k, v) {  /* the last of a repeated key wins, as in Python */
        const char *key = yyjson_get_str(k);
        size_t n = yyjson_get_len(k);
#define KEY(lit) (n == sizeof(lit) - 1 && memcmp(key, lit, n) == 0)
        if (KEY("shape")) { shape = v; has_shape = 1; }
        else if (KEY("requires_grad")) grad = v;
        else if (KEY("dtype")) dtype = v;
        else if (KEY("data_name")) data_name = v;
        else if (KEY("md5")) md5 = v;
        else if (KEY("Max")) stats[0] = v;
        else if (KEY("Min")) stats[1] = v;
        else if (KEY("Mean")) stats[2] = v;
        else if (KEY("Norm")) stats[3] = v;
#undef KEY
    }
    if (!has_shape || !yyjson_is_arr(shape)) GIVE_UP(f, "a shape that is not a list");
    if (grad && !yyjson_is_bool(grad)) GIVE_UP(f, "requires_grad not a boolean");
    if (dtype && !yyjson_is_null(dtype) && !yyjson_is_str(dtype)) GIVE_UP(f, "a dtype not a string");
    const char *dn = "-1";
    size_t dn_len = 2;
    if (data_name && !yyjson_is_null(data_name)) {
        if (!yyjson_is_str(data_name)) GIVE_UP(f, "a data_name not a string");
        dn = yyjson_get_str(data_name);
        dn_len = yyjson_get_len(data_name);
    }
    int has_dtype = dtype && yyjson_is_str(dtype);
    const char *dt = has_dtype ? yyjson_get_str(dtype) : NULL;
    size_t dt_len = has_dtype ? yyjson_get_len(dtype) : 0;
    uint64_t dims[SHAPE_DIMS];
    int32_t n_dims = 0;
    uint64_t h = shape_key(shape, dims, &n_dims);
    ShapeSlot *slot = h ? shape_slot(f, h) : NULL;
    if (slot && slot->n == n_dims && memcmp(slot->dims, dims, (size_t)n_dims * sizeof *dims) == 0)
        return emit_row(f, dt, dt_len, f->shape_texts.p + slot->text_at, slot->text_len, md5,
                        stats, 1, slot->prod, dn, dn_len, 1);
    Buf *shape_text = &f->shape;
    int all_int, overflow;
    int64_t prod;
    int r = list_text(f, shape, shape_text, &all_int, &prod, &overflow);
    if (r) {
        if (r == -2) f->nomem = 1;
        return -1;
    }
    if (all_int && overflow) GIVE_UP(f, "a shape whose element count overflows");
    if (slot && all_int && f->shape_texts.len + shape_text->len < (1u << 24)) {
        /* kept for the next tensor of this shape (the texts of a dump: a few tens of KB) */
        slot->n = -1;
        uint32_t at = (uint32_t)f->shape_texts.len;
        if (buf_put(&f->shape_texts, shape_text->p, shape_text->len)) {
            f->nomem = 1;
            return -1;
        }
        memcpy(slot->dims, dims, (size_t)n_dims * sizeof *dims);
        slot->text_at = at;
        slot->text_len = (uint32_t)shape_text->len;
        slot->prod = prod;
        slot->n = n_dims;
    }
    return emit_row(f, dt, dt_len, shape_text->p, shape_text->len, md5, stats, all_int, prod,
                    dn, dn_len, 1);
}

static int typed_row(Flat *f, yyjson_val *item) {
    yyjson_val *type = NULL, *value = NULL;
    size_t idx, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(item, idx, max, k, v) {
        if (yyjson_equals_strn(k, "type", 4)) type = v;
        else if (yyjson_equals_strn(k, "value", 5)) value = v;
    }
    if (type && yyjson_equals_strn(type, "torch.Size", 10)) {
        Buf text = {0};
        int r = 0;
        if (!value || yyjson_is_null(value)) {
            r = buf_put(&text, "None", 4) ? -2 : 0;
        } else if (yyjson_is_arr(value)) {
            int all_int, overflow;
            int64_t prod;
            r = list_text(f, value, &text, &all_int, &prod, &overflow);
        } else {
            buf_free(&text);
            GIVE_UP(f, "a torch.Size value that is not a list");
        }
        if (!r) r = emit_row(f, "torch.Size", 10, text.p, text.len, NULL, NULL, 0, 0, "-1", 2, 0);
        buf_free(&text);
        if (r == -2) f->nomem = 1;
        return r ? -1 : 0;
    }
    if (type && yyjson_equals_strn(type, "slice", 5)) {
        char shape[40];
        int n = snprintf(shape, sizeof shape, "(%zu,)", value && yyjson_is_arr(value)
                                                        ? yyjson_arr_size(value) : (size_t)0);
        return emit_row(f, "slice", 5, shape, (size_t)n, NULL, NULL, 0, 0, "-1", 2, 0);
    }
    const char *dtype;
    if (!value || yyjson_is_null(value)) dtype = "<class 'NoneType'>";
    else if (yyjson_is_bool(value)) dtype = "<class 'bool'>";
    else if (yyjson_is_str(value)) dtype = "<class 'str'>";
    else if (is_number(value)) {
        Num num;
        if (read_num(f, value, &num)) return -1;
        dtype = num.is_int ? "<class 'int'>" : "<class 'float'>";
    } else GIVE_UP(f, "a typed value that is a list or an object");
    yyjson_val *stats[4] = {value, value, value, value};
    return emit_row(f, dtype, strlen(dtype), "[]", 2, NULL, stats, 0, 0, "-1", 2, 0);
}

/* flatten.Flattener._parse: f->name holds the prefix; index < 0 is None */
static int parse_arg(Flat *f, yyjson_val *item, long long index, int depth) {
    if (depth > MAX_DEPTH) GIVE_UP(f, "arguments nested too deeply");
    size_t saved;
    if (!item || yyjson_is_null(item) || (yyjson_is_obj(item) && yyjson_obj_size(item) == 0)) {
        if (index >= 0) name_push_index(f, &saved, index);
        else name_push(f, &saved, "0", 1);
        int r = f->nomem ? -1 : emit_row(f, NULL, 0, NULL, 0, NULL, NULL, 0, 0, "-1", 2, 0);
        f->name.len = saved;
        return r;
    }
    if (yyjson_is_arr(item)) {
        size_t base = f->name.len;
        if (index >= 0) name_push_index(f, &saved, index);
        if (f->nomem) return -1;
        size_t idx, max;
        yyjson_val *e;
        yyjson_arr_foreach(item, idx, max, e) {
            if (parse_arg(f, e, (long long)idx, depth + 1)) return -1;
        }
        f->name.len = base;
        return 0;
    }
    if (!yyjson_is_obj(item)) GIVE_UP(f, "a bare value where an argument belongs");
    int has_type = yyjson_obj_getn(item, "type", 4) != NULL;
    if (!has_type) {
        if (has_dup_keys(f, item)) return -1;
        size_t idx, max;
        yyjson_val *k, *v;
        yyjson_obj_foreach(item, idx, max, k, v) {
            name_push(f, &saved, yyjson_get_str(k), yyjson_get_len(k));
            if (f->nomem || parse_arg(f, v, -1, depth + 1)) return -1;
            f->name.len = saved;
        }
        return 0;
    }
    if (index >= 0) name_push_index(f, &saved, index);
    else name_push(f, &saved, "0", 1);
    if (f->nomem) return -1;
    int r = yyjson_obj_getn(item, "dtype", 5) ? tensor_row(f, item) : typed_row(f, item);
    f->name.len = saved;
    return r;
}

static int parse_top(Flat *f, yyjson_val *item, const char *suffix, size_t n) {
    f->name.len = 0;
    if (buf_put(&f->name, f->op, f->op_len) || buf_put(&f->name, suffix, n)) {
        f->nomem = 1;
        return -1;
    }
    return parse_arg(f, item, -1, 0);
}

static int list_length(Flat *f, yyjson_val *v, int32_t *out) {
    /* len(value or []) */
    if (!v || yyjson_is_null(v)) *out = 0;
    else if (yyjson_is_arr(v)) *out = (int32_t)yyjson_get_len(v);
    else if (yyjson_is_obj(v)) {
        if (has_dup_keys(f, v)) return -1;  /* len(dict) counts a repeated key once */
        *out = (int32_t)yyjson_get_len(v);
    }
    else GIVE_UP(f, "an argument list that is not a list");
    return 0;
}

/* One string field of row r into a struct_key: "-" when null, else its byte length, ":" and its
 * bytes (a length prefix: any text, control characters included, keeps keys apart). */
static char *key_field(char *w, const Col *c, int64_t r) {
    if (!c->valid.p[r]) {
        *w = '-';
        return w + 1;
    }
    const int32_t *offs = (const int32_t *)c->offs.p;
    /* "%d:" of the byte length (never negative), its digits written here: snprintf took ~1,100
     * instructions a field, ~100 M of a 24,500-row pair's three fields a row */
    uint32_t n = (uint32_t)(offs[r + 1] - offs[r]), m = n;
    char len[16];
    int k = (int)sizeof len - 1;
    len[k] = ':';
    do {
        len[--k] = (char)('0' + m % 10);
        m /= 10;
    } while (m);
    memcpy(w, len + k, sizeof len - (size_t)k);
    w += sizeof len - (size_t)k;
    memcpy(w, c->data.p + offs[r], n);
    return w + n;
}

/* a string value of `len` bytes written at the end of c's data (its room was made) ends */
static int col_end_str(Col *c, size_t len) {
    if (len > INT32_MAX) return -1;
    c->data.len = len;
    int32_t end = (int32_t)len;
    return buf_put(&c->offs, &end, sizeof end) || col_valid(c, 1);
}

/* The op's row_key, n_in_rows and n_out_rows from its rows (start .. the last): what op_keys'
 * string_agg(match_name, chr(31) ORDER BY row_in_op) and count(*) FILTER (WHERE io = ...) give
 * before any name is renamed for matching, without a sort per op in DuckDB. And its struct_key:
 * its rows' dtype, shape and md5 in order (key_field each), so that two ops of one row_key
 * whose struct_keys are equal have rows of equal structure, row by row (op_candidates' exact
 * test, which then needs no join of their rows: msq.pipeline.op_pairs_select). */
static int op_key(Flat *f, int64_t start) {
    const Col *dn = &f->rows[aliased(f, C_DISP_NAME) >= 0 ? C_NAME : C_DISP_NAME];
    const Col *io = &f->rows[C_IO];
    const int32_t *offs = (const int32_t *)dn->offs.p, *io_offs = (const int32_t *)io->offs.p;
    int64_t end = dn->n;
    int32_t n_in = 0, n_out = 0;
    Col *o = f->ops, *rk = &o[O_ROW_KEY], *sk = &o[O_STRUCT_KEY];
    /* each key written into its column at once, its room made first */
    MEM(buf_reserve(&rk->data, (size_t)(offs[end] - offs[start]) + (size_t)(end - start)));
    char *w = rk->data.p + rk->data.len;
    for (int64_t r = start; r < end; r++) {
        if (r > start) *w++ = '\x1f';
        size_t n = (size_t)(offs[r + 1] - offs[r]);
        memcpy(w, dn->data.p + offs[r], n);
        w += n;
        if (io->data.p[io_offs[r]] == 'i') n_in++;
        else n_out++;
    }
    MEM(col_end_str(rk, (size_t)(w - rk->data.p))
        || col_i32(&o[O_N_IN_ROWS], n_in) || col_i32(&o[O_N_OUT_ROWS], n_out));
    const Col *keyed[3] = {&f->rows[C_DTYPE], &f->rows[C_SHAPE], &f->rows[C_MD5]};
    size_t room = (size_t)(end - start) * 3 * 11;  /* "4294967295:" at most a field, or "-" */
    for (int j = 0; j < 3; j++) {
        const int32_t *o2 = (const int32_t *)keyed[j]->offs.p;
        room += (size_t)(o2[end] - o2[start]);
    }
    MEM(buf_reserve(&sk->data, room));
    w = sk->data.p + sk->data.len;
    for (int64_t r = start; r < end; r++)
        for (int j = 0; j < 3; j++) w = key_field(w, keyed[j], r);
    MEM(col_end_str(sk, (size_t)(w - sk->data.p)));
    return 0;
}

static int add_op(Flat *f, yyjson_val *key, yyjson_val *entry) {
    if (!yyjson_is_obj(entry)) GIVE_UP(f, "an entry that is not an object");
    if (has_dup_keys(f, entry)) return -1;
    f->op = yyjson_get_str(key);
    f->op_len = yyjson_get_len(key);
    f->row_in_op = f->k_in = f->k_out = 0;
    yyjson_val *args = yyjson_obj_getn(entry, "input_args", 10);
    yyjson_val *kwargs = yyjson_obj_getn(entry, "input_kwargs", 12);
    yyjson_val *input = yyjson_obj_getn(entry, "input", 5);
    yyjson_val *output = yyjson_obj_getn(entry, "output", 6);
    int64_t start = f->rows[0].n;
    ColMark marks[N_ROW_COLS];
    for (int c = 0; c < N_ROW_COLS; c++) marks[c] = col_mark(&f->rows[c]);

    /* directions: flatten.Flattener._directions */
    const char *op = f->op;
    size_t n = f->op_len;
    int fwd = -1, bwd = -1;  /* -1: "forward" in op_name (and "backward"), found only if asked */
    if (f->fix_direction) {
        const char *last = op, *prev = NULL;
        for (size_t j = 0; j < n; j++)
            if (op[j] == '.') { prev = last; last = op + j + 1; }
        size_t last_len = (size_t)(op + n - last);
        const char *tail = "";
        size_t tail_len = 0;
        if ((last_len == 7 && memcmp(last, "forward", 7) == 0)
            || (last_len == 8 && memcmp(last, "backward", 8) == 0)) {
            tail = last;
            tail_len = last_len;
        } else if (prev) {
            tail = prev;
            tail_len = (size_t)(last - 1 - prev);
        }
        if (tail_len == 7 && memcmp(tail, "forward", 7) == 0) { fwd = 1; bwd = 0; }
        else if (tail_len == 8 && memcmp(tail, "backward", 8) == 0) { fwd = 0; bwd = 1; }
    }
    if (fwd < 0) {
        fwd = contains(op, n, "forward");
        bwd = contains(op, n, "backward");
    }
    if (fwd) {
        f->io = "input";
        if (args && parse_top(f, args, ".input", 6)) return -1;
        if (kwargs) {
            if (yyjson_is_arr(kwargs) || (yyjson_is_obj(kwargs) && yyjson_obj_getn(kwargs, "type", 4))) {
                if (parse_top(f, kwargs, ".input", 6)) return -1;
            } else if (yyjson_is_obj(kwargs)) {
                if (has_dup_keys(f, kwargs)) return -1;
                size_t idx, max;
                yyjson_val *k, *v;
                yyjson_obj_foreach(kwargs, idx, max, k, v) {
                    f->name.len = 0;
                    if (buf_put(&f->name, f->op, f->op_len) || buf_put(&f->name, ".input.", 7)
                        || buf_put(&f->name, yyjson_get_str(k), yyjson_get_len(k))) {
                        f->nomem = 1;
                        return -1;
                    }
                    if (parse_arg(f, v, -1, 0)) return -1;
                }
            } else if (!yyjson_is_null(kwargs)) {
                GIVE_UP(f, "input_kwargs not an object");
            }
        }
        if (output) {
            f->io = "output";
            if (parse_top(f, output, ".output", 7)) return -1;
        }
    }
    if (bwd) {
        if (input) {
            for (int c = 0; c < N_ROW_COLS; c++) col_reset(&f->rows[c], marks[c]);
            f->row_in_op = f->k_in = f->k_out = 0;
            f->io = "input";
            if (parse_top(f, input, ".input", 6)) return -1;
        }
        if (output) {
            f->io = "output";
            if (parse_top(f, output, ".output", 7)) return -1;
        }
    }
    int32_t n_args, n_input, n_output;
    if (list_length(f, args, &n_args) || list_length(f, input, &n_input)
        || list_length(f, output, &n_output)) return -1;
    Col *o = f->ops;
    MEM(col_str(&o[O_NAME], f->op, f->op_len) || col_i32(&o[O_N_ROWS], (int32_t)(f->rows[0].n - start))
        || col_i32(&o[O_N_ARGS], n_args) || col_i32(&o[O_N_INPUT], n_input)
        || col_i32(&o[O_N_OUTPUT], n_output));
    return op_key(f, start);
}

/* ---------------------------------------------------------------------------------------- */
/* whole-document checks                                                                     */

/* Every value of the document: only Python's spellings of non-finite numbers, no huge number
 * text, no nesting Python's json would refuse. Values are one contiguous array in yyjson. */
static int check_document(Flat *f, yyjson_doc *doc) {
    yyjson_val *v = yyjson_doc_get_root(doc);
    size_t count = yyjson_doc_get_val_count(doc);
    yyjson_val *ends[MAX_JSON_NESTING + 1];
    int depth = 0;
    /* one load of each value's tag, most of them neither a raw text nor a container */
    for (yyjson_val *last = v + count; v < last; v++) {
        uint64_t tag = v->tag;
        uint8_t type = (uint8_t)(tag & YYJSON_TYPE_MASK);
        /* raw (1), array (6), object (7): the types looked at, as bits of one mask */
        if (!((0xC2u >> type) & 1u)) continue;
        if (type == YYJSON_TYPE_RAW) {
            const char *raw = v->uni.str;
            size_t len = (size_t)(tag >> YYJSON_TAG_BIT);
            if (len > MAX_RAW_NUMBER) GIVE_UP(f, "a huge number");
            if (is_letter(raw[0]) || (raw[0] == '-' && len > 1 && is_letter(raw[1]))) {
                if (!((len == 3 && memcmp(raw, "NaN", 3) == 0)
                      || (len == 8 && memcmp(raw, "Infinity", 8) == 0)
                      || (len == 9 && memcmp(raw, "-Infinity", 9) == 0)))
                    GIVE_UP(f, "a non-finite literal Python does not read");
            }
        } else if ((tag >> YYJSON_TAG_BIT) > 0) {  /* an array or object, not empty */
            /* the containers ended before v closed here, not at every value: only a container's
             * own depth is checked */
            while (depth && v >= ends[depth - 1]) depth--;
            if (depth == MAX_JSON_NESTING) GIVE_UP(f, "deep nesting");
            ends[depth++] = unsafe_yyjson_get_next(v);
        }
    }
    return 0;
}

/* Does any string under `v` hold "mindspore.Tensor"? 1 yes (exactly), 0 no, -1 give up
 * (it is part of a longer string: detect.looks_like_mindspore decides). */
static int mentions_mindspore(Flat *f, yyjson_val *v) {
    yyjson_val *end = unsafe_yyjson_get_next(v);
    int found = 0;
    for (; v < end; v++) {
        if (!yyjson_is_str(v)) continue;
        size_t n = yyjson_get_len(v);
        if (!contains(yyjson_get_str(v), n, "mindspore.Tensor")) continue;
        if (n != 16) GIVE_UP(f, "a string mentioning mindspore.Tensor");
        found = 1;
    }
    return found;
}

static int has_md5_arg(yyjson_val *entry) {
    size_t idx, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(entry, idx, max, k, v) {
        if (yyjson_is_arr(v)) {
            size_t j, m;
            yyjson_val *e;
            yyjson_arr_foreach(v, j, m, e) {
                if (yyjson_is_obj(e) && yyjson_obj_getn(e, "md5", 3)) return 1;
            }
        }
        if (yyjson_equals_strn(k, "input_kwargs", 12) && yyjson_is_obj(v)
            && yyjson_obj_getn(v, "md5", 3))
            return 1;
    }
    return 0;
}

/* 64-bit hash of n bytes, eight at a time (op names of ~30 bytes, keys of ~100-300: a byte
 * at a time costs ~4 instructions a byte) */
static uint64_t hash_words(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, s + i, n - i);
        h = (h ^ w) * 0x94D049BB133111EBULL;
    }
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 32);
}

/* op names seen twice in 'data': an open-addressing set of key values */
static int has_dup_ops(Flat *f, yyjson_val *data) {
    size_t n = yyjson_obj_size(data), cap = 16;
    while (cap < 2 * n) cap *= 2;
    yyjson_val **slots = calloc(cap, sizeof *slots);
    if (!slots) { f->nomem = 1; return -1; }
    size_t idx, max;
    yyjson_val *k, *v;
    int dup = 0;
    yyjson_obj_foreach(data, idx, max, k, v) {
        const char *s = yyjson_get_str(k);
        size_t len = yyjson_get_len(k);
        size_t at = hash_words(s, len) & (cap - 1);
        while (slots[at]) {
            if (yyjson_get_len(slots[at]) == len && memcmp(yyjson_get_str(slots[at]), s, len) == 0) {
                dup = 1;
                break;
            }
            at = (at + 1) & (cap - 1);
        }
        if (dup) break;
        slots[at] = k;
    }
    free(slots);
    if (dup) GIVE_UP(f, "an op name twice in data");
    return 0;
}

typedef struct {
    int task_tensor;
    int has_md5;
    int looks_ms;
} DocInfo;

static const char *MS_PREFIXES[] = {"Cell.", "Mint.", "MintFunctional.", "Primitive.", "Jit."};

static int flatten_doc(Flat *f, yyjson_doc *doc, int compat, DocInfo *info) {
    yyjson_val *root = yyjson_doc_get_root(doc);
    if (check_document(f, doc)) return -1;
    if (!yyjson_is_obj(root)) GIVE_UP(f, "not an object");
    yyjson_val *task = NULL, *data = NULL;
    size_t idx, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(root, idx, max, k, v) {
        if (yyjson_equals_strn(k, "task", 4)) task = v;
        else if (yyjson_equals_strn(k, "data", 4)) data = v;
    }
    if (!data || !yyjson_is_obj(data)) GIVE_UP(f, "no data object");
    if (task && yyjson_equals_strn(task, "tensor", 6)) info->task_tensor = 1;
    else if (task && yyjson_equals_strn(task, "statistics", 10)) info->task_tensor = 0;
    else GIVE_UP(f, "a task other than statistics or tensor");
    if (has_dup_ops(f, data)) return -1;
    f->real_data = info->task_tensor;
    /* room for the rows made once, not by doubling from a few (each doubling a copy of every
     * column, ~50 MB of copies for 8 x 5 MB dumps): a statistics dump has ~15.5 JSON values a
     * row (a tensor's object), so ~1.3x its rows; a dump of fewer values a row grows as before */
    f->row_hint = (int64_t)(yyjson_doc_get_val_count(doc) / 12) + 1024;
    /* and the ops' columns for their known count (texts: as rows_room's guesses) */
    size_t n_ops = yyjson_obj_size(data) + 1;
    for (int i = 0; i < N_OP_COLS; i++) {
        Col *c = &f->ops[i];
        size_t text = i == O_NAME ? n_ops * 64 : i == O_ROW_KEY ? (size_t)f->row_hint * 48
                      : i == O_STRUCT_KEY ? (size_t)f->row_hint * 40 : n_ops * 4;
        if (buf_room(&c->valid, n_ops) || buf_room(&c->data, text)
            || (c->kind == K_STR && buf_room(&c->offs, (n_ops + 1) * 4))) {
            f->nomem = 1;
            return -1;
        }
    }
    f->fix_direction = !compat;
    int32_t seq = 0;
    yyjson_obj_foreach(data, idx, max, k, v) {
        if (idx < 50 && !info->looks_ms) {
            for (size_t j = 0; j < sizeof MS_PREFIXES / sizeof *MS_PREFIXES; j++) {
                size_t plen = strlen(MS_PREFIXES[j]);
                if (yyjson_get_len(k) >= plen && memcmp(yyjson_get_str(k), MS_PREFIXES[j], plen) == 0)
                    info->looks_ms = 1;
            }
            if (!info->looks_ms && yyjson_is_obj(v)) {
                int ms = mentions_mindspore(f, v);
                if (ms < 0) return -1;
                if (ms) info->looks_ms = 1;
            }
        }
        if (!info->has_md5 && yyjson_is_obj(v) && has_md5_arg(v)) info->has_md5 = 1;
        f->op_seq = seq++;
        if (add_op(f, k, v)) return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* results as Python objects                                                                 */

/* A read's large blocks kept from one read to the next: a dump's bytes (input_buffer) and
 * yyjson's document of it (its values, ~16 bytes each, ~1.2x the dump's bytes) were new malloc'd
 * blocks every read, which the kernel maps and zeroes page by page again (~1,500 page faults a
 * 5 MB dump each). A freed block is kept (at most DOC_KEPT of them, the largest: both sides of
 * a pair are read at once, a thread each, each with its bytes and its document) and given to
 * the next block it fits; one too small grows by realloc as before. */
#define DOC_KEPT 4

typedef struct {
    size_t cap;  /* the bytes after this head */
    size_t pad;  /* a head of 16 bytes: the values keep their alignment */
} DocHead;

static DocHead *doc_kept[DOC_KEPT];
static pthread_mutex_t doc_lock = PTHREAD_MUTEX_INITIALIZER;

static void *doc_malloc(void *ctx, size_t size) {
    (void)ctx;
    DocHead *got = NULL;
    pthread_mutex_lock(&doc_lock);
    int best = -1;  /* the smallest kept block that fits */
    for (int i = 0; i < DOC_KEPT; i++)
        if (doc_kept[i] && doc_kept[i]->cap >= size
            && (best < 0 || doc_kept[i]->cap < doc_kept[best]->cap))
            best = i;
    if (best >= 0) {
        got = doc_kept[best];
        doc_kept[best] = NULL;
    }
    pthread_mutex_unlock(&doc_lock);
    if (!got) {
        if (size > SIZE_MAX - sizeof(DocHead)) return NULL;
        got = malloc(sizeof(DocHead) + size);
        if (!got) return NULL;
        got->cap = size;
    }
    return got + 1;
}

static void *doc_realloc(void *ctx, void *ptr, size_t old_size, size_t size) {
    (void)ctx, (void)old_size;
    DocHead *head = (DocHead *)ptr - 1;
    if (head->cap >= size) return ptr;  /* a kept block larger than asked for */
    if (size > SIZE_MAX - sizeof(DocHead)) return NULL;
    DocHead *grown = realloc(head, sizeof(DocHead) + size);
    if (!grown) return NULL;
    grown->cap = size;
    return grown + 1;
}

static void doc_free(void *ctx, void *ptr) {
    (void)ctx;
    if (!ptr) return;
    DocHead *head = (DocHead *)ptr - 1;
    pthread_mutex_lock(&doc_lock);
    int at = -1;  /* an empty place, else the smallest kept block if smaller than this one */
    for (int i = 0; i < DOC_KEPT; i++) {
        if (!doc_kept[i]) {
            at = i;
            break;
        }
        if (doc_kept[i]->cap < head->cap && (at < 0 || doc_kept[i]->cap < doc_kept[at]->cap))
            at = i;
    }
    DocHead *drop = head;
    if (at >= 0) {
        drop = doc_kept[at];
        doc_kept[at] = head;
    }
    pthread_mutex_unlock(&doc_lock);
    free(drop);
}

static const yyjson_alc DOC_ALC = {doc_malloc, doc_realloc, doc_free, NULL};

/* kept_blocks() -> (count, bytes) of the blocks kept for the next read (tests) */
static PyObject *kept_blocks(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    long long count = 0, bytes = 0;
    pthread_mutex_lock(&doc_lock);
    for (int i = 0; i < DOC_KEPT; i++)
        if (doc_kept[i]) {
            count++;
            bytes += (long long)doc_kept[i]->cap;
        }
    pthread_mutex_unlock(&doc_lock);
    return Py_BuildValue("(LL)", count, bytes);
}

/* Memory of this module's handed to Python without a copy: a finished column buffer (read-only;
 * a bytes object of it was a copy of every column, ~14 M instructions a 24,500-row pair), or a
 * buffer for a dump.json's bytes (input_buffer: writable, and not zeroed first as bytearray(n)
 * is, ~7 M instructions an 8 MB dump). malloc'd memory, freed with the last reference; len() and
 * the buffer protocol read it; pickled as bytes. */
typedef struct {
    PyObject_HEAD
    char *p;
    size_t len;
    int writable;
    /* NULL: p is malloc'd and this Buffer's; else what holds p (read_stream's in_place: an
     * Arrow array of DuckDB's), released with the last Buffer of it */
    PyObject *owner;
    int kept;  /* p is a block of doc_malloc's (input_buffer): given back by doc_free */
} Buffer;

static long long buffers_live;  /* bytes of Buffers alive (under the GIL): live_bytes() */

static void buffer_dealloc(PyObject *o) {
    Buffer *m = (Buffer *)o;
    if (m->owner) {
        Py_DECREF(m->owner);
    } else if (m->kept) {
        doc_free(NULL, m->p);
        buffers_live -= (long long)m->len;
    } else {
        free(m->p);
        buffers_live -= (long long)m->len;
    }
    Py_TYPE(o)->tp_free(o);
}

static int buffer_getbuffer(PyObject *o, Py_buffer *view, int flags) {
    Buffer *m = (Buffer *)o;
    return PyBuffer_FillInfo(view, o, m->p, (Py_ssize_t)m->len, !m->writable, flags);
}

static Py_ssize_t buffer_length(PyObject *o) { return (Py_ssize_t)((Buffer *)o)->len; }

static PyObject *buffer_reduce(PyObject *o, PyObject *unused) {
    (void)unused;
    Buffer *m = (Buffer *)o;
    return Py_BuildValue("(O(N))", (PyObject *)&PyBytes_Type,
                         PyBytes_FromStringAndSize(m->p, (Py_ssize_t)m->len));
}

static PyBufferProcs BUFFER_PROCS = {buffer_getbuffer, NULL};
static PySequenceMethods BUFFER_SEQUENCE = {.sq_length = buffer_length};
static PyMethodDef BUFFER_METHODS[] = {
    {"__reduce__", buffer_reduce, METH_NOARGS, "pickled as bytes"}, {NULL, NULL, 0, NULL}};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "msq._flatten.Buffer",
    .tp_basicsize = sizeof(Buffer),
    .tp_dealloc = buffer_dealloc,
    .tp_as_sequence = &BUFFER_SEQUENCE,
    .tp_as_buffer = &BUFFER_PROCS,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "memory of msq._flatten's: a column buffer (read-only) or a dump's bytes",
    .tp_methods = BUFFER_METHODS,
};

/* a Buffer taking over p (malloc'd, len bytes); p is freed if it cannot be made */
static PyObject *buffer_of(char *p, size_t len, int writable) {
    Buffer *m = PyObject_New(Buffer, &BufferType);
    if (!m) {
        free(p);
        return NULL;
    }
    m->p = p;
    m->len = len;
    m->writable = writable;
    m->owner = NULL;
    m->kept = 0;
    buffers_live += (long long)len;
    return (PyObject *)m;
}

/* the bytes of a buffer, which is taken over (a large one, as a Buffer) or freed (a small one,
 * copied into a bytes object) */
static PyObject *take_bytes(Buf *b) {
    if (b->len >= 4096) {
        char *p = realloc(b->p, b->len);  /* the unused tail back (in place: no copy) */
        p = p ? p : b->p;
        size_t len = b->len;
        b->p = NULL;
        b->len = b->cap = 0;
        return buffer_of(p, len, 0);
    }
    PyObject *out = PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->len);
    buf_free(b);
    return out;
}

/* the bytes of a column buffer: a bytes object or a Buffer; 0 if it is neither */
static int column_bytes(PyObject *o, const char **p, Py_ssize_t *n) {
    if (PyBytes_Check(o)) {
        *p = PyBytes_AS_STRING(o);
        *n = PyBytes_GET_SIZE(o);
        return 1;
    }
    if (Py_IS_TYPE(o, &BufferType)) {
        *p = ((Buffer *)o)->p;
        *n = (Py_ssize_t)((Buffer *)o)->len;
        return 1;
    }
    return 0;
}

/* input_buffer(n, padding) -> a writable Buffer of n + padding bytes, the last padding of them
 * zero (the first n are for the file's bytes: not zeroed) */
static PyObject *input_buffer(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n, padding;
    if (!PyArg_ParseTuple(args, "nn", &n, &padding)) return NULL;
    if (n < 0 || padding < 0 || n > PY_SSIZE_T_MAX - padding - 1)
        return PyErr_Format(PyExc_ValueError, "input_buffer: n >= 0 and padding >= 0");
    char *p = doc_malloc(NULL, (size_t)(n + padding) + 1);  /* a kept block, if one fits */
    if (!p) return PyErr_NoMemory();
    memset(p + n, 0, (size_t)padding + 1);
    Buffer *m = PyObject_New(Buffer, &BufferType);
    if (!m) {
        doc_free(NULL, p);
        return NULL;
    }
    m->p = p;
    m->len = (size_t)(n + padding);
    m->writable = 1;
    m->owner = NULL;
    m->kept = 1;
    buffers_live += (long long)m->len;
    return (PyObject *)m;
}

static PyObject *live_bytes(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromLongLong(buffers_live);
}

/* one byte per value -> an Arrow bitmap, in place */
static void pack_bits(Buf *b, int64_t n) {
    unsigned char *p = (unsigned char *)b->p;
    size_t bytes = (size_t)((n + 7) / 8), whole = (size_t)(n / 8), i = 0;
    for (; i < whole; i++) {  /* eight bytes of 0 or 1 at a time: byte j's bit to bit j */
        uint64_t x;
        memcpy(&x, p + i * 8, 8);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
        x = __builtin_bswap64(x);
#endif
        p[i] = (unsigned char)((x * 0x0102040810204080ULL) >> 56);
    }
    for (; i < bytes; i++) {
        unsigned char bits = 0;
        for (int j = 0; j < 8 && (int64_t)(i * 8 + j) < n; j++)
            if (p[i * 8 + j]) bits |= (unsigned char)(1u << j);
        p[i] = bits;
    }
    b->len = bytes;
}

/* (name, kind, n, null_count, validity bytes or None, data bytes, offsets bytes or None) */
static PyObject *col_tuple(const char *name, Col *c) {
    PyObject *valid;
    if (c->nulls) {
        pack_bits(&c->valid, c->n);
        valid = take_bytes(&c->valid);
    } else {
        buf_free(&c->valid);
        valid = Py_NewRef(Py_None);
    }
    if (c->kind == K_BOOL) pack_bits(&c->data, c->n);
    PyObject *data = take_bytes(&c->data);
    PyObject *offs = c->kind == K_STR ? take_bytes(&c->offs) : Py_NewRef(Py_None);
    static const char *KINDS[] = {"str", "i32", "i64", "f64", "bool"};
    PyObject *t = NULL;
    if (valid && data && offs)
        t = Py_BuildValue("(ssLLOOO)", name, KINDS[c->kind], (long long)c->n, (long long)c->nulls,
                          valid, data, offs);
    Py_XDECREF(valid);
    Py_XDECREF(data);
    Py_XDECREF(offs);
    return t;
}

static PyObject *cols_list(const char **names, Col *cols, int n) {
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *t = col_tuple(names[i], &cols[i]);
        if (!t) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

/* The reader's columns of few values as codes, for a batch's ENUM columns (msq.pipeline
 * batch_codes, which otherwise finds them by text_codes: ~44 M instructions a 6-pair root
 * batch, every text compared after checking the column's offsets). Here the columns are the
 * reader's own, as written: an io a row is "input" or "output" (its length tells them), a kind
 * one byte a row (stat_cols), a dtype compared with the one before (the same for most rows). */
#define MAX_DTYPES 64  /* a dump of more distinct dtypes: no dtype codes (text_codes decides) */

/* io's (or disp_io's) codes: 0 input, 1 output, by their lengths; the codes held as bits */
static uint64_t io_codes(const Col *c, int64_t n, uint8_t *w) {
    const int32_t *o = (const int32_t *)c->offs.p;
    uint8_t held = 0;
    for (int64_t r = 0; r < n; r++) {
        uint8_t code = (uint8_t)(o[r + 1] - o[r] == 6);
        w[r] = code;
        held |= (uint8_t)(1u << code);
    }
    return held;
}

/* a kind's codes: its byte's place in "fnibs" (msq.pipeline.ENUM_VALUES' order of stat_kind);
 * the kinds held found by memchr (at memory speed), not row by row */
static uint64_t kind_codes(const Col *c, int64_t n, uint8_t *w) {
    static const char KINDS[] = "fnibs";
    uint8_t place[256];
    memset(place, 0, sizeof place);
    uint64_t seen = 0;
    for (int j = 0; j < 5; j++) {
        place[(uint8_t)KINDS[j]] = (uint8_t)j;
        if (n && memchr(c->data.p, KINDS[j], (size_t)n)) seen |= (uint64_t)1 << j;
    }
    const uint8_t *d = (const uint8_t *)c->data.p;
    for (int64_t r = 0; r < n; r++) w[r] = place[d[r]];
    return seen;
}

/* a dtype's codes: its place among the column's texts in the order met (`texts` their ends in
 * `all`); -1 past MAX_DTYPES */
static int64_t dtype_codes(const Col *c, int64_t n, uint8_t *w, Buf *all, uint32_t *ends,
                           int *n_texts) {
    const int32_t *o = (const int32_t *)c->offs.p;
    const uint8_t *valid = (const uint8_t *)c->valid.p;
    const char *d = c->data.p;
    uint64_t seen = 0;
    int k = 0;
    /* the last two dtypes met, as (text, length, code): an op's inputs and outputs alternate
     * between two dtypes often (a tensor's and an int argument's) */
    const char *p0 = NULL, *p1 = NULL;
    size_t n0 = (size_t)-1, n1 = (size_t)-1;
    int j0 = 0, j1 = 0;
    for (int64_t r = 0; r < n; r++) {
        if (!valid[r]) {
            w[r] = 0;
            continue;
        }
        const char *t = d + o[r];
        size_t len = (size_t)(o[r + 1] - o[r]);
        if (len == n0 && same_short(p0, t, len)) {
            w[r] = (uint8_t)j0;
            continue;
        }
        int j;
        if (len == n1 && same_short(p1, t, len)) {
            j = j1;
        } else {
            for (j = 0; j < k; j++) {
                uint32_t at = j ? ends[j - 1] : 0;
                if (ends[j] - at == len && same_short(all->p + at, t, len)) break;
            }
            if (j == k) {
                if (k == MAX_DTYPES || buf_put(all, t, len)) return -1;
                ends[k++] = (uint32_t)all->len;
            }
            seen |= (uint64_t)1 << j;
        }
        p1 = p0, n1 = n0, j1 = j0;
        p0 = t, n0 = len, j0 = j;
        w[r] = (uint8_t)j;
    }
    *n_texts = k;
    return (int64_t)seen;
}

/* {name: (codes, values, seen)} of io, disp_io (where written), two kinds and dtype: codes a
 * byte a row (0 on a NULL row), values the texts in the codes' order, seen a bit mask of the
 * codes some row holds (msq.flatten.Coded). Before cols_list: the validity is read here as
 * bytes, then packed. */
static PyObject *codes_dict(Flat *f) {
    static const char *IO[] = {"input", "output"}, *KINDS[] = {"f", "n", "i", "b", "s"};
    /* the kinds of Max and Mean alone: a statistics dump's Min and Norm kinds are theirs, which
     * a batch's view makes (msq.pipeline.DERIVED_ROWS); where it stores them, text_codes codes
     * them */
    static const int CODED[] = {C_IO, C_DISP_IO, C_STATS + 1, C_STATS + 7, C_DTYPE};
    int64_t n = f->rows[0].n;
    PyObject *out = PyDict_New();
    for (size_t k = 0; out && k < sizeof CODED / sizeof *CODED; k++) {
        const Col *c = &f->rows[CODED[k]];
        int is_io = k < 2, is_dtype = CODED[k] == C_DTYPE;
        if (c->n != n || (!is_io && !is_dtype && (int64_t)c->data.len != n)) continue;
        Buf codes = {0}, texts = {0};
        uint32_t ends[MAX_DTYPES];
        int n_values = is_io ? 2 : 5;
        if (buf_reserve(&codes, (size_t)n + 1)) {
            Py_CLEAR(out);
            break;
        }
        uint8_t *w = (uint8_t *)codes.p;
        int64_t seen = is_io ? (int64_t)io_codes(c, n, w)
                       : is_dtype ? dtype_codes(c, n, w, &texts, ends, &n_values)
                       : (int64_t)kind_codes(c, n, w);
        if (seen < 0) {  /* too many dtypes */
            buf_free(&codes);
            buf_free(&texts);
            continue;
        }
        codes.len = (size_t)n;
        PyObject *values = PyTuple_New(n_values);
        for (int j = 0; values && j < n_values; j++) {
            PyObject *v;
            if (is_dtype) {
                uint32_t at = j ? ends[j - 1] : 0;
                v = PyUnicode_DecodeUTF8(texts.p + at, ends[j] - at, NULL);
            } else {
                v = PyUnicode_FromString(is_io ? IO[j] : KINDS[j]);
            }
            if (!v) Py_CLEAR(values);
            else PyTuple_SET_ITEM(values, j, v);
        }
        buf_free(&texts);
        PyObject *bytes = values ? take_bytes(&codes) : NULL;
        buf_free(&codes);
        if (!bytes) Py_XDECREF(values);
        /* "N": the tuple takes both (and releases them if it cannot be made) */
        PyObject *t = bytes ? Py_BuildValue("(NNK)", bytes, values, (unsigned long long)seen) : NULL;
        if (!t || PyDict_SetItemString(out, ROW_NAMES[CODED[k]], t) < 0) Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

static void flat_free(Flat *f) {
    for (int i = 0; i < N_ROW_COLS; i++) col_free(&f->rows[i]);
    for (int i = 0; i < N_OP_COLS; i++) col_free(&f->ops[i]);
    buf_free(&f->name);
    buf_free(&f->tmp);
    buf_free(&f->shape);
    buf_free(&f->shape_texts);
    free(f->shapes);
    f->shapes = NULL;
}

static int flat_init(Flat *f) {
    memset(f, 0, sizeof *f);
    static const int kinds[N_ROW_COLS] = {
        K_I32, K_I32, K_STR, K_STR, K_STR, K_STR, K_STR, K_STR, K_STR, K_STR, K_BOOL, K_I64,
        K_F64, K_STR, K_STR, K_F64, K_STR, K_STR, K_F64, K_STR, K_STR, K_F64, K_STR, K_STR, K_I32};
    int err = 0;
    for (int i = 0; i < N_ROW_COLS; i++) err |= col_init(&f->rows[i], kinds[i], 1);
    err |= col_init(&f->ops[O_NAME], K_STR, 0);
    for (int i = 1; i < N_OP_COLS; i++)
        err |= col_init(&f->ops[i], i == O_ROW_KEY || i == O_STRUCT_KEY ? K_STR : K_I32, 0);
    return err;
}

/* Numbers are read by yyjson as it parses (re-reading each one's raw text cost ~85 M instructions
 * of a 24,500-row pair); those it cannot read exactly (ints beyond int64/uint64, floats beyond
 * the double range) stay raw texts, which read_num reads or leaves to Python. NaN and Infinity:
 * yyjson.c is built with MSQ_PYTHON_LITERALS (setup.py), so that only Python json's spellings
 * (NaN, Infinity, -Infinity) parse and any other is "not JSON yyjson reads". */
static const yyjson_read_flag READ_FLAGS =
    YYJSON_READ_INSITU | YYJSON_READ_ALLOW_INF_AND_NAN | YYJSON_READ_BIGNUM_AS_RAW;

/* flatten_dump(buffer, compat) -> (task, has_md5, looks_mindspore, op_cols, row_cols, codes)
 * | reason (codes: codes_dict)
 *
 * buffer: a writable buffer holding the file and YYJSON_PADDING_SIZE more bytes (it is parsed
 * in place, so its content is spent). A str result is why the fast path gave up. */
static PyObject *flatten_dump(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    int compat;
    if (!PyArg_ParseTuple(args, "w*p", &view, &compat)) return NULL;
    if (view.len < YYJSON_PADDING_SIZE) {
        PyBuffer_Release(&view);
        return PyUnicode_FromString("an empty buffer");
    }
    Flat f;
    DocInfo info = {0, 0, 0};
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = flat_init(&f);
    if (failed) f.nomem = 1;
    if (!failed) {
        yyjson_read_err err;
        size_t len = (size_t)view.len - YYJSON_PADDING_SIZE;
        memset((char *)view.buf + len, 0, YYJSON_PADDING_SIZE);
        yyjson_doc *doc = NULL;
        if (has_surrogate_escape((const char *)view.buf, len)) {
            /* a UTF-16 escape in the range of surrogates: jsonio refuses a lone one by line */
            f.why = "a surrogate escape";
            failed = 1;
        } else if (!(doc = yyjson_read_opts((char *)view.buf, len, READ_FLAGS, &DOC_ALC, &err))) {
            f.why = err.code == YYJSON_READ_ERROR_MEMORY_ALLOCATION ? NULL : "not JSON yyjson reads";
            f.nomem = err.code == YYJSON_READ_ERROR_MEMORY_ALLOCATION;
            failed = 1;
        } else {
            failed = flatten_doc(&f, doc, compat, &info);
            yyjson_doc_free(doc);
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (f.nomem) {
        flat_free(&f);
        return PyErr_NoMemory();
    }
    if (failed) {
        PyObject *why = PyUnicode_FromString(f.why ? f.why : "unknown");
        flat_free(&f);
        return why;
    }
    PyObject *codes = codes_dict(&f);
    PyObject *ops = codes ? cols_list(OP_NAMES, f.ops, N_OP_COLS) : NULL;
    PyObject *rows = ops ? cols_list(ROW_NAMES, f.rows, N_ROW_COLS) : NULL;
    for (int i = 0; rows && i < N_ROW_COLS; i++) {  /* the aliased columns: their source's buffers */
        int src = aliased(&f, i);
        if (src < 0) continue;
        PyObject *t = PyList_GET_ITEM(rows, src);
        PyObject *a = Py_BuildValue("(sOOOOOO)", ROW_NAMES[i], PyTuple_GET_ITEM(t, 1),
                                    PyTuple_GET_ITEM(t, 2), PyTuple_GET_ITEM(t, 3),
                                    PyTuple_GET_ITEM(t, 4), PyTuple_GET_ITEM(t, 5),
                                    PyTuple_GET_ITEM(t, 6));
        if (!a) Py_CLEAR(rows);
        else PyList_SetItem(rows, i, a);
    }
    flat_free(&f);
    if (!rows) {
        Py_XDECREF(ops);
        Py_XDECREF(codes);
        return NULL;
    }
    /* "N": the tuple takes over ops and rows (with "O" each call leaked both lists, the whole
     * dump's columns: ~12 MB a 5,000-op pair, ~0.3 GB in a worker of a 64-pair directory run) */
    return Py_BuildValue("(sOONNN)", info.task_tensor ? "tensor" : "statistics",
                         info.has_md5 ? Py_True : Py_False, info.looks_ms ? Py_True : Py_False,
                         ops, rows, codes);
}

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* JSON's whitespace, as yyjson and Python's json read it */
static inline const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* A plain JSON string from `p` (the byte after its opening quote) to its closing quote: bytes of
 * printable ASCII, and the escapes of one letter; returns the byte after the quote, or NULL for
 * anything else (a \u escape, a byte outside ASCII, a control byte, no closing quote). Sixteen
 * bytes at a time where SSE2 is (a stack.json's frames are ~100 bytes of plain text each). */
static const char *plain_string(const char *p, const char *end) {
    for (;;) {
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
        const __m128i space = _mm_set1_epi8(0x20);
        /* a signed compare: bytes from 0x80 are negative, below 0x20 as control bytes are */
#define STOPS(x) _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, slash)), \
                              _mm_cmplt_epi8(x, space))
        while (end - p >= 32) {  /* two blocks a test: half the loop's overhead a byte */
            __m128i a = STOPS(_mm_loadu_si128((const __m128i *)(const void *)p));
            __m128i b = STOPS(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
            unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(a, b));
            if (m) {
                m = (unsigned)_mm_movemask_epi8(a) | (unsigned)_mm_movemask_epi8(b) << 16;
                p += __builtin_ctz(m);
                goto stopped;
            }
            p += 32;
        }
        if (end - p >= 16) {
            unsigned m = (unsigned)_mm_movemask_epi8(
                STOPS(_mm_loadu_si128((const __m128i *)(const void *)p)));
            if (m) {
                p += __builtin_ctz(m);
                goto stopped;
            }
            p += 16;
        }
#undef STOPS
#endif
        while (p < end) {
            unsigned char c = (unsigned char)*p;
            if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') break;
            p++;
        }
#if defined(__SSE2__)
    stopped:
#endif
        if (p == end) return NULL;
        if (*p == '"') return p + 1;
        if (*p != '\\' || end - p < 2) return NULL;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            break;
        default:
            return NULL;  /* \u and anything else: yyjson decides */
        }
    }
}

/* Whether the n bytes at p are an object whose every value is a list of plain strings
 * (plain_string), whitespace around any token: JSON that yyjson reads, that check_document
 * passes (no number, depth 2) and that check_stack accepts, told in one pass over the bytes
 * without yyjson's document (the 6 NPU stack.json of a 6-pair root batch: ~82 M instructions
 * parsed). 0 is "not told": anything else (another value in a list, a string plain_string does
 * not read, a malformed text) is parsed by check_stack as before. */
static int stack_of_plain_lists(const char *p, size_t n) {
    const char *end = p + n;
    p = skip_ws(p, end);
    if (p == end || *p != '{') return 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') return skip_ws(p + 1, end) == end;
    for (;;) {
        if (p == end || *p != '"' || !(p = plain_string(p + 1, end))) return 0;
        p = skip_ws(p, end);
        if (p == end || *p != ':') return 0;
        p = skip_ws(p + 1, end);
        if (p == end || *p != '[') return 0;
        p = skip_ws(p + 1, end);
        if (p < end && *p == ']') {
            p++;
        } else {
            for (;;) {
                if (p == end || *p != '"' || !(p = plain_string(p + 1, end))) return 0;
                p = skip_ws(p, end);
                if (p == end) return 0;
                if (*p == ']') { p++; break; }
                if (*p != ',') return 0;
                p = skip_ws(p + 1, end);
            }
        }
        p = skip_ws(p, end);
        if (p == end) return 0;
        if (*p == '}') return skip_ws(p + 1, end) == end;
        if (*p != ',') return 0;
        p = skip_ws(p + 1, end);
    }
}

/* check_stack(buffer) -> None when stack.json is an object of op name -> list (as
 * jsonio.check_stack requires), else why the fast path gave up (the Python reader decides).
 * A stack of plain lists (stack_of_plain_lists) is told without a document. */
/* check_stack's parse of the len bytes at buf (padded, parsed in place): 0 when they are an
 * object of lists, else -1 and f->why */
static int stack_by_document(Flat *f, char *buf, size_t len) {
    yyjson_read_err err;
    memset(buf + len, 0, YYJSON_PADDING_SIZE);
    yyjson_doc *doc = yyjson_read_opts(buf, len, READ_FLAGS, &DOC_ALC, &err);
    if (!doc) GIVE_UP(f, "not JSON yyjson reads");
    int failed = check_document(f, doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    if (!failed && !yyjson_is_obj(root)) { f->why = "not an object"; failed = -1; }
    if (!failed) {
        size_t idx, max;
        yyjson_val *k, *v;
        yyjson_obj_foreach(root, idx, max, k, v) {
            if (!yyjson_is_arr(v)) { f->why = "a stack that is not a list"; failed = -1; break; }
        }
    }
    yyjson_doc_free(doc);
    return failed;
}

static PyObject *check_stack(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "w*", &view)) return NULL;
    if (view.len < YYJSON_PADDING_SIZE) {
        PyBuffer_Release(&view);
        return PyUnicode_FromString("an empty buffer");
    }
    Flat f;
    memset(&f, 0, sizeof f);
    int failed;
    Py_BEGIN_ALLOW_THREADS
    size_t len = (size_t)view.len - YYJSON_PADDING_SIZE;
    failed = !stack_of_plain_lists((const char *)view.buf, len)
             && stack_by_document(&f, (char *)view.buf, len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (failed) return PyUnicode_FromString(f.why ? f.why : "unknown");
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------- */
/* the columns as an Arrow C stream: DuckDB reads them without pyarrow (nor numpy) imported   */

/* The Arrow C data and stream interfaces: a stable ABI, declared by every producer and consumer
 * (https://arrow.apache.org/docs/format/CDataInterface.html, CStreamInterface.html). */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_NULLABLE 2
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif
#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};
#endif

static const char *ARROW_FORMATS[] = {"u", "i", "l", "g", "b", "L", "C"};  /* by K_STR .. K_U8 */

typedef struct {
    int64_t n, nulls;
    const void *valid, *data, *offs;
} SCol;

/* What a stream and every batch it exported share: the column buffers (bytes objects kept alive
 * by `owner`), released with the last of them; a consumer may release them on any thread. */
typedef struct {
    long refs;
    PyObject *owner;
    int n_cols, n_batches;
    int *kinds;
    char **names;
    SCol *cols;  /* n_batches x n_cols */
} Shared;

static void shared_decref(Shared *s) {
    if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (Py_IsInitialized()) {  /* else the process is ending: the memory goes with it */
        PyGILState_STATE g = PyGILState_Ensure();
        Py_DECREF(s->owner);
        PyGILState_Release(g);
    }
    for (int i = 0; s->names && i < s->n_cols; i++) free(s->names[i]);
    free(s->names);
    free(s->kinds);
    free(s->cols);
    free(s);
}

static void child_schema_release(struct ArrowSchema *c) { c->release = NULL; }

static void schema_release(struct ArrowSchema *sc) {
    free(sc->private_data);  /* the children and their names, one block */
    sc->release = NULL;
}

static int stream_get_schema(struct ArrowArrayStream *st, struct ArrowSchema *out) {
    Shared *s = ((Shared **)st->private_data)[0];
    size_t names = 0;
    for (int i = 0; i < s->n_cols; i++) names += strlen(s->names[i]) + 1;
    size_t n = (size_t)s->n_cols;
    char *block = malloc(n * (sizeof(struct ArrowSchema) + sizeof(struct ArrowSchema *)) + names + 1);
    if (!block) return ENOMEM;
    struct ArrowSchema *kids = (struct ArrowSchema *)block;
    struct ArrowSchema **ptrs = (struct ArrowSchema **)(block + n * sizeof(struct ArrowSchema));
    char *text = (char *)(ptrs + n);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(s->names[i]) + 1;
        memcpy(text, s->names[i], len);
        kids[i] = (struct ArrowSchema){ARROW_FORMATS[s->kinds[i]], text, NULL, ARROW_FLAG_NULLABLE,
                                       0, NULL, NULL, child_schema_release, NULL};
        ptrs[i] = &kids[i];
        text += len;
    }
    *text = '\0';
    *out = (struct ArrowSchema){"+s", text, NULL, 0, (int64_t)n, ptrs, NULL, schema_release, block};
    return 0;
}

static void child_array_release(struct ArrowArray *a) { a->release = NULL; }

typedef struct {
    Shared *shared;
    /* then: n children, n child pointers, 3n + 1 buffer pointers */
} ArrayBlock;

static void array_release(struct ArrowArray *a) {
    ArrayBlock *b = a->private_data;
    shared_decref(b->shared);
    free(b);
    a->release = NULL;
}

static int stream_get_next(struct ArrowArrayStream *st, struct ArrowArray *out) {
    Shared **priv = st->private_data;
    Shared *s = priv[0];
    int *next = (int *)(priv + 1);
    if (*next >= s->n_batches) {  /* the end of the stream */
        memset(out, 0, sizeof *out);
        return 0;
    }
    size_t n = (size_t)s->n_cols;
    char *block = malloc(sizeof(ArrayBlock) + n * (sizeof(struct ArrowArray) +
                         sizeof(struct ArrowArray *)) + (3 * n + 1) * sizeof(void *));
    if (!block) return ENOMEM;
    ArrayBlock *head = (ArrayBlock *)block;
    struct ArrowArray *kids = (struct ArrowArray *)(block + sizeof(ArrayBlock));
    struct ArrowArray **ptrs = (struct ArrowArray **)(kids + n);
    const void **bufs = (const void **)(ptrs + n);
    const SCol *cols = s->cols + (size_t)*next * n;
    int64_t length = n ? cols[0].n : 0;
    for (size_t i = 0; i < n; i++) {
        const void **mine = bufs + 1 + 3 * i;
        int64_t n_buffers = 2;
        mine[0] = cols[i].valid;
        if (s->kinds[i] == K_STR) {
            mine[1] = cols[i].offs;
            mine[2] = cols[i].data;
            n_buffers = 3;
        } else {
            mine[1] = cols[i].data;
        }
        kids[i] = (struct ArrowArray){cols[i].n, cols[i].nulls, 0, n_buffers, 0, mine, NULL, NULL,
                                      child_array_release, NULL};
        ptrs[i] = &kids[i];
    }
    bufs[0] = NULL;  /* the struct (record batch) itself has no nulls */
    head->shared = s;
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
    *out = (struct ArrowArray){length, 0, 0, 1, (int64_t)n, bufs, ptrs, NULL, array_release, head};
    (*next)++;
    return 0;
}

static const char *stream_last_error(struct ArrowArrayStream *st) {
    (void)st;
    return NULL;
}

static void stream_release(struct ArrowArrayStream *st) {
    Shared **priv = st->private_data;
    shared_decref(priv[0]);
    free(priv);
    st->release = NULL;
}

static void capsule_free(PyObject *capsule) {
    struct ArrowArrayStream *st = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (!st) {
        PyErr_Clear();
        return;
    }
    if (st->release) st->release(st);  /* not taken by a consumer */
    free(st);
}

static int kind_of(const char *name) {
    static const char *KINDS[] = {"str", "i32", "i64", "f64", "bool", "u64", "u8"};
    for (int k = 0; k < 7; k++)
        if (!strcmp(name, KINDS[k])) return k;
    return -1;
}

/* one column tuple (name, kind, n, null_count, validity|None, data, offsets|None), checked:
 * every buffer as long as its length says */
static int scol_from(PyObject *t, SCol *c, int *kind, const char **name) {
    const char *kname;
    long long n, nulls;
    PyObject *valid, *data, *offs;
    if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "ssLLOOO", name, &kname, &n, &nulls, &valid,
                                                &data, &offs))
        return -1;
    *kind = kind_of(kname);
    const char *vp = NULL, *dp = NULL, *op = NULL;
    Py_ssize_t vn = 0, dn = 0, on = 0;
    if (*kind < 0 || n < 0 || nulls < 0 || nulls > n || !column_bytes(data, &dp, &dn) ||
        (valid != Py_None && !column_bytes(valid, &vp, &vn)) ||
        (offs != Py_None && !column_bytes(offs, &op, &on)) ||
        ((*kind == K_STR) != (offs != Py_None)) || (nulls && valid == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "arrow_stream: a malformed column");
        return -1;
    }
    Py_ssize_t bits = (Py_ssize_t)((n + 7) / 8);
    Py_ssize_t need = *kind == K_BOOL ? bits : *kind == K_I32 ? (Py_ssize_t)(4 * n)
                      : *kind == K_U8 ? (Py_ssize_t)n : *kind == K_STR ? 0 : (Py_ssize_t)(8 * n);
    if (dn < need || (valid != Py_None && vn < bits)) {
        PyErr_SetString(PyExc_ValueError, "arrow_stream: a column shorter than its length");
        return -1;
    }
    if (*kind == K_STR) {
        if (on < (Py_ssize_t)(4 * (n + 1))) {
            PyErr_SetString(PyExc_ValueError, "arrow_stream: string offsets too short");
            return -1;
        }
        const int32_t *o = (const int32_t *)op;
        if (o[0] < 0 || o[n] < o[0] || (Py_ssize_t)o[n] > dn) {
            PyErr_SetString(PyExc_ValueError, "arrow_stream: string offsets out of range");
            return -1;
        }
    }
    c->n = n;
    c->nulls = nulls;
    c->valid = vp;
    c->data = dp;
    c->offs = op;
    return 0;
}

/* arrow_stream(batches) -> PyCapsule "arrow_array_stream"
 *
 * batches: a sequence of record batches of one schema, each a sequence of column tuples as
 * flatten_dump returns them (or of kind "u64": uint64 values, the tensor pool's hashes; or "u8":
 * uint8 values, text_codes' codes). The
 * capsule's stream yields them in order, without a copy. */
static PyObject *arrow_stream(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *given = PySequence_Tuple(arg);
    if (!given) return NULL;
    Py_ssize_t nb = PyTuple_GET_SIZE(given);
    PyObject *owner = PyTuple_New(nb);  /* the batches as tuples: kept alive, never changed */
    if (!owner) {
        Py_DECREF(given);
        return NULL;
    }
    Shared *s = calloc(1, sizeof *s);
    if (!s) {
        Py_DECREF(given);
        Py_DECREF(owner);
        return PyErr_NoMemory();
    }
    s->refs = 1;
    s->owner = owner;
    s->n_batches = (int)nb;
    int ok = nb > 0;
    if (!ok) PyErr_SetString(PyExc_ValueError, "arrow_stream: no batch");
    for (Py_ssize_t b = 0; ok && b < nb; b++) {
        PyObject *batch = PySequence_Tuple(PyTuple_GET_ITEM(given, b));
        if (!batch) { ok = 0; break; }
        PyTuple_SET_ITEM(owner, b, batch);
        Py_ssize_t nc = PyTuple_GET_SIZE(batch);
        if (b == 0) {
            s->n_cols = (int)nc;
            s->kinds = calloc((size_t)nc + 1, sizeof(int));
            s->names = calloc((size_t)nc + 1, sizeof(char *));
            s->cols = calloc((size_t)(nc * nb) + 1, sizeof(SCol));
            if (!s->kinds || !s->names || !s->cols) { PyErr_NoMemory(); ok = 0; break; }
        } else if (nc != s->n_cols) {
            PyErr_SetString(PyExc_ValueError, "arrow_stream: batches of different columns");
            ok = 0;
            break;
        }
        for (Py_ssize_t i = 0; ok && i < nc; i++) {
            int kind;
            const char *name;
            SCol *c = &s->cols[b * nc + i];
            if (scol_from(PyTuple_GET_ITEM(batch, i), c, &kind, &name)) { ok = 0; break; }
            if (i && c->n != s->cols[b * nc].n) {
                PyErr_SetString(PyExc_ValueError, "arrow_stream: columns of different lengths");
                ok = 0;
            } else if (b == 0) {
                s->kinds[i] = kind;
                s->names[i] = strdup(name);
                if (!s->names[i]) { PyErr_NoMemory(); ok = 0; }
            } else if (kind != s->kinds[i] || strcmp(name, s->names[i])) {
                PyErr_SetString(PyExc_ValueError, "arrow_stream: batches of different columns");
                ok = 0;
            }
        }
    }
    Py_DECREF(given);  /* its batches live on in owner, as tuples */
    struct ArrowArrayStream *st = ok ? malloc(sizeof *st) : NULL;
    Shared **priv = st ? calloc(1, sizeof(Shared *) + sizeof(int)) : NULL;
    if (ok && !priv) PyErr_NoMemory();
    if (!priv) {
        free(st);
        shared_decref(s);
        return NULL;
    }
    priv[0] = s;
    *st = (struct ArrowArrayStream){stream_get_schema, stream_get_next, stream_last_error,
                                    stream_release, priv};
    PyObject *capsule = PyCapsule_New(st, "arrow_array_stream", capsule_free);
    if (!capsule) stream_release(st), free(st);
    return capsule;
}

/* ---------------------------------------------------------------------------------------- */
/* a DuckDB result read through the Arrow C stream: one buffer per column, without pyarrow   */

/* n bits from src at bit spos to dst at bit dpos (dst zeroed before); src NULL: all set */
static void copy_bits(uint8_t *dst, int64_t dpos, const uint8_t *src, int64_t spos, int64_t n) {
    if (src && !(dpos & 7) && !(spos & 7)) {
        memcpy(dst + dpos / 8, src + spos / 8, (size_t)(n / 8));
        dpos += n & ~(int64_t)7;
        spos += n & ~(int64_t)7;
        n &= 7;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t s = spos + i, d = dpos + i;
        if (!src || (src[s >> 3] >> (s & 7)) & 1) dst[d >> 3] |= (uint8_t)(1u << (d & 7));
    }
}

/* the set bits of a 64-bit word */
static inline int64_t ones64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_popcountll(x);
#else
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (int64_t)((x * 0x0101010101010101ULL) >> 56);
#endif
}

/* the zero bits (an Arrow validity bitmap's NULLs) among bits off .. off + len - 1 of v, 64 a
 * step: a bit a step took ~13 instructions a value, ~60 M of a 96,600-row workbook query's
 * ~50 columns */
static int64_t zero_bits(const uint8_t *v, int64_t off, int64_t len) {
    int64_t ones = 0, i = 0;
    for (; i < len && ((off + i) & 7); i++) ones += (v[(off + i) >> 3] >> ((off + i) & 7)) & 1;
    const uint8_t *p = v + ((off + i) >> 3);  /* i is len, or off + i a whole byte */
    for (; i + 64 <= len; i += 64, p += 8) {
        uint64_t w;
        memcpy(&w, p, sizeof w);
        ones += ones64(w);
    }
    for (; i + 8 <= len; i += 8, p++) ones += ones64(*p);
    for (; i < len; i++) ones += (v[(off + i) >> 3] >> ((off + i) & 7)) & 1;
    return len - ones;
}

static int fixed_width(const char *format) {
    if (!strcmp(format, "g") || !strcmp(format, "l")) return 8;
    if (!strcmp(format, "i")) return 4;
    if (!strcmp(format, "C")) return 1;
    return 0;  /* "u" (utf8) and "b" (bits) are handled apart; anything else is refused */
}

static void release_arrays(struct ArrowArray *arrays, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (arrays[i].release) arrays[i].release(&arrays[i]);
    free(arrays);
}

/* the columns of every batch, one after the other, as Python objects; NULL with an error set */
static PyObject *concat_columns(struct ArrowSchema *schema, struct ArrowArray *batches,
                                size_t n_batches) {
    int64_t total = 0;
    for (size_t b = 0; b < n_batches; b++) total += batches[b].length;
    PyObject *out = PyList_New(schema->n_children);
    if (!out) return NULL;
    for (int64_t c = 0; c < schema->n_children; c++) {
        const char *format = schema->children[c]->format;
        int is_str = !strcmp(format, "u"), is_bits = !strcmp(format, "b");
        int width = fixed_width(format);
        int64_t nulls = 0, chars = 0;
        for (size_t b = 0; b < n_batches; b++) {
            struct ArrowArray *a = batches[b].children[c];
            int64_t off = a->offset + batches[b].offset;
            nulls += a->null_count < 0 ? batches[b].length : a->null_count;  /* unknown: count */
            if (is_str) {
                const int32_t *o = a->buffers[1];
                chars += batches[b].length ? o[off + batches[b].length] - o[off] : 0;
            }
        }
        PyObject *valid = nulls ? PyBytes_FromStringAndSize(NULL, (total + 7) / 8) : Py_NewRef(Py_None);
        PyObject *offs = is_str ? PyBytes_FromStringAndSize(NULL, 4 * (total + 1)) : Py_NewRef(Py_None);
        Py_ssize_t data_len = is_str ? chars : is_bits ? (total + 7) / 8 : width * total;
        PyObject *data = PyBytes_FromStringAndSize(NULL, data_len);
        if (!valid || !offs || !data) {
            Py_XDECREF(valid), Py_XDECREF(offs), Py_XDECREF(data), Py_DECREF(out);
            return NULL;
        }
        uint8_t *vbits = valid != Py_None ? (uint8_t *)PyBytes_AS_STRING(valid) : NULL;
        int32_t *dst_off = offs != Py_None ? (int32_t *)PyBytes_AS_STRING(offs) : NULL;
        char *dst = PyBytes_AS_STRING(data);
        if (vbits) memset(vbits, 0, (size_t)((total + 7) / 8));
        if (is_bits) memset(dst, 0, (size_t)data_len);
        if (dst_off) dst_off[0] = 0;
        int64_t pos = 0, null_count = 0;
        for (size_t b = 0; b < n_batches; b++) {
            struct ArrowArray *a = batches[b].children[c];
            int64_t off = a->offset + batches[b].offset, len = batches[b].length;
            const uint8_t *v = a->buffers[0];
            if (vbits) copy_bits(vbits, pos, v, off, len);
            if (v) null_count += zero_bits(v, off, len);
            if (is_str) {
                const int32_t *o = a->buffers[1];
                const char *chars_src = a->buffers[2];
                int32_t base = dst_off[pos] - (len ? o[off] : 0);
                for (int64_t i = 1; i <= len; i++) dst_off[pos + i] = o[off + i] + base;
                if (len) memcpy(dst + dst_off[pos], chars_src + o[off], (size_t)(o[off + len] - o[off]));
            } else if (is_bits) {
                copy_bits((uint8_t *)dst, pos, a->buffers[1], off, len);
            } else if (len) {
                memcpy(dst + width * pos, (const char *)a->buffers[1] + width * off, (size_t)(width * len));
            }
            pos += len;
        }
        if (!null_count && vbits) {  /* null_count was unknown (-1) and is 0 */
            Py_DECREF(valid);
            valid = Py_NewRef(Py_None);
        }
        PyObject *t = Py_BuildValue("(ssLLNNN)", schema->children[c]->name, format,
                                    (long long)total, (long long)null_count, valid, offs, data);
        if (!t) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, c, t);
    }
    return out;
}

static void release_held(PyObject *capsule) {
    struct ArrowArray *a = PyCapsule_GetPointer(capsule, "msq.arrow_array");
    if (!a) return;
    if (a->release) a->release(a);
    free(a);
}

/* a read-only memoryview of len bytes at p, which owner holds (a reference taken): as a bytes
 * object of them reads (len, indexing, ==, bytes(), cast) */
static PyObject *held_buffer(PyObject *owner, const void *p, size_t len) {
    Buffer *m = PyObject_New(Buffer, &BufferType);
    if (!m) return NULL;
    m->p = (char *)(p ? p : "");
    m->len = p ? len : 0;
    m->writable = 0;
    m->owner = Py_NewRef(owner);
    m->kept = 0;
    PyObject *view = PyMemoryView_FromObject((PyObject *)m);
    Py_DECREF(m);
    return view;
}

/* concat_columns of a stream's only batch, its buffers read where DuckDB's Arrow export wrote
 * them (Buffers held by the batch, released with the last of them) instead of copied: the
 * copies took ~30 M instructions of memcpy and ~43 MB of fresh pages (~10,500 page faults) a
 * 6-pair batch of root-8x8-5000's workbook query. *batch is taken over where it returns a list
 * (batch->release is then NULL); NULL with nothing taken where its buffers do not start at 0
 * (the caller copies them), or with an error set. */
static PyObject *in_place_columns(struct ArrowSchema *schema, struct ArrowArray *batch) {
    if (batch->offset || batch->n_children != schema->n_children) return NULL;
    int64_t n = batch->length;
    for (int64_t c = 0; c < schema->n_children; c++) {
        struct ArrowArray *a = batch->children[c];
        const char *format = schema->children[c]->format;
        if (a->offset || a->length != n) return NULL;
        if (!strcmp(format, "u") && n && ((const int32_t *)a->buffers[1])[0] != 0) return NULL;
    }
    struct ArrowArray *held = malloc(sizeof *held);
    if (!held) return PyErr_NoMemory();
    *held = *batch;
    PyObject *owner = PyCapsule_New(held, "msq.arrow_array", release_held);
    if (!owner) {
        free(held);
        return NULL;
    }
    batch->release = NULL;  /* the capsule's now */
    PyObject *out = PyList_New(schema->n_children);
    for (int64_t c = 0; out && c < schema->n_children; c++) {
        struct ArrowArray *a = held->children[c];
        const char *format = schema->children[c]->format;
        int is_str = !strcmp(format, "u"), is_bits = !strcmp(format, "b");
        const uint8_t *v = a->buffers[0];
        int64_t nulls = v ? zero_bits(v, 0, n) : 0;
        size_t data_len = is_str ? (size_t)(n ? ((const int32_t *)a->buffers[1])[n] : 0)
                          : is_bits ? (size_t)(n + 7) / 8 : (size_t)(fixed_width(format) * n);
        PyObject *valid = nulls ? held_buffer(owner, v, (size_t)(n + 7) / 8) : Py_NewRef(Py_None);
        PyObject *offs = is_str ? held_buffer(owner, a->buffers[1], 4 * (size_t)(n + 1))
                                : Py_NewRef(Py_None);
        PyObject *data = held_buffer(owner, a->buffers[is_str ? 2 : 1], data_len);
        PyObject *t = valid && offs && data
            ? Py_BuildValue("(ssLLNNN)", schema->children[c]->name, format, (long long)n,
                            (long long)nulls, valid, offs, data)
            : NULL;
        if (!t) {
            if (!valid || !offs || !data) Py_XDECREF(valid), Py_XDECREF(offs), Py_XDECREF(data);
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, c, t);
    }
    Py_DECREF(owner);
    return out;
}

/* read_stream(capsule) -> [(name, format, n, null_count, validity|None, offsets|None, data)]
 *                         | reason
 *
 * capsule: an "arrow_array_stream" PyCapsule (DuckDBPyRelation.__arrow_c_stream__()), taken
 * over. Formats: u (utf8), g (double), l (int64), i (int32), C (uint8), b (bits); any other is
 * a str result (the caller reads the result with pyarrow instead). The offsets, validity and
 * bits start at 0. */
static PyObject *read_stream(PyObject *self, PyObject *capsule) {
    (void)self;
    struct ArrowArrayStream *given = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (!given) return NULL;
    if (!given->release) {
        PyErr_SetString(PyExc_ValueError, "read_stream: the stream was taken already");
        return NULL;
    }
    struct ArrowArrayStream st = *given;
    given->release = NULL;  /* ours now (the capsule's destructor sees it moved) */
    struct ArrowSchema schema;
    memset(&schema, 0, sizeof schema);
    struct ArrowArray *arrays = NULL;
    size_t n = 0, cap = 0;
    int rc;
    const char *why = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = st.get_schema(&st, &schema);
    if (!rc && strcmp(schema.format, "+s")) why = "not a record batch";
    for (int64_t c = 0; !rc && !why && c < schema.n_children; c++) {
        const char *f = schema.children[c]->format;
        if (strcmp(f, "u") && strcmp(f, "b") && !fixed_width(f)) why = "a column of another type";
    }
    while (!rc && !why) {
        if (n == cap) {
            size_t more = cap ? 2 * cap : 8;
            struct ArrowArray *grown = realloc(arrays, more * sizeof *arrays);
            if (!grown) { rc = ENOMEM; break; }
            arrays = grown;
            cap = more;
        }
        rc = st.get_next(&st, &arrays[n]);
        if (rc || !arrays[n].release) break;  /* an error, or the end */
        if (arrays[n].n_children != schema.n_children) {
            n++;
            why = "a batch unlike its schema";
            break;
        }
        n++;
    }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (rc) {
        const char *err = st.get_last_error ? st.get_last_error(&st) : NULL;
        PyErr_Format(PyExc_RuntimeError, "read_stream: %s", err ? err : strerror(rc));
    } else if (why) {
        result = PyUnicode_FromString(why);
    } else {
        result = n == 1 ? in_place_columns(&schema, &arrays[0]) : NULL;
        if (!result && !PyErr_Occurred()) result = concat_columns(&schema, arrays, n);
    }
    release_arrays(arrays, n);
    if (schema.release) schema.release(&schema);
    if (st.release) st.release(&st);
    return result;
}

static int cmp_keyed(const void *a, const void *b) {
    const int64_t *x = a, *y = b;  /* (key, index) pairs: equal keys keep their order */
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* The int64 value at i of a buffer that may not be 8-byte aligned. */
static int64_t load_i64(const char *p, Py_ssize_t i) {
    int64_t x;
    memcpy(&x, p + 8 * i, sizeof x);
    return x;
}

/* stable_order(int64 values as bytes) -> int64 indices as bytes, that sort them stably
 *
 * A workbook's rows come as their out_seq, in the order the result table holds them: a
 * permutation of 0 .. n-1, or nearly. Values already in order give 0 .. n-1 (one pass); values
 * within a range of at most 4n + 1024 are placed by counting (two passes, stable); any other
 * input is sorted by qsort on (value, index) pairs (equal values keep their order). qsort took
 * ~70 M instructions of a 24,500-row workbook (~3,000 a row: a comparison by function call). */
static PyObject *stable_order(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)) return NULL;
    Py_ssize_t n = view.len / 8;
    const char *v = view.buf;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!out) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *idx = (int64_t *)PyBytes_AS_STRING(out);
    int sorted = 1;
    int64_t lo = n ? load_i64(v, 0) : 0, hi = lo;
    for (Py_ssize_t i = 1; i < n; i++) {
        int64_t x = load_i64(v, i);
        if (x < load_i64(v, i - 1)) sorted = 0;
        if (x < lo) lo = x;
        if (x > hi) hi = x;
    }
    int failed = 0;
    uint64_t range = (uint64_t)hi - (uint64_t)lo;  /* no overflow in unsigned arithmetic */
    Py_BEGIN_ALLOW_THREADS
    if (sorted) {
        for (Py_ssize_t i = 0; i < n; i++) idx[i] = i;
    } else if (range <= 4 * (uint64_t)n + 1024) {
        Py_ssize_t *start = calloc((size_t)range + 2, sizeof *start);
        if (!start) {
            failed = 1;
        } else {
            for (Py_ssize_t i = 0; i < n; i++) start[(uint64_t)load_i64(v, i) - (uint64_t)lo + 1]++;
            for (uint64_t k = 1; k <= range + 1; k++) start[k] += start[k - 1];
            for (Py_ssize_t i = 0; i < n; i++) idx[start[(uint64_t)load_i64(v, i) - (uint64_t)lo]++] = i;
            free(start);
        }
    } else {
        int64_t *pairs = malloc((size_t)n * 2 * sizeof(int64_t));
        if (!pairs) {
            failed = 1;
        } else {
            for (Py_ssize_t i = 0; i < n; i++) {
                pairs[2 * i] = load_i64(v, i);
                pairs[2 * i + 1] = i;
            }
            qsort(pairs, (size_t)n, 2 * sizeof(int64_t), cmp_keyed);
            for (Py_ssize_t i = 0; i < n; i++) idx[i] = pairs[2 * i + 1];
            free(pairs);
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (failed) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return out;
}

/* arithmetic(n, width, step) -> bytes: 0, step, 2 * step, ... (n values) as native int32
 * (width 4) or int64 (width 8): what array("i" / "q", range(0, n * step, step)).tobytes() gives,
 * without a Python int per value (the loader's row numbers and constant columns' offsets:
 * ~600 instructions a value through array's per-item conversion). OverflowError as array's
 * when a value does not fit. */
static PyObject *arithmetic(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n;
    int width;
    long long step;
    if (!PyArg_ParseTuple(args, "niL", &n, &width, &step)) return NULL;
    if (n < 0 || step < 0 || (width != 4 && width != 8))
        return PyErr_Format(PyExc_ValueError, "arithmetic: n >= 0, width 4 or 8, step >= 0");
    long long top = width == 4 ? INT32_MAX : INT64_MAX;
    if (n > 1 && step > 0 && (long long)(n - 1) > top / step)
        return PyErr_Format(PyExc_OverflowError, "arithmetic: %zd values of step %lld overflow "
                            "int%d", n, step, width * 8);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * width);
    if (!out) return NULL;
    char *p = PyBytes_AS_STRING(out);
    if (width == 4) {
        int32_t *v = (int32_t *)p;
        for (Py_ssize_t i = 0; i < n; i++) v[i] = (int32_t)((long long)i * step);
    } else {
        int64_t *v = (int64_t *)p;
        for (Py_ssize_t i = 0; i < n; i++) v[i] = (int64_t)((long long)i * step);
    }
    return out;
}

/* equal_bytes(a, b): whether two buffers (a column's, bytes) hold the same bytes (memcmp, no
 * copy: msq.flatten.same_column); repeats(buf, unit): whether buf is unit repeated */
static PyObject *equal_bytes(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*", &a, &b)) return NULL;
    int same = a.len == b.len && (a.len == 0 || memcmp(a.buf, b.buf, (size_t)a.len) == 0);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return PyBool_FromLong(same);
}

static PyObject *repeats(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer a, u;
    if (!PyArg_ParseTuple(args, "y*y*", &a, &u)) return NULL;
    int same = u.len > 0 && a.len % u.len == 0;
    const char *p = a.buf;
    for (Py_ssize_t i = 0; same && i < a.len; i += u.len)
        same = memcmp(p + i, u.buf, (size_t)u.len) == 0;
    PyBuffer_Release(&a);
    PyBuffer_Release(&u);
    return PyBool_FromLong(same);
}

/* ---------------------------------------------------------------------------------------- */
/* distinct_texts: are a column's texts (of the rows counted) all different                  */

/* distinct_texts(texts, counts) -> bool: whether the text column `texts` (a column tuple, see
 * col_tuple) holds no text twice among its rows whose int32 column `counts` is above 0 (a NULL
 * text there: False). Texts are equal when their bytes are (a hash, then the bytes compared).
 * msq.pipeline.unique_op_keys: a side's ops' row_keys, whose k (op_pairs_default's keyed) is
 * then 1 for every op with rows. ValueError on columns that do not agree. */
static PyObject *distinct_texts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *tc, *cc;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &tc, &PyTuple_Type, &cc)) return NULL;
    const char *tkind, *ckind;
    long long tn, tnulls, cn, cnulls;
    PyObject *tname, *tv, *td, *to, *cname, *cv, *cd, *co;
    if (!PyArg_ParseTuple(tc, "OsLLOOO", &tname, &tkind, &tn, &tnulls, &tv, &td, &to)
        || !PyArg_ParseTuple(cc, "OsLLOOO", &cname, &ckind, &cn, &cnulls, &cv, &cd, &co))
        return NULL;
    if (strcmp(tkind, "str") != 0 || strcmp(ckind, "i32") != 0 || tn != cn || tn < 0
        || to == Py_None)
        return PyErr_Format(PyExc_ValueError, "distinct_texts: a text and an int32 column of "
                            "as many rows");
    Py_buffer data = {0}, offs = {0}, valid = {0}, counts = {0}, cvalid = {0};
    PyObject *out = NULL;
    uint64_t *hashes = NULL;
    int64_t *slots = NULL;
    if (PyObject_GetBuffer(td, &data, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(to, &offs, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(cd, &counts, PyBUF_SIMPLE) < 0) goto done;
    if (tv != Py_None && PyObject_GetBuffer(tv, &valid, PyBUF_SIMPLE) < 0) goto done;
    if (cv != Py_None && PyObject_GetBuffer(cv, &cvalid, PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t n = (Py_ssize_t)tn;
    int ok = offs.len == 4 * (n + 1) && counts.len >= 4 * n
             && (!valid.buf || valid.len >= (n + 7) / 8) && (!cvalid.buf || cvalid.len >= (n + 7) / 8);
    const char *op = offs.buf;
    int32_t prev = 0;
    for (Py_ssize_t r = 0; ok && r <= n; r++) {  /* from 0 up, never down, within the data */
        int32_t x;
        memcpy(&x, op + 4 * r, 4);
        ok = r == 0 ? x >= 0 : x >= prev;
        prev = x;
    }
    if (!ok || prev > data.len) {
        PyErr_SetString(PyExc_ValueError, "distinct_texts: a column's offsets, data or validity "
                        "do not agree");
        goto done;
    }
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    slots = malloc(cap * sizeof *slots);
    hashes = malloc(cap * sizeof *hashes);
    if (!slots || !hashes) {
        PyErr_NoMemory();
        goto done;
    }
    int distinct = 1;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < cap; i++) slots[i] = -1;
    const unsigned char *vb = valid.buf, *cvb = cvalid.buf;
    const char *text = data.buf, *cp = counts.buf;
    for (Py_ssize_t r = 0; r < n && distinct; r++) {
        int32_t count;
        memcpy(&count, cp + 4 * r, 4);
        if ((cvb && !((cvb[r >> 3] >> (r & 7)) & 1)) || count <= 0) continue;
        if (vb && !((vb[r >> 3] >> (r & 7)) & 1)) {
            distinct = 0;  /* a NULL key: not looked into */
            break;
        }
        int32_t a, b;
        memcpy(&a, op + 4 * r, 4);
        memcpy(&b, op + 4 * r + 4, 4);
        size_t len = (size_t)(b - a);
        uint64_t h = hash_words(text + a, len);
        size_t at = (size_t)h & (cap - 1);
        for (; slots[at] >= 0; at = (at + 1) & (cap - 1)) {
            if (hashes[at] != h) continue;
            int32_t a2, b2;
            memcpy(&a2, op + 4 * slots[at], 4);
            memcpy(&b2, op + 4 * slots[at] + 4, 4);
            if ((size_t)(b2 - a2) == len && memcmp(text + a2, text + a, len) == 0) {
                distinct = 0;
                break;
            }
        }
        slots[at] = r;
        hashes[at] = h;
    }
    Py_END_ALLOW_THREADS
    out = PyBool_FromLong(distinct);
done:
    free(slots);
    free(hashes);
    if (data.buf) PyBuffer_Release(&data);
    if (offs.buf) PyBuffer_Release(&offs);
    if (counts.buf) PyBuffer_Release(&counts);
    if (valid.buf) PyBuffer_Release(&valid);
    if (cvalid.buf) PyBuffer_Release(&cvalid);
    return out;
}

/* ---------------------------------------------------------------------------------------- */
/* text_codes: a text column of few values as one byte a row                                 */

/* n bytes of a and b equal: short texts (a dtype, "input", a kind) compared by two overlapping
 * loads of eight, four or one byte from each end, without a loop or a call of memcmp a row (a
 * loop of bytes took ~66 instructions a value of a batch's five coded columns) */
/* text_codes(column, values) -> (codes, seen) | None
 *
 * column: a text column tuple (see col_tuple); values: a tuple of at most 64 bytes objects. codes
 * is one byte a row, the place in values of the row's text (0 on a NULL row: the column's
 * validity tells those), seen a bit mask of the places found; None when a row's text is none of
 * values. msq.pipeline.load_batch hands DuckDB these bytes for the ENUM columns of a batch's
 * tensors (a text's Arrow import, compare and cast cost ~120 instructions a value more than a
 * byte's: bench/README, "Session 26: read"). */
static PyObject *text_codes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *tc, *values;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &tc, &PyTuple_Type, &values)) return NULL;
    const char *kind;
    long long n, nulls;
    PyObject *name, *tv, *td, *to;
    if (!PyArg_ParseTuple(tc, "OsLLOOO", &name, &kind, &n, &nulls, &tv, &td, &to)) return NULL;
    Py_ssize_t nv = PyTuple_GET_SIZE(values);
    if (strcmp(kind, "str") != 0 || to == Py_None || n < 0 || nv > 64)
        return PyErr_Format(PyExc_ValueError, "text_codes: a text column and at most 64 values");
    const char *vp[64];
    size_t vn[64];
    for (Py_ssize_t j = 0; j < nv; j++) {
        PyObject *v = PyTuple_GET_ITEM(values, j);
        if (!PyBytes_Check(v)) return PyErr_Format(PyExc_TypeError, "text_codes: bytes values");
        vp[j] = PyBytes_AS_STRING(v);
        vn[j] = (size_t)PyBytes_GET_SIZE(v);
    }
    Py_buffer data = {0}, offs = {0}, valid = {0};
    PyObject *out = NULL, *codes = NULL;
    if (PyObject_GetBuffer(td, &data, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(to, &offs, PyBUF_SIMPLE) < 0) goto done;
    if (tv != Py_None && PyObject_GetBuffer(tv, &valid, PyBUF_SIMPLE) < 0) goto done;
    if (offs.len < 4 * (n + 1) || (valid.buf && valid.len < (n + 7) / 8)) {
        PyErr_SetString(PyExc_ValueError, "text_codes: a column shorter than its length");
        goto done;
    }
    codes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (!codes) goto done;
    uint8_t *w = (uint8_t *)PyBytes_AS_STRING(codes);
    /* the loop's values held in locals: a store through w (a char pointer) may alias any
     * memory, so the compiler would load again every field it read from memory */
    const int32_t *o = offs.buf;
    const uint8_t *bits = valid.buf;
    const char *d = data.buf;
    const uint32_t dlen = data.len > INT32_MAX ? (uint32_t)INT32_MAX : (uint32_t)data.len;
    uint8_t by_byte[256];  /* a one-byte value's place + 1 (0: none): the kinds, looked up */
    memset(by_byte, 0, sizeof by_byte);
    int8_t by_len[33];  /* the place of the only value of a length, -1 none, -2 several */
    memset(by_len, -1, sizeof by_len);
    for (Py_ssize_t j = nv - 1; j >= 0; j--) {
        if (vn[j] == 1) by_byte[(uint8_t)vp[j][0]] = (uint8_t)(j + 1);
        if (vn[j] < sizeof by_len) by_len[vn[j]] = by_len[vn[j]] == -1 ? (int8_t)j : (int8_t)-2;
    }
    /* the offsets checked first, in a loop of their own (vectorized): from o[0] >= 0 up, never
     * down, within the data; then the loop below reads them unchecked */
    int bad = o[0] < 0 || (uint32_t)o[n] > dlen;
    for (long long r = 0; r < n; r++) bad |= o[r + 1] < o[r];
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "text_codes: string offsets out of range");
        goto done;
    }
    /* texts of one length (a side's constant column, the kinds): by whole-column loops */
    uint32_t step = n ? (uint32_t)(o[1] - o[0]) : 0;
    int uniform = n > 0 && step > 0;
    for (long long r = 0; uniform && r < n; r++) uniform = (uint32_t)(o[r + 1] - o[r]) == step;
    if (uniform && step == 1) {  /* a kind a row: looked up */
        const uint8_t *t = (const uint8_t *)d + o[0];
        uint8_t hit = 1;
        uint64_t seen = 0;
        for (long long r = 0; r < n; r++) {
            uint8_t j = by_byte[t[r]];
            hit &= j != 0;
            w[r] = (uint8_t)(j - 1);
            seen |= (uint64_t)1 << ((j - 1) & 63);
        }
        out = hit ? Py_BuildValue("(OK)", codes, (unsigned long long)seen) : Py_NewRef(Py_None);
        goto done;
    }
    if (uniform && memcmp(d + o[0], d + o[0] + step, (size_t)(n - 1) * step) == 0) {
        /* one text repeated (each equal to the one before) */
        Py_ssize_t j = 0;
        while (j < nv && !(vn[j] == step && same_short(d + o[0], vp[j], step))) j++;
        if (j < nv) memset(w, (int)j, (size_t)n);
        out = j < nv ? Py_BuildValue("(OK)", codes, (unsigned long long)((uint64_t)1 << j))
                     : Py_NewRef(Py_None);
        goto done;
    }
    uint64_t seen = 0;
    /* the place found last (none yet): most rows have the text of the row before */
    Py_ssize_t last = 0;
    const char *last_p = "";
    size_t last_n = (size_t)-1;
    int found = 1;
    uint32_t at = (uint32_t)o[0];
    for (long long r = 0; r < n; r++) {
        uint32_t end = (uint32_t)o[r + 1];
        size_t len = end - at;
        const char *t = d + at;
        at = end;
        if (len == 1) {  /* a kind: looked up */
            unsigned j = by_byte[(uint8_t)t[0]];
            if (j) {
                w[r] = (uint8_t)(j - 1);
                seen |= (uint64_t)1 << (j - 1);
                continue;
            }
        } else if (last_n == len && same_short(t, last_p, len)) {
            w[r] = (uint8_t)last;
            continue;
        }
        /* a text of the only value of its length (input, output) is compared with it alone */
        Py_ssize_t j = len < sizeof by_len ? by_len[len] : -2;
        if (j >= 0 && !same_short(t, vp[j], len)) j = nv;
        else if (j == -1) j = nv;
        else if (j == -2)
            for (j = 0; j < nv && !(vn[j] == len && same_short(t, vp[j], len));) j++;
        if (j < nv) {
            last = j;
            last_p = vp[j];
            last_n = vn[j];
            w[r] = (uint8_t)j;
            seen |= (uint64_t)1 << j;
        } else if (bits && !((bits[r >> 3] >> (r & 7)) & 1)) {
            w[r] = 0;  /* NULL (looked at only here: a NULL of the C reader is an empty text) */
        } else {
            found = 0;
            break;
        }
    }
    out = found ? Py_BuildValue("(OK)", codes, (unsigned long long)seen) : Py_NewRef(Py_None);
done:
    Py_XDECREF(codes);
    if (data.buf) PyBuffer_Release(&data);
    if (offs.buf) PyBuffer_Release(&offs);
    if (valid.buf) PyBuffer_Release(&valid);
    return out;
}

/* plain_stack(bytes) -> whether stack_of_plain_lists tells them (tests: what it tells, Python's
 * json reads as an object of lists) */
static PyObject *plain_stack(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)) return NULL;
    int told = stack_of_plain_lists((const char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyBool_FromLong(told);
}

static PyMethodDef METHODS[] = {
    {"flatten_dump", flatten_dump, METH_VARARGS,
     "flatten_dump(buffer, compat) -> (task, has_md5, looks_mindspore, op_cols, row_cols, codes) "
     "| reason"},
    {"check_stack", check_stack, METH_VARARGS, "check_stack(buffer) -> None | reason"},
    {"plain_stack", plain_stack, METH_O, "plain_stack(bytes) -> bool"},
    {"arrow_stream", arrow_stream, METH_O,
     "arrow_stream(batches) -> PyCapsule of an ArrowArrayStream over column tuples"},
    {"read_stream", read_stream, METH_O,
     "read_stream(capsule) -> [(name, format, n, nulls, validity, offsets, data)] | reason"},
    {"input_buffer", input_buffer, METH_VARARGS,
     "input_buffer(n, padding) -> a writable buffer of n + padding bytes, the padding zero"},
    {"live_bytes", live_bytes, METH_NOARGS, "live_bytes() -> bytes of this module's buffers alive"},
    {"kept_blocks", kept_blocks, METH_NOARGS,
     "kept_blocks() -> (count, bytes) of the blocks kept for the next read"},
    {"stable_order", stable_order, METH_O, "stable_order(int64 bytes) -> int64 indices bytes"},
    {"equal_bytes", equal_bytes, METH_VARARGS, "equal_bytes(a, b) -> the buffers hold the same bytes"},
    {"repeats", repeats, METH_VARARGS, "repeats(buffer, unit) -> buffer is unit repeated"},
    {"distinct_texts", distinct_texts, METH_VARARGS,
     "distinct_texts(texts, counts) -> no text twice among the rows counted above 0"},
    {"arithmetic", arithmetic, METH_VARARGS,
     "arithmetic(n, width, step) -> bytes of n native int32/int64: 0, step, 2 * step, ..."},
    {"text_codes", text_codes, METH_VARARGS,
     "text_codes(column, values) -> (one byte a row: its text's place in values, seen) | None"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_flatten",
                                    "dump.json parsed and flattened in C (see msq/_flatten.c)",
                                    -1, METHODS, NULL, NULL, NULL, NULL};

/* yyjson.c was built with MSQ_PYTHON_LITERALS: it refuses the non-finite spellings Python's json
 * refuses (else a dump holding one would be read, where the Python reader refuses it) */
static int python_literals_only(void) {
    static const char *refused[] = {"[nan]", "[-NaN]", "[inf]", "[-inf]", "[infinity]", "[INFINITY]"};
    static const char *read[] = {"[NaN]", "[Infinity]", "[-Infinity]"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        yyjson_doc *doc = yyjson_read(refused[i], strlen(refused[i]), YYJSON_READ_ALLOW_INF_AND_NAN);
        if (doc) {
            yyjson_doc_free(doc);
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof read / sizeof *read; i++) {
        yyjson_doc *doc = yyjson_read(read[i], strlen(read[i]), YYJSON_READ_ALLOW_INF_AND_NAN);
        if (!doc) return 0;
        yyjson_doc_free(doc);
    }
    return 1;
}

PyMODINIT_FUNC PyInit__flatten(void) {
    if (!python_literals_only()) {
        PyErr_SetString(PyExc_ImportError, "msq._flatten: yyjson was built without "
                        "MSQ_PYTHON_LITERALS (reinstall msq: pip install -e .)");
        return NULL;
    }
    if (PyType_Ready(&BufferType) < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m && (PyModule_AddIntConstant(m, "PADDING", YYJSON_PADDING_SIZE) || msq_add_source_crc(m))) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
