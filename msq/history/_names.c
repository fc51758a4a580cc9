/* The history's names held by a directory compare's driver for the whole run, as a hash table:
 * a pair's ~48,000 names are probed in it, not looked up by Arrow's index_in, which builds its
 * hash set of every known name (~45,000 after the first pair of a ranks x steps run) again at
 * each call (~41 M instructions a root-8x8-5000 pair in the driver, most of them that build;
 * bench/README, "Session 24: hist" and "Session 25: hist").
 *
 * Optional, like msq's other C extensions: without it msq/history/run_recorder.py looks the
 * names up in Arrow, which gives the same keys. The table holds copies of the names' bytes, each
 * with its key (name_id); names are only added (a new name after the largest key) or the newest
 * ones dropped again (truncate: a rolled-back transaction's), never changed.
 *
 * The strings come as an Arrow string or large_string array's buffers (validity, offsets, data;
 * the array's offset and length), read through the buffer protocol, not copied.
 *
 * group_rows (below) numbers a pair's rows by their class (run_recorder._Classes: ten or nine
 * columns a row) in one pass over the columns' buffers, with no table held between calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../_source_crc.h"  /* msq_add_source_crc: SOURCE_CRC, see msq/cext.py */
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    char *bytes;          /* the names' bytes, end to end */
    size_t nbytes, capbytes;
    int64_t *starts;      /* entry i: bytes[starts[i] .. starts[i + 1]) */
    int32_t *ids;         /* entry i's key */
    uint64_t *hashes;     /* entry i's hash (for growing the table) */
    Py_ssize_t count, cap;
    uint32_t *slots;      /* 0: empty; else 1 + an entry */
    uint64_t mask;        /* slots - 1 (a power of two) */
} NameIndex;

/* 64-bit hash of a name: 8 bytes a step, multiplied and mixed (names are 20-100 bytes); the
 * last step reads the last 8 bytes (overlapping the step before), not a copy of the rest */
static inline uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xFF51AFD7ED558CCDULL), w = 0;
    if (n >= 8) {
        const char *end = p + n - 8;
        for (; p < end; p += 8) {
            memcpy(&w, p, 8);
            h = (h ^ (w * 0xC2B2AE3D27D4EB4FULL)) * 0x9E3779B97F4A7C15ULL;
            h ^= h >> 29;
        }
        memcpy(&w, end, 8);
    } else {
        for (size_t i = 0; i < n; i++) w |= (uint64_t)(uint8_t)p[i] << (8 * i);
    }
    h = (h ^ (w * 0xC2B2AE3D27D4EB4FULL)) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ULL;
    h ^= h >> 32;
    return h;
}

/* whether n bytes at a and b are the same: 8 at a time, the last 8 overlapping (inlined: the
 * texts are short, and a call of memcmp cost more than the comparison) */
