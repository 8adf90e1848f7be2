/* The trusted writer's hot loop in compiled code: a hash index of 16-byte keys, fixed-width
 * joins, and per-target bit sums (docs/ingest_profile.md, "Compiled writer").
 *
 * Every loop over raw buffers runs with the interpreter lock released, so the event loop's
 * gRPC work goes on meanwhile. The pure-Python code (aggregator/keyindex.py,
 * ldpcollect/bits.py) stays the reference: tests/aggregator/test_native_writer.py compares
 * both on random inputs.
 *
 * KeyTable: keys are stored in insertion order (16 bytes each), and a key's value is its
 * position in that order: report ids map to their ordinal among the query's held reports and
 * pseudonyms to theirs among the round's, which is exactly that. An open-addressing table
 * (linear probing, at most 3/4 full) of 32-bit slots finds a key: the low `bits` bits of a
 * slot hold position + 1 (0: empty), the rest a fingerprint of the key's hash, so a probe
 * rarely reads a key it does not hold. The hash is the keyed mix of aggregator/keyindex.py
 * (MurmurHash3's finalizer around a secret drawn per table), so a client cannot choose keys
 * that crowd one stretch of the table. 16 bytes a key plus 5.3 to 10.7 bytes of table.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KEY_BYTES 16
/* Groups smaller than this are handled without releasing the interpreter lock: taking it
 * back costs more than the work. */
#define RELEASE_FROM 256
#define MIN_BITS 10
/* Bit sums over fewer bytes than this (a commit group at 100 targets: about 100 KB, 0.1 ms)
 * keep the lock: taking it back from a busy event loop can cost more than the sums. */
#define RELEASE_SUMS_FROM (1 << 20)

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8); /* little-endian machines only: checked at import */
    return v;
}

typedef struct {
    PyObject_HEAD
    uint64_t *keys;     /* 2 words per position */
    uint32_t *table;    /* 1 << bits slots */
    Py_ssize_t n;       /* keys held */
    Py_ssize_t cap;     /* positions allocated in `keys` */
    unsigned bits;
    uint64_t s0, s1;    /* the secret of the keyed mix */
    int busy;           /* set while the lock is released: no second thread may enter */
} KeyTable;

static inline uint64_t key_hash(const KeyTable *t, uint64_t k0, uint64_t k1)
{
    return mix64(k0 ^ mix64(k1 ^ t->s0) ^ t->s1);
}

static inline uint32_t fingerprint(unsigned bits, uint64_t h)
{
    if (bits >= 32)
        return 0;
    return (uint32_t)(h >> 32) & (uint32_t)((1ULL << (32 - bits)) - 1);
}

static inline uint32_t slot_of(unsigned bits, uint32_t fp, Py_ssize_t pos)
{
    return (uint32_t)(((uint64_t)fp << bits) | (uint64_t)(pos + 1));
}

static inline Py_ssize_t slot_pos(unsigned bits, uint32_t s)
{
    uint64_t low = bits >= 32 ? s : (s & (uint32_t)((1ULL << bits) - 1));
    return (Py_ssize_t)low - 1;
}

static inline uint32_t slot_fp(unsigned bits, uint32_t s)
{
    return bits >= 32 ? 0 : (s >> bits);
}

/* The position of key (k0, k1) or -1; `*free_slot` gets the empty slot where it would go. */
static Py_ssize_t find(const KeyTable *t, uint64_t k0, uint64_t k1, uint64_t h, size_t *free_slot)
{
    size_t mask = ((size_t)1 << t->bits) - 1;
    size_t i = (size_t)h & mask;
    uint32_t fp = fingerprint(t->bits, h);
    for (;;) {
        uint32_t s = t->table[i];
        if (s == 0) {
            if (free_slot)
                *free_slot = i;
            return -1;
        }
        if (slot_fp(t->bits, s) == fp) {
            Py_ssize_t p = slot_pos(t->bits, s);
            if (t->keys[2 * p] == k0 && t->keys[2 * p + 1] == k1)
                return p;
        }
        i = (i + 1) & mask;
    }
}

/* Make room for `more` keys: grow the key array and, past 3/4 load, the table (rehashed).
 * Returns 0, or -1 when out of memory (nothing changed). Needs no interpreter lock. */
