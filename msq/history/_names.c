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
                                    -1, NULL, NULL, NULL, NULL, NULL};

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