static inline int same(const char *a, const char *b, size_t n) {
    uint64_t x, y;
    if (n >= 8) {
        size_t at = 0;
        for (; at + 8 < n; at += 8) {
            memcpy(&x, a + at, 8);
            memcpy(&y, b + at, 8);
            if (x != y) return 0;
        }
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    uint32_t u, v;
    if (n >= 4) {  /* the first 4 bytes and the last 4 (overlapping) */
        memcpy(&u, a, 4);
        memcpy(&v, b, 4);
        if (u != v) return 0;
        memcpy(&u, a + n - 4, 4);
        memcpy(&v, b + n - 4, 4);
        return u == v;
    }
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* the entry holding these bytes, or -1 */
static inline Py_ssize_t find(const NameIndex *self, const char *p, size_t n, uint64_t h) {
    if (!self->slots) return -1;
    uint64_t at = h & self->mask;
    for (;;) {
        uint32_t slot = self->slots[at];
        if (!slot) return -1;
        Py_ssize_t e = (Py_ssize_t)slot - 1;
        if (self->hashes[e] == h && (size_t)(self->starts[e + 1] - self->starts[e]) == n &&
            same(self->bytes + self->starts[e], p, n))
            return e;
        at = (at + 1) & self->mask;
    }
}

static void place(NameIndex *self, Py_ssize_t e) {
    uint64_t at = self->hashes[e] & self->mask;
    while (self->slots[at]) at = (at + 1) & self->mask;
    self->slots[at] = (uint32_t)(e + 1);
}

/* the slots made again for the first ``count`` entries, at least twice as many as entries */
static int rehash(NameIndex *self, Py_ssize_t want) {
    uint64_t size = 64;
    while (size < (uint64_t)want * 2) size *= 2;
    uint32_t *slots = calloc(size, sizeof *slots);
    if (!slots) return -1;
    free(self->slots);
    self->slots = slots;
    self->mask = size - 1;
    for (Py_ssize_t e = 0; e < self->count; e++) place(self, e);
    return 0;
}

static int reserve(NameIndex *self, Py_ssize_t more, size_t morebytes) {
    if (self->count + more > self->cap) {
        Py_ssize_t cap = self->cap ? self->cap : 1024;
        while (cap < self->count + more) cap *= 2;
        int64_t *starts = realloc(self->starts, (size_t)(cap + 1) * sizeof *starts);
        if (!starts) return -1;
        self->starts = starts;
        int32_t *ids = realloc(self->ids, (size_t)cap * sizeof *ids);
        if (!ids) return -1;
        self->ids = ids;
        uint64_t *hashes = realloc(self->hashes, (size_t)cap * sizeof *hashes);
        if (!hashes) return -1;
        self->hashes = hashes;
        self->cap = cap;
    }
    if (self->nbytes + morebytes > self->capbytes) {
        size_t cap = self->capbytes ? self->capbytes : 65536;
        while (cap < self->nbytes + morebytes) cap *= 2;
        char *bytes = realloc(self->bytes, cap);
        if (!bytes) return -1;
        self->bytes = bytes;
        self->capbytes = cap;
    }
    if (!self->slots || (uint64_t)(self->count + more) * 2 > self->mask + 1)
        return rehash(self, self->count + more);
    return 0;
}

/* An Arrow string array's buffers, as the caller passes them */
typedef struct {
    Py_buffer valid, offsets, data;
    int has_valid, large;
    Py_ssize_t offset, length;
} Strings;

static void strings_release(Strings *s) {
    if (s->has_valid) PyBuffer_Release(&s->valid);
    PyBuffer_Release(&s->offsets);
    PyBuffer_Release(&s->data);
}

/* (validity or None, offsets, data, offset, length, large) -> 0, or -1 with an exception */
static int strings_get(PyObject *const *args, Strings *s) {
    memset(s, 0, sizeof *s);
    s->offset = PyLong_AsSsize_t(args[3]);
    s->length = PyLong_AsSsize_t(args[4]);
    s->large = PyObject_IsTrue(args[5]);
    if (PyErr_Occurred() || s->large < 0) return -1;
    if (s->offset < 0 || s->length < 0) {
        PyErr_SetString(PyExc_ValueError, "negative offset or length");
        return -1;
    }
    if (args[0] != Py_None) {
        if (PyObject_GetBuffer(args[0], &s->valid, PyBUF_SIMPLE)) return -1;
        s->has_valid = 1;
    }
    if (PyObject_GetBuffer(args[1], &s->offsets, PyBUF_SIMPLE)) {
        if (s->has_valid) PyBuffer_Release(&s->valid);
        return -1;
    }
    if (args[2] == Py_None) {  /* an array of empty strings or NULLs alone may have no data */
        static const char nothing = 0;
        if (PyBuffer_FillInfo(&s->data, NULL, (void *)&nothing, 0, 1, PyBUF_SIMPLE)) {
            if (s->has_valid) PyBuffer_Release(&s->valid);
            PyBuffer_Release(&s->offsets);
            return -1;
        }
    } else if (PyObject_GetBuffer(args[2], &s->data, PyBUF_SIMPLE)) {
        if (s->has_valid) PyBuffer_Release(&s->valid);
        PyBuffer_Release(&s->offsets);
        return -1;
    }
    Py_ssize_t width = s->large ? 8 : 4, end = s->offset + s->length;
    if (s->offsets.len < (end + 1) * width ||
        (s->has_valid && s->valid.len * 8 < end)) {
        strings_release(s);
        PyErr_SetString(PyExc_ValueError, "buffers shorter than the array");
        return -1;
    }
    return 0;
}

/* row i's string (0), NULL (1), or bytes outside the data buffer (-1, an exception set) */
static inline int strings_at(const Strings *s, Py_ssize_t i, const char **p, size_t *n) {
    Py_ssize_t r = s->offset + i;
    if (s->has_valid && !((((const uint8_t *)s->valid.buf)[r >> 3] >> (r & 7)) & 1)) return 1;
    int64_t a, b;
    if (s->large) {
        a = ((const int64_t *)s->offsets.buf)[r];
        b = ((const int64_t *)s->offsets.buf)[r + 1];
    } else {
        a = ((const int32_t *)s->offsets.buf)[r];
        b = ((const int32_t *)s->offsets.buf)[r + 1];
    }
    if (a < 0 || b < a || b > s->data.len) {
        PyErr_SetString(PyExc_ValueError, "string offsets outside the data buffer");
        return -1;
    }
    *p = (const char *)s->data.buf + a;
    *n = (size_t)(b - a);
    return 0;
}

PyDoc_STRVAR(lookup_doc,
"lookup(validity, offsets, data, offset, length, large) -> (bytes, bytes | None)\n\n"
"The key of each string of the array (its buffers; large: int64 offsets) as int32s, native\n"
"order, and their validity as an Arrow bitmap (None: every string found): a NULL or a name\n"
"not held is not valid (its key -1).");

static PyObject *NameIndex_lookup(NameIndex *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "lookup takes 6 arguments");
        return NULL;
    }
    Strings s;
    if (strings_get(args, &s)) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, s.length * 4);
    PyObject *valid = PyBytes_FromStringAndSize(NULL, (s.length + 7) / 8);
    if (!out || !valid) {
        Py_XDECREF(out);
        Py_XDECREF(valid);
        strings_release(&s);
        return NULL;
    }
    int32_t *keys = (int32_t *)PyBytes_AS_STRING(out);
    Py_ssize_t missing = 0;
    /* the string before (a row's op name repeats on the op's every input and output row):
     * an equal one takes its key without hashing and probing */
    const char *last = NULL;
    size_t last_n = 0;
    int32_t last_key = -1;
    for (Py_ssize_t i = 0; i < s.length; i++) {
        const char *p;
        size_t n;
        int rc = strings_at(&s, i, &p, &n);
        if (rc < 0) {
            Py_DECREF(out);
            Py_DECREF(valid);
            strings_release(&s);
            return NULL;
        }
        int32_t key;
        if (rc) {
            key = -1;
        } else if (last && n == last_n && same(p, last, n)) {
            key = last_key;
        } else {
            Py_ssize_t e = find(self, p, n, hash_bytes(p, n));
            key = last_key = e < 0 ? -1 : self->ids[e];
            last = p;
            last_n = n;
        }
        keys[i] = key;
        missing += key < 0;
    }
    strings_release(&s);
    if (!missing) {  /* most calls: no bitmap to make */
        Py_DECREF(valid);
        valid = Py_NewRef(Py_None);
    } else {
        uint8_t *bits = (uint8_t *)PyBytes_AS_STRING(valid);
        memset(bits, 0, (size_t)(s.length + 7) / 8);
        for (Py_ssize_t i = 0; i < s.length; i++)
            bits[i >> 3] |= (uint8_t)((keys[i] >= 0) << (i & 7));
    }
    PyObject *both = PyTuple_Pack(2, out, valid);
    Py_DECREF(out);
    Py_DECREF(valid);
    return both;
}