static int reserve(KeyTable *t, Py_ssize_t more)
{
    Py_ssize_t need = t->n + more;
    if (need > t->cap) {
        Py_ssize_t cap = t->cap ? t->cap : 1024;
        while (cap < need)
            cap *= 2;
        uint64_t *keys = realloc(t->keys, (size_t)cap * KEY_BYTES);
        if (!keys)
            return -1;
        t->keys = keys;
        t->cap = cap;
    }
    unsigned bits = t->bits;
    while ((uint64_t)need * 4 > ((uint64_t)3 << bits))
        bits++;
    if (bits == t->bits && t->table)
        return 0;
    if (bits > 32)
        return -1;
    uint32_t *table = calloc((size_t)1 << bits, sizeof(uint32_t));
    if (!table)
        return -1;
    uint32_t *old = t->table;
    t->table = table;
    t->bits = bits;
    /* Keys in order (read sequentially), their new slots prefetched a few keys ahead: the
     * random writes are what a rehash waits for. */
    size_t mask = ((size_t)1 << bits) - 1;
    enum { AHEAD = 16 };
    for (Py_ssize_t p = 0; p < t->n; p++) {
        if (p + AHEAD < t->n) {
            const uint64_t *next = t->keys + 2 * (p + AHEAD);
            __builtin_prefetch(&t->table[(size_t)key_hash(t, next[0], next[1]) & mask], 1);
        }
        uint64_t k0 = t->keys[2 * p], k1 = t->keys[2 * p + 1];
        uint64_t h = key_hash(t, k0, k1);
        size_t at = 0;
        if (find(t, k0, k1, h, &at) < 0)
            t->table[at] = slot_of(bits, fingerprint(bits, h), p);
    }
    free(old);
    return 0;
}

/* Empty slot `i`, moving later entries of its cluster back (no tombstones). */
static void delete_slot(KeyTable *t, size_t i)
{
    size_t mask = ((size_t)1 << t->bits) - 1;
    size_t j = i;
    t->table[i] = 0;
    for (;;) {
        j = (j + 1) & mask;
        uint32_t s = t->table[j];
        if (s == 0)
            return;
        Py_ssize_t p = slot_pos(t->bits, s);
        size_t home = (size_t)key_hash(t, t->keys[2 * p], t->keys[2 * p + 1]) & mask;
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        t->table[i] = s;
        t->table[j] = 0;
        i = j;
    }
}

/* Forget the keys at positions n and after. */
static void truncate_to(KeyTable *t, Py_ssize_t n)
{
    size_t mask = ((size_t)1 << t->bits) - 1;
    for (Py_ssize_t p = t->n - 1; p >= n; p--) {
        uint64_t k0 = t->keys[2 * p], k1 = t->keys[2 * p + 1];
        size_t i = (size_t)key_hash(t, k0, k1) & mask;
        for (;;) { /* the slot naming position p (none: a repeated key of bulk_add) */
            uint32_t s = t->table[i];
            if (s == 0)
                break;
            if (slot_pos(t->bits, s) == p) {
                delete_slot(t, i);
                break;
            }
            i = (i + 1) & mask;
        }
    }
    if (n < t->n)
        t->n = n;
}

/* Append the keys of `packed`; with `all_or_nothing`, stop at the first one held (or
 * repeated among them) and take the ones added back: returns 0 then, 1 when all were added.
 * Without it, held keys get a position but no slot (bulk_add: they cannot occur). */
static int append_keys(KeyTable *t, const unsigned char *packed, Py_ssize_t count,
                       int all_or_nothing)
{
    Py_ssize_t start = t->n;
    unsigned bits = t->bits;
    size_t mask = ((size_t)1 << bits) - 1;
    enum { AHEAD = 8 };
    uint64_t ring[AHEAD];
    for (Py_ssize_t i = 0; i < count && i < AHEAD; i++) {
        const unsigned char *k = packed + (size_t)i * KEY_BYTES;
        ring[i] = key_hash(t, load64(k), load64(k + 8));
        __builtin_prefetch(&t->table[(size_t)ring[i] & mask]);
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        const unsigned char *k = packed + (size_t)i * KEY_BYTES;
        uint64_t k0 = load64(k), k1 = load64(k + 8);
        uint64_t h = ring[i % AHEAD];
        if (i + AHEAD < count) {
            const unsigned char *next = packed + (size_t)(i + AHEAD) * KEY_BYTES;
            uint64_t hn = key_hash(t, load64(next), load64(next + 8));
            ring[i % AHEAD] = hn;
            __builtin_prefetch(&t->table[(size_t)hn & mask]);
        }
        size_t at = 0;
        Py_ssize_t p = t->n;
        if (find(t, k0, k1, h, &at) >= 0) {
            if (all_or_nothing) {
                truncate_to(t, start);
                return 0;
            }
        } else {
            t->table[at] = slot_of(bits, fingerprint(bits, h), p);
        }
        t->keys[2 * p] = k0;
        t->keys[2 * p + 1] = k1;
        t->n = p + 1;
    }
    return 1;
}

/* Run `work` on table `t`, with the interpreter lock released when `count` keys are enough
 * work to pay for taking it back; no other thread may use `t` meanwhile (`enter`). */
#define WITH_TABLE(t, count, work)                                                            \
    do {                                                                                       \
        if ((count) >= RELEASE_FROM) {                                                         \
            (t)->busy = 1;                                                                     \
            Py_BEGIN_ALLOW_THREADS                                                             \
            work;                                                                              \
            Py_END_ALLOW_THREADS                                                               \
            (t)->busy = 0;                                                                     \
        } else {                                                                               \
            work;                                                                              \
        }                                                                                      \
    } while (0)

static int enter(KeyTable *t)
{
    if (t->busy) {
        PyErr_SetString(PyExc_RuntimeError, "KeyTable used by two threads at once");
        return -1;
    }
    return 0;
}

static int keys_of(Py_buffer *view, Py_ssize_t *count)
{
    if (view->len % KEY_BYTES) {
        PyErr_Format(PyExc_ValueError, "packed keys must be a multiple of %d bytes, got %zd",
                     KEY_BYTES, view->len);
        return -1;
    }
    *count = view->len / KEY_BYTES;
    return 0;
}

static PyObject *KeyTable_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist))
        return NULL;
    KeyTable *t = (KeyTable *)type->tp_alloc(type, 0);
    if (!t)
        return NULL;
    /* The secret: from the operating system, as os.urandom draws it. */
    PyObject *os = PyImport_ImportModule("os");
    PyObject *raw = os ? PyObject_CallMethod(os, "urandom", "i", 16) : NULL;
    Py_XDECREF(os);
    if (!raw) {
        Py_DECREF(t);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(raw);
    t->s0 = load64(s);
    t->s1 = load64(s + 8);
    Py_DECREF(raw);
    t->bits = MIN_BITS;
    t->table = calloc((size_t)1 << MIN_BITS, sizeof(uint32_t));
    if (!t->table) {
        Py_DECREF(t);
        return PyErr_NoMemory();
    }
    return (PyObject *)t;
}