PyDoc_STRVAR(add_doc,
"add(validity, offsets, data, offset, length, large, ids)\n\n"
"The strings of the array held, each with its key (ids: an int32 buffer, one a string), in\n"
"order after those held; a NULL is skipped.");

static PyObject *NameIndex_add(NameIndex *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "add takes 7 arguments");
        return NULL;
    }
    Strings s;
    if (strings_get(args, &s)) return NULL;
    Py_buffer ids;
    if (PyObject_GetBuffer(args[6], &ids, PyBUF_SIMPLE)) {
        strings_release(&s);
        return NULL;
    }
    PyObject *result = NULL;
    if (ids.len < s.length * 4) {
        PyErr_SetString(PyExc_ValueError, "fewer keys than strings");
        goto done;
    }
    /* the bytes the strings span (one reservation for all, the entries at most length) */
    size_t total = 0;
    for (Py_ssize_t i = 0; i < s.length; i++) {
        const char *p;
        size_t n;
        int rc = strings_at(&s, i, &p, &n);
        if (rc < 0) goto done;
        if (!rc) total += n;
    }
    if (reserve(self, s.length, total)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < s.length; i++) {
        const char *p;
        size_t n;
        if (strings_at(&s, i, &p, &n)) continue;  /* NULL (offsets checked above) */
        Py_ssize_t e = self->count;
        self->starts[e] = (int64_t)self->nbytes;
        memcpy(self->bytes + self->nbytes, p, n);
        self->nbytes += n;
        self->starts[e + 1] = (int64_t)self->nbytes;
        self->ids[e] = ((const int32_t *)ids.buf)[i];
        self->hashes[e] = hash_bytes(p, n);
        self->count = e + 1;
        place(self, e);
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&ids);
    strings_release(&s);
    return result;
}

PyDoc_STRVAR(truncate_doc,
"truncate(count)\n\nHold the first count names alone (those added since are dropped).");