static void KeyTable_dealloc(KeyTable *t)
{
    free(t->keys);
    free(t->table);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static Py_ssize_t KeyTable_len(KeyTable *t)
{
    return t->n;
}

/* -1 when absent or not a 16-byte key; -2 on error. */
static Py_ssize_t position_of(KeyTable *t, PyObject *key)
{
    if (enter(t) < 0)
        return -2;
    if (!PyBytes_Check(key)) {
        PyErr_SetString(PyExc_TypeError, "a key is bytes");
        return -2;
    }
    if (PyBytes_GET_SIZE(key) != KEY_BYTES || t->n == 0)
        return -1;
    const unsigned char *k = (const unsigned char *)PyBytes_AS_STRING(key);
    uint64_t k0 = load64(k), k1 = load64(k + 8);
    return find(t, k0, k1, key_hash(t, k0, k1), NULL);
}

static int KeyTable_contains(KeyTable *t, PyObject *key)
{
    Py_ssize_t p = position_of(t, key);
    return p == -2 ? -1 : p >= 0;
}

static PyObject *KeyTable_get(KeyTable *t, PyObject *key)
{
    Py_ssize_t p = position_of(t, key);
    if (p == -2)
        return NULL;
    if (p < 0)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(p);
}

static int check_value(KeyTable *t, Py_ssize_t value)
{
    if (value != t->n) {
        PyErr_Format(PyExc_ValueError,
                     "a KeyTable's values are positions: the next key gets %zd, not %zd", t->n,
                     value);
        return -1;
    }
    return 0;
}

/* add(key, value): add a key that is not held; value must be len(self). */
static PyObject *KeyTable_add(KeyTable *t, PyObject *args)
{
    Py_buffer key;
    Py_ssize_t value;
    if (!PyArg_ParseTuple(args, "y*n", &key, &value))
        return NULL;
    PyObject *result = NULL;
    if (enter(t) < 0 || check_value(t, value) < 0)
        goto done;
    if (key.len != KEY_BYTES) {
        PyErr_Format(PyExc_ValueError, "a key is %d bytes, got %zd", KEY_BYTES, key.len);
        goto done;
    }
    if (reserve(t, 1) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (!append_keys(t, key.buf, 1, 1)) {
        PyErr_SetString(PyExc_KeyError, "the key is held already");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&key);
    return result;
}

/* Shared by add_all_new and bulk_add. */
static PyObject *add_packed(KeyTable *t, PyObject *args, int all_or_nothing)
{
    Py_buffer view;
    Py_ssize_t first, count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &first))
        return NULL;
    PyObject *result = NULL;
    if (enter(t) < 0 || keys_of(&view, &count) < 0 || check_value(t, first) < 0)
        goto done;
    if (first + count > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a key index holds at most 2**32 - 1 keys");
        goto done;
    }
    int ok = 0, failed = 0;
    WITH_TABLE(t, count, {
        failed = reserve(t, count) < 0;
        ok = failed ? 0 : append_keys(t, view.buf, count, all_or_nothing);
    });
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyBool_FromLong(ok);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *KeyTable_add_all_new(KeyTable *t, PyObject *args)
{
    return add_packed(t, args, 1);
}

static PyObject *KeyTable_bulk_add(KeyTable *t, PyObject *args)
{
    PyObject *ok = add_packed(t, args, 0);
    if (!ok)
        return NULL;
    Py_DECREF(ok);
    Py_RETURN_NONE;
}

static void look_up(const KeyTable *t, const unsigned char *packed, Py_ssize_t count,
                    int64_t *found)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        const unsigned char *k = packed + (size_t)i * KEY_BYTES;
        uint64_t k0 = load64(k), k1 = load64(k + 8);
        found[i] = t->n ? find(t, k0, k1, key_hash(t, k0, k1), NULL) : -1;
    }
}

/* lookup(packed) -> bytes of int64 (native order): each key's value, -1 where absent. */
static PyObject *KeyTable_lookup(KeyTable *t, PyObject *arg)
{
    Py_buffer view;
    Py_ssize_t count;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = NULL;
    if (enter(t) < 0 || keys_of(&view, &count) < 0)
        goto done;
    out = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (!out)
        goto done;
    int64_t *found = (int64_t *)PyBytes_AS_STRING(out);
    WITH_TABLE(t, count, look_up(t, view.buf, count, found));
done:
    PyBuffer_Release(&view);
    return out;
}

static PyObject *KeyTable_truncate(KeyTable *t, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (enter(t) < 0)
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "cannot truncate to a negative length");
        return NULL;
    }
    truncate_to(t, n);
    Py_RETURN_NONE;
}

/* discard_many(packed): remove the held keys among these; they must be the newest keys. */
static PyObject *KeyTable_discard_many(KeyTable *t, PyObject *arg)
{
    Py_buffer view;
    Py_ssize_t count;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    if (enter(t) < 0 || keys_of(&view, &count) < 0)
        goto done;
    Py_ssize_t lowest = t->n, held = 0;
    unsigned char *seen = calloc((size_t)t->n + 1, 1);
    if (!seen) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *packed = view.buf;
    for (Py_ssize_t i = 0; i < count && t->n; i++) {
        const unsigned char *k = packed + (size_t)i * KEY_BYTES;
        uint64_t k0 = load64(k), k1 = load64(k + 8);
        Py_ssize_t p = find(t, k0, k1, key_hash(t, k0, k1), NULL);
        if (p >= 0 && !seen[p]) {
            seen[p] = 1;
            held++;
            if (p < lowest)
                lowest = p;
        }
    }
    free(seen);
    if (lowest != t->n - held) {
        PyErr_SetString(PyExc_ValueError,
                        "a KeyTable removes only its newest keys (a failed transaction's)");
        goto done;
    }
    truncate_to(t, lowest);
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *KeyTable_clear(KeyTable *t, PyObject *Py_UNUSED(ignored))
{
    if (enter(t) < 0)
        return NULL;
    uint32_t *table = calloc((size_t)1 << MIN_BITS, sizeof(uint32_t));
    if (!table)
        return PyErr_NoMemory();
    free(t->keys);
    free(t->table);
    t->keys = NULL;
    t->cap = 0;
    t->n = 0;
    t->table = table;
    t->bits = MIN_BITS;
    Py_RETURN_NONE;
}

static PyObject *KeyTable_nbytes(KeyTable *t, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t((size_t)t->n * KEY_BYTES + ((size_t)sizeof(uint32_t) << t->bits));
}

static PyMethodDef KeyTable_methods[] = {
    {"get", (PyCFunction)KeyTable_get, METH_O, "The key's value (its position), or None."},
    {"add", (PyCFunction)KeyTable_add, METH_VARARGS, "add(key, value): value == len(self)."},
    {"add_all_new", (PyCFunction)KeyTable_add_all_new, METH_VARARGS,
     "add_all_new(packed, first_value) -> bool: add every key, or none if one is held or "
     "repeats among them."},
    {"bulk_add", (PyCFunction)KeyTable_bulk_add, METH_VARARGS,
     "bulk_add(packed, first_value): add keys known not to be held."},
    {"lookup", (PyCFunction)KeyTable_lookup, METH_O,
     "lookup(packed) -> bytes: int64 values, -1 where absent."},
    {"truncate", (PyCFunction)KeyTable_truncate, METH_O, "Forget keys from position n on."},
    {"discard_many", (PyCFunction)KeyTable_discard_many, METH_O,
     "Remove these keys where held (they must be the newest)."},
    {"clear", (PyCFunction)KeyTable_clear, METH_NOARGS, "Forget every key."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef KeyTable_getset[] = {
    {"nbytes", (getter)KeyTable_nbytes, NULL, "Bytes of keys and table.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods KeyTable_sequence = {
    .sq_length = (lenfunc)KeyTable_len,
    .sq_contains = (objobjproc)KeyTable_contains,
};

static PyTypeObject KeyTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "aggregator._native_writer.KeyTable",
    .tp_basicsize = sizeof(KeyTable),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "16-byte keys to their positions in insertion order (see the module source).",
    .tp_new = KeyTable_new,
    .tp_dealloc = (destructor)KeyTable_dealloc,
    .tp_methods = KeyTable_methods,
    .tp_getset = KeyTable_getset,
    .tp_as_sequence = &KeyTable_sequence,
};

/* join_fixed(items, width) -> bytes | None: the bytes objects of `items` back to back, or
 * None when one of them is not `width` bytes long. */
static PyObject *join_fixed(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *items;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &items, &width))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyBytes_CheckExact(item) || PyBytes_GET_SIZE(item) != width)
            Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * width);
    if (!out)
        return NULL;
    char *at = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++, at += width)
        memcpy(at, PyBytes_AS_STRING(PyList_GET_ITEM(items, i)), (size_t)width);
    return out;
}

/* split_fixed(column, width) -> list[bytes]: a packed column cut into its values. */
static PyObject *split_fixed(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "y*n", &view, &width))
        return NULL;
    PyObject *out = NULL;
    if (width <= 0 || view.len % width) {
        PyErr_Format(PyExc_ValueError, "%zd bytes are not values of %zd bytes", view.len, width);
        goto done;
    }
    Py_ssize_t n = view.len / width;
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *item = PyBytes_FromStringAndSize((const char *)view.buf + i * width, width);
        if (!item)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, item);
    }
done:
    PyBuffer_Release(&view);
    return out;
}

/* Bit-plane sums: `(word >> b) & 0x0101..01` leaves bit b of each of a word's 8 bytes in its
 * own byte lane; up to 255 such words add without carrying between lanes. */