static PyObject *NameIndex_truncate(NameIndex *self, PyObject *arg) {
    Py_ssize_t count = PyLong_AsSsize_t(arg);
    if (count == -1 && PyErr_Occurred()) return NULL;
    if (count < 0 || count > self->count) {
        PyErr_SetString(PyExc_ValueError, "count outside 0 .. len()");
        return NULL;
    }
    if (count < self->count) {
        self->count = count;
        self->nbytes = count ? (size_t)self->starts[count] : 0;
        if (rehash(self, count)) return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

static Py_ssize_t NameIndex_len(NameIndex *self) { return self->count; }

static void NameIndex_dealloc(NameIndex *self) {
    free(self->bytes);
    free(self->starts);
    free(self->ids);
    free(self->hashes);
    free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ---- A pair's rows grouped by their class's columns (run_recorder._Classes) ----
 *
 * A class is the combination of a row's values in ten (result rows) or nine (blame) columns;
 * a pair has ~24,500 rows but ~20-45 combinations, each column a few distinct values, and a
 * row's value mostly its row before's. group_rows numbers the combinations in the order of
 * their first row in two passes over the columns' Arrow buffers: each column's values made
 * small codes (a text equal to the row before's takes its code by a comparison, another is
 * probed among the column's texts; a dictionary's entries are coded once; a boolean or an
 * integer is its own code), then each row's codes compared with the row before's, and only a
 * row that differs hashed and probed among the pair's combinations. It replaced looking each
 * text up among the classes' texts and combining the ten codes a row in numpy (bench/README,
 * "Session 26: drv"). */

/* An Arrow string array's buffers, or a dictionary's indices and a number column's values */
typedef struct {
    int kind;            /* COL_TEXT, COL_DICT, COL_FIXED */
    Strings s;           /* COL_TEXT: the texts; COL_DICT: the dictionary */
    Py_buffer ivalid, idata;  /* COL_DICT: the indices; COL_FIXED: the values */
    int has_ivalid, width;    /* width: bytes a value (0: bits, Arrow's booleans) */
    Py_ssize_t ioffset;
    int held;             /* which buffers are held (to release) */
} Column;

enum { COL_TEXT, COL_DICT, COL_FIXED };

/* The code of a NULL (values are coded 1, 2, ...) */
#define NULL_TEXT 0

static void column_release(Column *c) {
    if (c->held & 1) strings_release(&c->s);
    if (c->held & 2) PyBuffer_Release(&c->idata);
    if (c->held & 4) PyBuffer_Release(&c->ivalid);
    c->held = 0;
}

/* a fixed-width value at ``r`` (the array's offset added): bits, or 1, 2, 4 bytes (unsigned
 * below 4: Arrow's dictionary indices are uint8 when DuckDB sends an ENUM) */
static inline int64_t fixed_at(const Column *c, Py_ssize_t r) {
    const uint8_t *d = (const uint8_t *)c->idata.buf;
    switch (c->width) {
    case 0: return (d[r >> 3] >> (r & 7)) & 1;
    case 1: return d[r];
    case 2: return ((const uint16_t *)d)[r];
    default: return ((const int32_t *)d)[r];
    }
}

static inline int fixed_valid(const Column *c, Py_ssize_t r) {
    return !c->has_ivalid || ((((const uint8_t *)c->ivalid.buf)[r >> 3] >> (r & 7)) & 1);
}

/* (one column's spec, the batch's length) -> 0, or -1 with an exception. A spec is the texts'
 * (validity, offsets, data, offset, length, large) as NameIndex.lookup takes them; for a
 * dictionary-encoded column, the dictionary's six and then its indices' (validity, values,
 * offset, width); for numbers and booleans, (validity, values, offset, width: 0 for bits) */
static int column_get(PyObject *spec, Py_ssize_t length, Column *c) {
    memset(c, 0, sizeof *c);
    if (!PyTuple_Check(spec)) {
        PyErr_SetString(PyExc_TypeError, "a column is a tuple of its buffers");
        return -1;
    }
    Py_ssize_t size = PyTuple_GET_SIZE(spec);
    PyObject *const *items = PySequence_Fast_ITEMS(spec);  /* a tuple's items */
    PyObject *const *fixed = NULL;
    if (size == 6 || size == 10) {  /* the texts, or the dictionary: as NameIndex.lookup's */
        if (strings_get(items, &c->s)) return -1;
        c->held |= 1;
        c->kind = size == 6 ? COL_TEXT : COL_DICT;
        if (size == 6 && c->s.length < length) {
            PyErr_SetString(PyExc_ValueError, "fewer texts than the batch's rows");
            column_release(c);
            return -1;
        }
        if (size == 10) fixed = items + 6;
    } else if (size == 4) {
        c->kind = COL_FIXED;
        fixed = items;
    } else {
        PyErr_SetString(PyExc_TypeError, "a column is 4, 6 or 10 buffers and numbers");
        return -1;
    }
    if (fixed) {
        c->ioffset = PyLong_AsSsize_t(fixed[2]);
        long width = PyLong_AsLong(fixed[3]);
        if (PyErr_Occurred()) goto fail;
        if (c->ioffset < 0 || (width != 0 && width != 1 && width != 2 && width != 4)) {
            PyErr_SetString(PyExc_ValueError, "a negative offset, or a width not 0, 1, 2, 4");
            goto fail;
        }
        c->width = (int)width;
        if (PyObject_GetBuffer(fixed[1], &c->idata, PyBUF_SIMPLE)) goto fail;
        c->held |= 2;
        if (fixed[0] != Py_None) {
            if (PyObject_GetBuffer(fixed[0], &c->ivalid, PyBUF_SIMPLE)) goto fail;
            c->held |= 4;
            c->has_ivalid = 1;
        }
        Py_ssize_t end = c->ioffset + length;
        Py_ssize_t need = width ? end * width : (end + 7) / 8;
        if (c->idata.len < need || (c->has_ivalid && c->ivalid.len * 8 < end)) {
            PyErr_SetString(PyExc_ValueError, "buffers shorter than the array");
            goto fail;
        }
    }
    return 0;
fail:
    column_release(c);
    return -1;
}

/* A column's distinct texts (pointing into the batches' buffers, held until the end), coded
 * 1, 2, ... in the order met; an open-addressing table, at most half full */
typedef struct {
    const char **p;
    size_t *n;
    uint64_t *hash;
    Py_ssize_t count, cap;
    uint32_t *slots;
    uint64_t mask;
} Texts;

static void texts_free(Texts *t) {
    free(t->p);
    free(t->n);
    free(t->hash);
    free(t->slots);
}

/* the code of these bytes in ``t`` (added if new), or -1 out of memory */
static int64_t texts_code(Texts *t, const char *p, size_t n) {
    uint64_t h = hash_bytes(p, n);
    if (!t->slots) {
        t->mask = 15;
        t->slots = calloc(t->mask + 1, sizeof *t->slots);
        if (!t->slots) return -1;
    }
    uint64_t at = h & t->mask;
    for (;;) {
        uint32_t slot = t->slots[at];
        if (!slot) break;
        Py_ssize_t e = (Py_ssize_t)slot - 1;
        if (t->hash[e] == h && t->n[e] == n && same(t->p[e], p, n)) return e + 1;
        at = (at + 1) & t->mask;
    }
    if (t->count == t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 16;
        const char **p2 = realloc(t->p, (size_t)cap * sizeof *p2);
        if (!p2) return -1;
        t->p = p2;
        size_t *n2 = realloc(t->n, (size_t)cap * sizeof *n2);
        if (!n2) return -1;
        t->n = n2;
        uint64_t *h2 = realloc(t->hash, (size_t)cap * sizeof *h2);
        if (!h2) return -1;
        t->hash = h2;
        t->cap = cap;
    }
    Py_ssize_t e = t->count++;
    t->p[e] = p;
    t->n[e] = n;
    t->hash[e] = h;
    if ((uint64_t)t->count * 2 > t->mask + 1) {
        uint64_t size = (t->mask + 1) * 2;
        uint32_t *slots = calloc(size, sizeof *slots);
        if (!slots) return -1;
        free(t->slots);
        t->slots = slots;
        t->mask = size - 1;
        for (Py_ssize_t k = 0; k < t->count; k++) {
            uint64_t s = t->hash[k] & t->mask;
            while (t->slots[s]) s = (s + 1) & t->mask;
            t->slots[s] = (uint32_t)(k + 1);
        }
    } else {
        t->slots[at] = (uint32_t)(e + 1);
    }
    return e + 1;
}

/* one batch's column ``c`` as codes (``out``, one a row): dense, 0 for NULL, 1, 2, ... for
 * each distinct value in the order met across the batches (a boolean: 1 + its bit; an integer
 * by its bytes in ``t`` as a text's): 0, or -1 with an exception */
static int column_codes(const Column *c, Py_ssize_t n, Texts *t, int32_t *restrict out) {
    if (c->kind == COL_FIXED) {
        if (c->width == 0) {  /* a boolean */
            for (Py_ssize_t i = 0; i < n; i++) {
                Py_ssize_t r = c->ioffset + i;
                out[i] = fixed_valid(c, r) ? 1 + (int32_t)fixed_at(c, r) : NULL_TEXT;
            }
            return 0;
        }
        const char *data = (const char *)c->idata.buf;
        int64_t last = -1, last_code = NULL_TEXT;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t r = c->ioffset + i;
            if (!fixed_valid(c, r)) {
                out[i] = NULL_TEXT;
                continue;
            }
            int64_t v = fixed_at(c, r);
            if (v != last || last_code == NULL_TEXT) {
                last_code = texts_code(t, data + r * c->width, (size_t)c->width);
                if (last_code < 0) {
                    PyErr_NoMemory();
                    return -1;
                }
                last = v;
            }
            out[i] = (int32_t)last_code;
        }
        return 0;
    }
    if (c->kind == COL_DICT) {  /* the dictionary's entries coded once, then each row's */
        Py_ssize_t size = c->s.length;
        int32_t *entry = malloc((size_t)(size ? size : 1) * sizeof *entry);
        if (!entry) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t j = 0; j < size; j++) {
            const char *p;
            size_t len;
            int rc = strings_at(&c->s, j, &p, &len);
            int64_t code = rc ? NULL_TEXT : texts_code(t, p, len);
            if (rc < 0 || code < 0) {
                free(entry);
                if (rc >= 0) PyErr_NoMemory();
                return -1;
            }
            entry[j] = (int32_t)code;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t r = c->ioffset + i;
            if (!fixed_valid(c, r)) {
                out[i] = NULL_TEXT;
                continue;
            }
            int64_t j = fixed_at(c, r);
            if (j < 0 || j >= size) {
                free(entry);
                PyErr_SetString(PyExc_ValueError, "a dictionary index outside its dictionary");
                return -1;
            }
            out[i] = entry[j];
        }
        free(entry);
        return 0;
    }
    /* the last two texts met (a column mostly holds its row before's, or alternates between
     * two: an op's input and output rows): an equal one takes its code by a comparison, not a
     * hash and a probe. The offsets read here for int32 ones (Arrow's string), not by
     * strings_at: its checks a row cost as much as the comparison */
    const char *p1 = NULL, *p2 = NULL;
    size_t n1 = 0, n2 = 0;
    int64_t c1 = -1, c2 = -1;
    const int32_t *off = c->s.large ? NULL : (const int32_t *)c->s.offsets.buf + c->s.offset;
    const uint8_t *valid = c->s.has_valid ? (const uint8_t *)c->s.valid.buf : NULL;
    const char *data = (const char *)c->s.data.buf;
    if (off && n) {
        /* the offsets checked once (0 <= the first, each <= the next, the last <= the data's
         * end: every row's bytes inside the data), not row by row */
        int bad = off[0] < 0 || (uint64_t)(int64_t)off[n] > (uint64_t)c->s.data.len;
        for (Py_ssize_t i = 0; i < n; i++) bad |= off[i] > off[i + 1];
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "string offsets outside the data buffer");
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        int rc;
        if (off) {
            Py_ssize_t r = c->s.offset + i;
            int32_t from = off[i], to = off[i + 1];
            rc = valid && !((valid[r >> 3] >> (r & 7)) & 1);
            p = data + from;
            len = (size_t)(to - from);
        } else {
            rc = strings_at(&c->s, i, &p, &len);
            if (rc < 0) return -1;
        }
        int64_t code;
        if (rc) {
            code = NULL_TEXT;
        } else if (len == n1 && c1 >= 0 && same(p, p1, len)) {
            code = c1;
        } else {
            if (len == n2 && c2 >= 0 && same(p, p2, len)) {
                code = c2;
            } else {
                code = texts_code(t, p, len);
                if (code < 0) {
                    PyErr_NoMemory();
                    return -1;
                }
            }
            p2 = p1, n2 = n1, c2 = c1;
            p1 = p, n1 = len, c1 = code;
        }
        out[i] = (int32_t)code;
    }
    return 0;
}