static void sums(const unsigned char *rows, Py_ssize_t n_rows, Py_ssize_t row_bytes,
                 int64_t *total, uint64_t *acc)
{
    const uint64_t ones = 0x0101010101010101ULL;
    Py_ssize_t words = (row_bytes + 7) / 8, full = row_bytes / 8;
    for (Py_ssize_t start = 0; start < n_rows; start += 255) {
        Py_ssize_t stop = n_rows - start < 255 ? n_rows : start + 255;
        memset(acc, 0, (size_t)words * 8 * sizeof(uint64_t));
        for (Py_ssize_t r = start; r < stop; r++) {
            const unsigned char *row = rows + (size_t)r * (size_t)row_bytes;
            for (Py_ssize_t w = 0; w < words; w++) {
                uint64_t word = 0;
                if (w < full)
                    word = load64(row + 8 * w);
                else
                    memcpy(&word, row + 8 * w, (size_t)(row_bytes - 8 * w));
                uint64_t *a = acc + 8 * w;
                for (int b = 0; b < 8; b++)
                    a[b] += (word >> b) & ones;
            }
        }
        for (Py_ssize_t w = 0; w < words; w++)
            for (int b = 0; b < 8; b++)
                for (int lane = 0; lane < 8; lane++) {
                    Py_ssize_t byte = 8 * w + lane;
                    if (byte < row_bytes)
                        total[8 * byte + 7 - b] += (int64_t)((acc[8 * w + b] >> (8 * lane)) & 0xFF);
                }
    }
}

/* column_sums(packed, n_rows, row_bytes) -> bytes: int64 (native order) per bit of a row,
 * MSB first, row_bytes * 8 of them: how many rows have it set. */
static PyObject *column_sums(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t n_rows, row_bytes;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &n_rows, &row_bytes))
        return NULL;
    PyObject *out = NULL;
    if (n_rows < 0 || row_bytes < 0 || view.len != n_rows * row_bytes) {
        PyErr_Format(PyExc_ValueError, "%zd bytes are not %zd rows of %zd bytes", view.len,
                     n_rows, row_bytes);
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, row_bytes * 8 * (Py_ssize_t)sizeof(int64_t));
    uint64_t *acc = malloc((size_t)((row_bytes + 7) / 8) * 8 * sizeof(uint64_t) + 8);
    if (!out || !acc) {
        free(acc);
        Py_CLEAR(out);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    int64_t *total = (int64_t *)PyBytes_AS_STRING(out);
    memset(total, 0, (size_t)row_bytes * 8 * sizeof(int64_t));
    if (n_rows * row_bytes >= RELEASE_SUMS_FROM) {
        Py_BEGIN_ALLOW_THREADS
        sums(view.buf, n_rows, row_bytes, total, acc);
        Py_END_ALLOW_THREADS
    } else {
        sums(view.buf, n_rows, row_bytes, total, acc);
    }
    free(acc);
done:
    PyBuffer_Release(&view);
    return out;
}

/* ---- the uniform batch decoder (the compiled twin of aggregator/batch_codec.py) ---- */

/* The canonical varint at `pos` (at most 5 bytes, below `len`): 0, or -1 (see _varint). */
static int varint(const unsigned char *d, Py_ssize_t len, Py_ssize_t pos, uint64_t *value,
                  Py_ssize_t *next)
{
    uint64_t v = 0;
    for (Py_ssize_t i = pos; i < pos + 5 && i < len; i++) {
        unsigned b = d[i];
        v |= (uint64_t)(b & 0x7F) << (7 * (i - pos));
        if (b < 0x80) {
            if (b == 0 && i > pos)
                return -1;
            *value = v;
            *next = i + 1;
            return 0;
        }
    }
    return -1;
}

/* A non-empty length-delimited field with tag `tag` at `pos` (see _bytes_field). */
static int bytes_field(const unsigned char *d, Py_ssize_t len, Py_ssize_t pos, unsigned tag,
                       Py_ssize_t *start, Py_ssize_t *stop)
{
    uint64_t length;
    if (pos >= len || d[pos] != tag || varint(d, len, pos + 1, &length, start) < 0 || length == 0)
        return -1;
    if (length > (uint64_t)len)
        return -1; /* past the data: the record's end check would refuse it */
    *stop = *start + (Py_ssize_t)length;
    return 0;
}

/* decode_one_query(data) -> (query_id, round, pseudonyms, report_ids, answers, n) | None: the
 * columns of a serialized SubmitBatchRequest whose records all have the first one's layout,
 * query id and round (`batch_codec.decode_uniform`'s usual case), each column packed. None
 * for anything else, which the Python decoder then handles. */
static PyObject *decode_one_query(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = view.buf;
    Py_ssize_t len = view.len, pos, q_start, p_start, p_stop, r_start, r_stop, a_start, a_stop;
    uint64_t body, q_len;
    PyObject *result = NULL;
    if (len < 2 || d[0] != 0x0A || varint(d, len, 1, &body, &pos) < 0)
        goto none;
    if (body > (uint64_t)len)
        goto none;
    Py_ssize_t end = pos + (Py_ssize_t)body;
    if (end > len || pos >= end || d[pos] != 0x0A || varint(d, len, pos + 1, &q_len, &q_start) < 0)
        goto none;
    if (q_len > (uint64_t)len)
        goto none;
    Py_ssize_t q_stop = q_start + (Py_ssize_t)q_len, round_at = q_stop + 1;
    if (round_at >= end || d[q_stop] != 0x10 || d[round_at] >= 0x80)
        goto none;
    if (bytes_field(d, len, round_at + 1, 0x1A, &p_start, &p_stop) < 0 ||
        bytes_field(d, len, p_stop, 0x22, &r_start, &r_stop) < 0 ||
        bytes_field(d, len, r_stop, 0x2A, &a_start, &a_stop) < 0 || a_stop != end)
        goto none;
    Py_ssize_t record = end, n = len / record;
    if (len % record)
        goto none;
    for (Py_ssize_t i = 1; i < n; i++) {
        const unsigned char *r = d + i * record;
        if (memcmp(r, d, (size_t)p_start) || memcmp(r + p_stop, d + p_stop, (size_t)(r_start - p_stop)) ||
            memcmp(r + r_stop, d + r_stop, (size_t)(a_start - r_stop)))
            goto none;
    }
    for (Py_ssize_t i = q_start; i < q_stop; i++)
        if (d[i] >= 0x80)
            goto none; /* protobuf checks a non-ASCII query id */
    Py_ssize_t widths[3] = {p_stop - p_start, r_stop - r_start, a_stop - a_start};
    Py_ssize_t starts[3] = {p_start, r_start, a_start};
    PyObject *columns[3] = {NULL, NULL, NULL};
    for (int c = 0; c < 3; c++) {
        columns[c] = PyBytes_FromStringAndSize(NULL, n * widths[c]);
        if (!columns[c])
            goto fail;
        char *out = PyBytes_AS_STRING(columns[c]);
        for (Py_ssize_t i = 0; i < n; i++)
            memcpy(out + i * widths[c], d + i * record + starts[c], (size_t)widths[c]);
    }
    PyObject *query_id = PyUnicode_DecodeASCII((const char *)d + q_start, q_stop - q_start, NULL);
    if (!query_id)
        goto fail;
    result = Py_BuildValue("(NiNNNn)", query_id, (int)d[round_at], columns[0], columns[1],
                           columns[2], n);
    PyBuffer_Release(&view);
    return result;
fail:
    for (int c = 0; c < 3; c++)
        Py_XDECREF(columns[c]);
    PyBuffer_Release(&view);
    return NULL;
none:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"join_fixed", join_fixed, METH_VARARGS,
     "join_fixed(items, width) -> bytes | None: a list of bytes of one width, joined."},
    {"decode_one_query", decode_one_query, METH_O,
     "decode_one_query(data) -> (query_id, round, pseudonyms, report_ids, answers, n) | None."},
    {"split_fixed", split_fixed, METH_VARARGS,
     "split_fixed(column, width) -> list[bytes]: a packed column cut into its values."},
    {"column_sums", column_sums, METH_VARARGS,
     "column_sums(packed, n_rows, row_bytes) -> bytes: int64 count per bit, MSB first."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "aggregator._native_writer",
    "The trusted writer's hot loop in compiled code (see the source's header).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native_writer(void)
{
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "aggregator._native_writer needs a little-endian CPU");
        return NULL;
    }
    if (PyType_Ready(&KeyTableType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "KeyTable", (PyObject *)&KeyTableType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