/* the bits a column's codes take (its texts, or a boolean's 0, 1, 2) */
static int code_bits(const Column *c, const Texts *t) {
    uint64_t top = c->kind == COL_FIXED && c->width == 0 ? 2 : (uint64_t)t->count;
    int bits = 0;
    while (top >> bits) bits++;
    return bits;
}

static inline uint64_t codes_hash(const int32_t *codes, int ncols) {
    uint64_t h = 0x243F6A8885A308D3ULL;
    for (int k = 0; k < ncols; k++) {
        h = (h ^ ((uint64_t)(uint32_t)codes[k] * 0xFF51AFD7ED558CCDULL)) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 31;
    }
    return h;
}

/* The pair's combinations: each one's codes, hash and first row, numbered in the order met; an
 * open-addressing table of them, at most half full */
typedef struct {
    int ncols;
    int32_t *codes;
    uint64_t *hash;
    int64_t *heads;
    Py_ssize_t count, cap;
    uint32_t *slots;
    uint64_t mask;
} Groups;

static void groups_free(Groups *g) {
    free(g->codes);
    free(g->hash);
    free(g->heads);
    free(g->slots);
}

/* the number of the combination ``row`` (added, first met at row ``at``, if new), or -1 with
 * an exception */
static int32_t groups_find(Groups *g, const int32_t *row, int64_t at) {
    int ncols = g->ncols;
    uint64_t h = codes_hash(row, ncols), s = h & g->mask;
    for (;;) {
        uint32_t slot = g->slots[s];
        if (!slot) break;
        Py_ssize_t e = (Py_ssize_t)slot - 1;
        if (g->hash[e] == h && !memcmp(row, &g->codes[e * ncols], (size_t)ncols * sizeof *row))
            return (int32_t)e;
        s = (s + 1) & g->mask;
    }
    if (g->count == g->cap) {
        Py_ssize_t cap = g->cap ? g->cap * 2 : 64;
        int32_t *c2 = realloc(g->codes, (size_t)cap * (size_t)ncols * sizeof *c2);
        if (c2) g->codes = c2;
        uint64_t *h2 = c2 ? realloc(g->hash, (size_t)cap * sizeof *h2) : NULL;
        if (h2) g->hash = h2;
        int64_t *f2 = h2 ? realloc(g->heads, (size_t)cap * sizeof *f2) : NULL;
        if (!f2) {
            PyErr_NoMemory();
            return -1;
        }
        g->heads = f2;
        g->cap = cap;
    }
    if (g->count >= INT32_MAX - 1) {
        PyErr_SetString(PyExc_OverflowError, "too many combinations");
        return -1;
    }
    Py_ssize_t e = g->count++;
    memcpy(&g->codes[e * ncols], row, (size_t)ncols * sizeof *row);
    g->hash[e] = h;
    g->heads[e] = at;
    if ((uint64_t)g->count * 2 > g->mask + 1) {  /* grown: the slots made again */
        uint64_t size = (g->mask + 1) * 2;
        uint32_t *slots = calloc(size, sizeof *slots);
        if (!slots) {
            PyErr_NoMemory();
            return -1;
        }
        free(g->slots);
        g->slots = slots;
        g->mask = size - 1;
        for (Py_ssize_t k = 0; k < g->count; k++) {
            uint64_t t = g->hash[k] & g->mask;
            while (g->slots[t]) t = (t + 1) & g->mask;
            g->slots[t] = (uint32_t)(k + 1);
        }
    } else {
        g->slots[s] = (uint32_t)(e + 1);
    }
    return (int32_t)e;
}

/* A batch's rows' codes packed into one 64-bit key a row (where their bits fit), each key met
 * with its combination's number: an open-addressing table, at most half full, emptied for
 * each batch (the packing is the batch's) */
typedef struct {
    uint64_t *keys;
    int32_t *groups;  /* -1: an empty slot */
    Py_ssize_t count;
    uint64_t mask;
} Packed;

static int packed_reset(Packed *p, Py_ssize_t want) {
    uint64_t size = 64;
    while (size < (uint64_t)want * 2) size *= 2;
    if (!p->keys || p->mask + 1 != size) {
        free(p->keys);
        free(p->groups);
        p->keys = malloc(size * sizeof *p->keys);
        p->groups = malloc(size * sizeof *p->groups);
        if (!p->keys || !p->groups) return -1;
        p->mask = size - 1;
    }
    memset(p->groups, 0xff, size * sizeof *p->groups);
    p->count = 0;
    return 0;
}

static inline uint64_t key_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    return k;
}

PyDoc_STRVAR(group_rows_doc,
"group_rows(batches) -> (bytes, bytes)\n\n"
"The rows of batches (each (length, columns), a column a tuple of its Arrow buffers: see\n"
"_names.c) numbered by their combination of the columns' values, 0, 1, 2, ... in the order\n"
"of each combination's first row: each row's number (int32s, native order), and each\n"
"number's first row (int64s, counted across the batches). Texts are equal by their bytes, a\n"
"NULL only to a NULL.");

static PyObject *group_rows(PyObject *module, PyObject *batches) {
    (void)module;
    PyObject *seq = PySequence_Fast(batches, "batches must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(seq), total = 0, longest = 0;
    int ncols = -1;
    for (Py_ssize_t b = 0; b < nb; b++) {
        PyObject *batch = PySequence_Fast_GET_ITEM(seq, b);
        if (!PyTuple_Check(batch) || PyTuple_GET_SIZE(batch) != 2 ||
            !PyTuple_Check(PyTuple_GET_ITEM(batch, 1))) {
            PyErr_SetString(PyExc_TypeError, "a batch is (length, a tuple of columns)");
            Py_DECREF(seq);
            return NULL;
        }
        Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(batch, 0));
        if (n == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        int k = (int)PyTuple_GET_SIZE(PyTuple_GET_ITEM(batch, 1));
        if (n < 0 || (ncols >= 0 && k != ncols) || k < 1) {
            PyErr_SetString(PyExc_ValueError, "batches of a negative length, or of other columns");
            Py_DECREF(seq);
            return NULL;
        }
        ncols = k;
        total += n;
        if (n > longest) longest = n;
    }
    if (ncols < 0) ncols = 1;
    PyObject *which = PyBytes_FromStringAndSize(NULL, total * 4);
    /* a batch's codes (column after column) and packed keys; a row's codes; each column's
     * texts; every batch's columns (their buffers held until the end: the texts point there) */
    size_t rows = (size_t)(longest ? longest : 1);
    int32_t *codes = malloc(rows * (size_t)ncols * sizeof *codes);
    uint64_t *keys = malloc(rows * sizeof *keys);
    int32_t *row = malloc((size_t)ncols * sizeof *row);
    Texts *texts = calloc((size_t)ncols, sizeof *texts);
    Column *held = calloc((size_t)(nb ? nb : 1) * (size_t)ncols, sizeof *held);
    Groups groups = {.ncols = ncols, .mask = 63, .slots = calloc(64, sizeof(uint32_t))};
    Packed packed = {0};
    Py_ssize_t nheld = 0;
    PyObject *result = NULL;
    if (!which || !codes || !keys || !row || !texts || !held || !groups.slots) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t *out = (int32_t *)PyBytes_AS_STRING(which);
    Py_ssize_t at = 0;
    for (Py_ssize_t b = 0; b < nb; b++) {
        PyObject *batch = PySequence_Fast_GET_ITEM(seq, b);
        Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(batch, 0));
        PyObject *specs = PyTuple_GET_ITEM(batch, 1);
        Column *bc = held + b * ncols;
        int bits = 0;
        for (int k = 0; k < ncols; k++) {
            if (column_get(PyTuple_GET_ITEM(specs, k), n, &bc[k])) goto done;
            nheld = b * ncols + k + 1;
            if (column_codes(&bc[k], n, &texts[k], codes + (size_t)k * (size_t)n)) goto done;
            bits += code_bits(&bc[k], &texts[k]);
        }
        if (bits <= 64) {
            /* each row's codes as one key: a row of the row before's key takes its number,
             * another key is probed among the batch's keys, and only a key new to the batch
             * among the combinations */
            memset(keys, 0, (size_t)n * sizeof *keys);
            int shift = 0;
            for (int k = 0; k < ncols; k++) {
                const int32_t *restrict col = codes + (size_t)k * (size_t)n;
                uint64_t *restrict into = keys;
                int width = code_bits(&bc[k], &texts[k]);
                if (!width) continue;  /* every row NULL (and no shift by 64) */
                for (Py_ssize_t i = 0; i < n; i++) into[i] |= (uint64_t)(uint32_t)col[i] << shift;
                shift += width;
            }
            if (packed_reset(&packed, groups.count + 16)) {
                PyErr_NoMemory();
                goto done;
            }
            int32_t last = -1;
            for (Py_ssize_t i = 0; i < n; i++, at++) {
                uint64_t key = keys[i];
                if (i && key == keys[i - 1]) {
                    out[at] = last;
                    continue;
                }
                uint64_t s = key_hash(key) & packed.mask;
                while (packed.groups[s] >= 0 && packed.keys[s] != key) s = (s + 1) & packed.mask;
                if (packed.groups[s] < 0) {  /* a key new to the batch */
                    for (int k = 0; k < ncols; k++) row[k] = codes[(size_t)k * (size_t)n + (size_t)i];
                    int32_t g = groups_find(&groups, row, at);
                    if (g < 0) goto done;
                    packed.keys[s] = key;
                    packed.groups[s] = g;
                    if ((uint64_t)++packed.count * 2 > packed.mask) {  /* full: made again */
                        if (packed_reset(&packed, packed.count * 2)) {
                            PyErr_NoMemory();
                            goto done;
                        }
                    }
                    out[at] = last = g;
                    continue;
                }
                out[at] = last = packed.groups[s];
            }
            continue;
        }
        int32_t last = -1;  /* too many bits: each row's codes compared with the row before's */
        for (Py_ssize_t i = 0; i < n; i++, at++) {
            int equal = i > 0;
            for (int k = 0; k < ncols; k++) {
                const int32_t *col = codes + (size_t)k * (size_t)n;
                row[k] = col[i];
                equal = equal && col[i] == col[i - 1];
            }
            if (equal) {
                out[at] = last;
                continue;
            }
            last = groups_find(&groups, row, at);
            if (last < 0) goto done;
            out[at] = last;
        }
    }
    {
        PyObject *firsts = PyBytes_FromStringAndSize((const char *)groups.heads,
                                                     groups.count * (Py_ssize_t)sizeof(int64_t));
        if (firsts) {
            result = PyTuple_Pack(2, which, firsts);
            Py_DECREF(firsts);
        }
    }
done:
    for (Py_ssize_t k = 0; k < nheld; k++) column_release(&held[k]);
    if (texts)
        for (int k = 0; k < ncols; k++) texts_free(&texts[k]);
    free(texts);
    free(held);
    free(codes);
    free(keys);
    free(row);
    groups_free(&groups);
    free(packed.keys);
    free(packed.groups);
    Py_XDECREF(which);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef module_methods[] = {
    {"group_rows", (PyCFunction)group_rows, METH_O, group_rows_doc},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef NameIndex_methods[] = {
    {"lookup", (PyCFunction)(void (*)(void))NameIndex_lookup, METH_FASTCALL, lookup_doc},
    {"add", (PyCFunction)(void (*)(void))NameIndex_add, METH_FASTCALL, add_doc},
    {"truncate", (PyCFunction)NameIndex_truncate, METH_O, truncate_doc},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods NameIndex_sequence = {.sq_length = (lenfunc)NameIndex_len};

static PyTypeObject NameIndexType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "msq.history._names.NameIndex",
    .tp_doc = PyDoc_STR("Names with their keys, held for a run (see the module's doc)."),
    .tp_basicsize = sizeof(NameIndex),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)NameIndex_dealloc,
    .tp_methods = NameIndex_methods,
    .tp_as_sequence = &NameIndex_sequence,
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_names",
                                    "The history's names held as a hash table (see _names.c).",
                                    -1, module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__names(void) {
    if (PyType_Ready(&NameIndexType) < 0) return NULL;
    PyObject *module = PyModule_Create(&MODULE);
    if (!module) return NULL;
    if (PyModule_AddObjectRef(module, "NameIndex", (PyObject *)&NameIndexType) < 0 ||
        msq_add_source_crc(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
