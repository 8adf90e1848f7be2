/* ldpcollect.vdaf._native: compiled field kernels, TurboSHAKE128 and Prio3 for the range
 * check circuits (docs/vdaf.md, "Compiled kernels"). ldpcollect/vdaf/native.py wraps it; the
 * pure-Python modules beside it are the reference it is tested against. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "field.h"
#define FIELD f64
#include "kernels.h"
#undef FIELD
#define FIELD f128
#include "kernels.h"
#undef FIELD
#include "prio3.h"
#include "turboshake.h"

static const u128 f64_modulus = F64_P;
static const u128 f128_modulus = F128_P;

#define FIELD f64
#define SIZE 8
#include "module_kernels.h"
#undef FIELD
#undef SIZE
#define FIELD f128
#define SIZE 16
#include "module_kernels.h"
#undef FIELD
#undef SIZE

static int check_field(int field) {
    if (field == 0 || field == 1) return 0;
    PyErr_Format(PyExc_ValueError, "field must be 0 (Field64) or 1 (Field128), got %d", field);
    return -1;
}

static int check_power_of_two(Py_ssize_t n, int max_log2) {
    if (n >= 1 && !(n & (n - 1)) && n <= ((Py_ssize_t)1 << max_log2)) return 0;
    PyErr_Format(PyExc_ValueError, "%zd is not a power of two in range", n);
    return -1;
}

#define BINARY(name, op)                                                                     \
    static PyObject *py_##name(PyObject *self, PyObject *args) {                             \
        int field;                                                                           \
        Py_buffer a, b;                                                                      \
        if (!PyArg_ParseTuple(args, "iy*y*", &field, &a, &b)) return NULL;                   \
        PyObject *r = check_field(field) ? NULL                                              \
                      : field ? f128_binary(op, &a, &b)                                      \
                              : f64_binary(op, &a, &b);                                      \
        PyBuffer_Release(&a);                                                                \
        PyBuffer_Release(&b);                                                                \
        return r;                                                                            \
    }
BINARY(vec_add, 0)
BINARY(vec_sub, 1)
BINARY(vec_mul, 2)
BINARY(inner_product, 3)

static PyObject *transform(PyObject *args, int op) {
    int field, coset = 0;
    Py_buffer a;
    Py_ssize_t n;
    if (op == 0) {
        if (!PyArg_ParseTuple(args, "iy*np", &field, &a, &n, &coset)) return NULL;
    } else if (op == 3) {
        if (!PyArg_ParseTuple(args, "iy*", &field, &a)) return NULL;
        n = a.len / (field ? 16 : 8);
    } else if (!PyArg_ParseTuple(args, "iy*n", &field, &a, &n)) {
        return NULL;
    }
    PyObject *r = NULL;
    if (!check_field(field) && !check_power_of_two(n, field ? 40 : 32)) {
        int which = op == 0 ? coset : op;
        r = field ? f128_transform_op(which, &a, (size_t)n) : f64_transform_op(which, &a, (size_t)n);
    }
    PyBuffer_Release(&a);
    return r;
}

static PyObject *py_ntt(PyObject *self, PyObject *args) { return transform(args, 0); }
static PyObject *py_inv_ntt(PyObject *self, PyObject *args) { return transform(args, 2); }
static PyObject *py_double_evaluations(PyObject *self, PyObject *args) { return transform(args, 3); }
static PyObject *py_extend_values(PyObject *self, PyObject *args) { return transform(args, 4); }

static PyObject *eval(PyObject *args, int op) {
    int field;
    Py_buffer a, x;
    if (!PyArg_ParseTuple(args, "iy*y*", &field, &a, &x)) return NULL;
    PyObject *r = NULL;
    if (!check_field(field)) {
        Py_ssize_t n = a.len / (field ? 16 : 8);
        if (op == 0 || !check_power_of_two(n, field ? 40 : 32))
            r = field ? f128_eval_op(op, &a, &x) : f64_eval_op(op, &a, &x);
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&x);
    return r;
}

static PyObject *py_poly_eval(PyObject *self, PyObject *args) { return eval(args, 0); }
static PyObject *py_lagrange_eval(PyObject *self, PyObject *args) { return eval(args, 1); }

/* in_range(field, data): whether `data` is whole elements, each below the modulus */
static PyObject *py_in_range(PyObject *self, PyObject *args) {
    int field;
    Py_buffer a;
    if (!PyArg_ParseTuple(args, "iy*", &field, &a)) return NULL;
    PyObject *r = NULL;
    if (!check_field(field)) {
        unsigned size = field ? 16 : 8;
        u128 modulus = field ? f128_modulus : f64_modulus;
        int ok = a.len % size == 0;
        for (Py_ssize_t i = 0; ok && i < a.len; i += size)
            ok = load_le((const uint8_t *)a.buf + i, size) < modulus;
        r = PyBool_FromLong(ok);
    }
    PyBuffer_Release(&a);
    return r;
}

/* The draft's XOF stream: len(dst) || dst || len(seed) || seed || binder, domain byte 1. */
static int xof_begin(ts_state *s, Py_buffer *seed, Py_buffer *dst, Py_buffer *binder) {
    if (seed->len > 255 || dst->len > 65535) {
        PyErr_SetString(PyExc_ValueError, "a seed is at most 255 bytes, a dst at most 65535");
        return -1;
    }
    uint8_t dst_len[2] = {(uint8_t)dst->len, (uint8_t)(dst->len >> 8)}, seed_len = (uint8_t)seed->len;
    ts_init(s);
    ts_absorb(s, dst_len, 2);
    ts_absorb(s, dst->buf, (size_t)dst->len);
    ts_absorb(s, &seed_len, 1);
    ts_absorb(s, seed->buf, (size_t)seed->len);
    ts_absorb(s, binder->buf, (size_t)binder->len);
    ts_finish(s, 1);
    return 0;
}

static PyObject *py_xof_expand(PyObject *self, PyObject *args) {
    int field;
    Py_buffer seed, dst, binder;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "iy*y*y*n", &field, &seed, &dst, &binder, &length)) return NULL;
    PyObject *r = NULL;
    ts_state s;
    if (length < 0) {
        PyErr_SetString(PyExc_ValueError, "length must be at least 0");
    } else if (!check_field(field) && !xof_begin(&s, &seed, &dst, &binder)) {
        r = field ? f128_xof_vec(&s, (size_t)length) : f64_xof_vec(&s, (size_t)length);
    }
    PyBuffer_Release(&seed);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&binder);
    return r;
}

static PyObject *py_xof_bytes(PyObject *self, PyObject *args) {
    Py_buffer seed, dst, binder;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "y*y*y*n", &seed, &dst, &binder, &length)) return NULL;
    PyObject *r = NULL;
    ts_state s;
    if (length < 0) {
        PyErr_SetString(PyExc_ValueError, "length must be at least 0");
    } else if (!xof_begin(&s, &seed, &dst, &binder)) {
        r = PyBytes_FromStringAndSize(NULL, length);
        if (r) ts_squeeze(&s, (uint8_t *)PyBytes_AS_STRING(r), (size_t)length);
    }
    PyBuffer_Release(&seed);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&binder);
    return r;
}

static PyObject *py_turboshake128(PyObject *self, PyObject *args) {
    Py_buffer message;
    int domain;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "y*in", &message, &domain, &length)) return NULL;
    PyObject *r = NULL;
    if (domain < 1 || domain > 0x7f || length < 0) {
        PyErr_SetString(PyExc_ValueError, "domain must be in [1, 0x7f] and length at least 0");
    } else if ((r = PyBytes_FromStringAndSize(NULL, length))) {
        ts_state s;
        ts_init(&s);
        ts_absorb(&s, message.buf, (size_t)message.len);
        ts_finish(&s, (uint8_t)domain);
        ts_squeeze(&s, (uint8_t *)PyBytes_AS_STRING(r), (size_t)length);
    }
    PyBuffer_Release(&message);
    return r;
}

/* -- Prio3 ------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD circuit c;
    int ready;
} Prio3Object;

static int prio3_init(Prio3Object *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"kind", "vdaf_id", "shares", "length", "max_value", "chunk_length", NULL};
    int kind;
    unsigned long vdaf_id;
    unsigned shares;
    Py_ssize_t length, chunk;
    unsigned long long max_value;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ikInKn", names, &kind, &vdaf_id, &shares,
                                     &length, &max_value, &chunk))
        return -1;
    if (self->ready) circuit_free(&self->c);
    self->ready = 0;
    if (length < 1 || chunk < 1 || vdaf_id > 0xFFFFFFFFUL) {
        PyErr_SetString(PyExc_ValueError, "length and chunk_length must be positive, vdaf_id 32 bits");
        return -1;
    }
    const char *error =
        circuit_init(&self->c, kind, (uint32_t)vdaf_id, shares, (size_t)length, max_value, (size_t)chunk);
    if (error) {
        PyErr_SetString(PyExc_ValueError, error);
        return -1;
    }
    self->ready = 1;
    return 0;
}

static void prio3_dealloc(Prio3Object *self) {
    if (self->ready) circuit_free(&self->c);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_ready(Prio3Object *self) {
    if (self->ready) return 0;
    PyErr_SetString(PyExc_RuntimeError, "Prio3 not initialised");
    return -1;
}

static int check_len(const char *what, Py_ssize_t len, Py_ssize_t expected) {
    if (len == expected) return 0;
    PyErr_Format(PyExc_ValueError, "%s must be %zd bytes, got %zd", what, expected, len);
    return -1;
}

/* shard(ctx, measurement, nonce, rand) -> (public share, [input shares]); the encoded
 * measurement is either one 0/1 byte per element or Field128 elements (16 bytes each). */
static PyObject *prio3_shard_py(Prio3Object *self, PyObject *args) {
    Py_buffer ctx, meas, nonce, rand;
    if (check_ready(self) || !PyArg_ParseTuple(args, "y*y*y*y*", &ctx, &meas, &nonce, &rand))
        return NULL;
    const circuit *c = &self->c;
    PyObject *result = NULL, *pub = NULL, *leader = NULL, *helpers = NULL;
    size_t helper_count = c->shares - 1, m = c->meas_len;
    f128 *values = NULL; /* Montgomery form, then canonical */
    if (check_len("the nonce", nonce.len, NONCE) ||
        check_len("the sharding randomness", rand.len, (Py_ssize_t)(2 * c->shares * SEED)))
        goto done;
    if (!(values = PyMem_Malloc(2 * m * sizeof(f128)))) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *src = meas.buf;
    if ((size_t)meas.len == m) {
        for (size_t i = 0; i < m; i++) {
            if (src[i] > 1) {
                PyErr_SetString(PyExc_ValueError, "a one-byte encoded measurement is 0/1 bytes");
                goto done;
            }
            values[i] = src[i] ? f128_one() : f128_zero();
            values[m + i] = src[i];
        }
    } else if ((size_t)meas.len == 16 * m) {
        for (size_t i = 0; i < m; i++) {
            u128 x = load_le(src + 16 * i, 16);
            if (x >= F128_P) {
                PyErr_SetString(PyExc_ValueError, "a measurement element is not below the modulus");
                goto done;
            }
            values[i] = f128_in(x);
            values[m + i] = x;
        }
    } else {
        PyErr_Format(PyExc_ValueError, "the encoded measurement must be %zu or %zu bytes, got %zd",
                     m, 16 * m, meas.len);
        goto done;
    }
    pub = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(c->shares * SEED));
    leader = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)leader_share_size(c));
    uint8_t *helper_buf = PyMem_Malloc(helper_count * 2 * SEED);
    if (!pub || !leader || !helper_buf) {
        PyMem_Free(helper_buf);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS status = prio3_shard(
        c, ctx.buf, (size_t)ctx.len, values, values + m, nonce.buf, rand.buf,
        (uint8_t *)PyBytes_AS_STRING(pub), (uint8_t *)PyBytes_AS_STRING(leader), helper_buf);
    Py_END_ALLOW_THREADS if (status != OK) {
        PyMem_Free(helper_buf);
        PyErr_NoMemory();
        goto done;
    }
    helpers = PyList_New((Py_ssize_t)(helper_count + 1));
    if (helpers) {
        Py_INCREF(leader);
        PyList_SET_ITEM(helpers, 0, leader);
        for (size_t j = 0; j < helper_count; j++) {
            PyObject *share = PyBytes_FromStringAndSize((char *)helper_buf + 2 * j * SEED, 2 * SEED);
            if (!share) {
                Py_CLEAR(helpers);
                break;
            }
            PyList_SET_ITEM(helpers, (Py_ssize_t)(j + 1), share);
        }
    }
    PyMem_Free(helper_buf);
    if (helpers) result = PyTuple_Pack(2, pub, helpers);
done:
    PyMem_Free(values);
    Py_XDECREF(pub);
    Py_XDECREF(leader);
    Py_XDECREF(helpers);
    PyBuffer_Release(&ctx);
    PyBuffer_Release(&meas);
    PyBuffer_Release(&nonce);
    PyBuffer_Release(&rand);
    return result;
}

/* A sequence of bytes objects as pointers and lengths (borrowed from `seq`, which the caller
 * keeps alive). */
static int bytes_list(PyObject *seq, const char *what, Py_ssize_t n, const uint8_t **ptrs,
                      size_t *lens) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s[%zd] must be bytes", what, i);
            return -1;
        }
        ptrs[i] = (const uint8_t *)PyBytes_AS_STRING(item);
        lens[i] = (size_t)PyBytes_GET_SIZE(item);
    }
    return 0;
}

/* prep_init_batch(verify_key, ctx, agg_id, nonces, public_shares, input_shares) -> per report
 * (verifier share, joint rand seed, output share) or (error kind, message). The work runs
 * without the interpreter lock. */
static PyObject *prio3_prep_init_batch(Prio3Object *self, PyObject *args) {
    Py_buffer key, ctx;
    unsigned agg_id;
    PyObject *nonces_in, *publics_in, *inputs_in;
    if (check_ready(self) ||
        !PyArg_ParseTuple(args, "y*y*IOOO", &key, &ctx, &agg_id, &nonces_in, &publics_in, &inputs_in))
        return NULL;
    const circuit *c = &self->c;
    PyObject *result = NULL, *nonces = NULL, *publics = NULL, *inputs = NULL;
    const uint8_t **ptrs = NULL;
    size_t *lens = NULL;
    uint8_t *arena = NULL;
    int *status = NULL;
    const char **messages = NULL;
    if (check_len("the verify key", key.len, SEED)) goto done;
    nonces = PySequence_Fast(nonces_in, "nonces must be a sequence");
    publics = PySequence_Fast(publics_in, "public shares must be a sequence");
    inputs = PySequence_Fast(inputs_in, "input shares must be a sequence");
    if (!nonces || !publics || !inputs) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(nonces);
    if (PySequence_Fast_GET_SIZE(publics) != n || PySequence_Fast_GET_SIZE(inputs) != n) {
        PyErr_SetString(PyExc_ValueError, "as many nonces, public shares and input shares");
        goto done;
    }
    size_t count = (size_t)n, vs = verifier_share_size(c), os = c->output_len * 16;
    size_t per = vs + SEED + os;
    ptrs = PyMem_Malloc((3 * count + 1) * sizeof *ptrs);
    lens = PyMem_Malloc((3 * count + 1) * sizeof *lens);
    arena = PyMem_Malloc(count * per + 1);
    status = PyMem_Malloc((count + 1) * sizeof *status);
    messages = PyMem_Malloc((count + 1) * sizeof *messages);
    if (!ptrs || !lens || !arena || !status || !messages) {
        PyErr_NoMemory();
        goto done;
    }
    if (bytes_list(nonces, "nonces", n, ptrs, lens) ||
        bytes_list(publics, "public_shares", n, ptrs + count, lens + count) ||
        bytes_list(inputs, "input_shares", n, ptrs + 2 * count, lens + 2 * count))
        goto done;
    Py_BEGIN_ALLOW_THREADS for (size_t i = 0; i < count; i++) {
        uint8_t *out = arena + i * per;
        messages[i] = NULL;
        if (lens[i] != NONCE) {
            status[i] = ERR_DECODE;
            messages[i] = "the nonce has the wrong length";
            continue;
        }
        status[i] = prio3_prep_init(c, key.buf, ctx.buf, (size_t)ctx.len, agg_id, ptrs[i],
                                    ptrs[count + i], lens[count + i], ptrs[2 * count + i],
                                    lens[2 * count + i], out, out + vs, out + vs + SEED, &messages[i]);
    }
    Py_END_ALLOW_THREADS;
    result = PyList_New(n);
    if (!result) goto done;
    for (size_t i = 0; i < count; i++) {
        uint8_t *out = arena + i * per;
        PyObject *item;
        if (status[i] == ERR_MEMORY) {
            Py_CLEAR(result);
            PyErr_NoMemory();
            goto done;
        } else if (status[i] != OK) {
            item = Py_BuildValue("(is)", status[i], messages[i]);
        } else {
            item = Py_BuildValue("(y#y#y#)", out, (Py_ssize_t)vs, out + vs, (Py_ssize_t)SEED,
                                 out + vs + SEED, (Py_ssize_t)os);
        }
        if (!item) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, (Py_ssize_t)i, item);
    }
done:
    Py_XDECREF(nonces);
    Py_XDECREF(publics);
    Py_XDECREF(inputs);
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    PyMem_Free(arena);
    PyMem_Free(status);
    PyMem_Free(messages);
    PyBuffer_Release(&key);
    PyBuffer_Release(&ctx);
    return result;
}

/* shares_to_message_batch(ctx, [per report: a sequence of every aggregator's verifier share])
 * -> per report the verifier message, or (error kind, message). */
static PyObject *prio3_shares_to_message_batch(Prio3Object *self, PyObject *args) {
    Py_buffer ctx;
    PyObject *reports_in;
    if (check_ready(self) || !PyArg_ParseTuple(args, "y*O", &ctx, &reports_in)) return NULL;
    const circuit *c = &self->c;
    PyObject *result = NULL, *reports = PySequence_Fast(reports_in, "reports must be a sequence");
    if (!reports) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(reports);
    if (!(result = PyList_New(n))) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *shares = PySequence_Fast(PySequence_Fast_GET_ITEM(reports, i),
                                           "each report's verifier shares must be a sequence");
        if (!shares) {
            Py_CLEAR(result);
            goto done;
        }
        const uint8_t *ptrs[256];
        size_t lens[256];
        PyObject *item = NULL;
        Py_ssize_t k = PySequence_Fast_GET_SIZE(shares);
        if (k != (Py_ssize_t)c->shares) {
            item = Py_BuildValue("(is)", ERR_DECODE, "need one verifier share per aggregator");
        } else if (!bytes_list(shares, "verifier shares", k, ptrs, lens)) {
            uint8_t message[SEED];
            const char *why = NULL;
            int status = prio3_shares_to_message(c, ctx.buf, (size_t)ctx.len, ptrs, lens, message, &why);
            if (status == ERR_MEMORY)
                PyErr_NoMemory();
            else
                item = status == OK ? PyBytes_FromStringAndSize((char *)message, SEED)
                                    : Py_BuildValue("(is)", status, why);
        }
        Py_DECREF(shares);
        if (!item) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, item);
    }
done:
    Py_XDECREF(reports);
    PyBuffer_Release(&ctx);
    return result;
}

/* agg_sum(out_shares) -> the encoded sum of encoded output shares */
static PyObject *prio3_agg_sum(Prio3Object *self, PyObject *args) {
    PyObject *shares_in;
    if (check_ready(self) || !PyArg_ParseTuple(args, "O", &shares_in)) return NULL;
    const circuit *c = &self->c;
    PyObject *shares = PySequence_Fast(shares_in, "output shares must be a sequence");
    if (!shares) return NULL;
    size_t len = c->output_len;
    f128 *total = PyMem_Calloc(len ? len : 1, sizeof(f128));
    PyObject *result = NULL;
    if (!total) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(shares);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(shares, i);
        if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) != (Py_ssize_t)(len * 16)) {
            PyErr_Format(PyExc_ValueError, "output share %zd must be %zu bytes", i, len * 16);
            goto done;
        }
        const uint8_t *src = (const uint8_t *)PyBytes_AS_STRING(item);
        for (size_t j = 0; j < len; j++) {
            u128 x = load_le(src + 16 * j, 16);
            if (x >= F128_P) {
                PyErr_Format(PyExc_ValueError, "output share %zd: an element is not below the modulus", i);
                goto done;
            }
            /* canonical addition: Montgomery form is not needed for sums */
            total[j] = f128_add(total[j], x);
        }
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(len * 16));
    if (result)
        for (size_t j = 0; j < len; j++) store_le((uint8_t *)PyBytes_AS_STRING(result) + 16 * j, total[j], 16);
done:
    PyMem_Free(total);
    Py_DECREF(shares);
    return result;
}

static PyObject *prio3_sizes(Prio3Object *self, PyObject *unused) {
    if (check_ready(self)) return NULL;
    const circuit *c = &self->c;
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n}", "meas_len", (Py_ssize_t)c->meas_len,
                         "proof_len", (Py_ssize_t)c->proof_len, "verifier_len",
                         (Py_ssize_t)c->verifier_len, "output_len", (Py_ssize_t)c->output_len,
                         "joint_rand_len", (Py_ssize_t)c->calls, "query_rand_len",
                         (Py_ssize_t)c->query_rand_len, "prove_rand_len", (Py_ssize_t)c->arity);
}

static PyMethodDef prio3_methods[] = {
    {"shard", (PyCFunction)prio3_shard_py, METH_VARARGS, NULL},
    {"prep_init_batch", (PyCFunction)prio3_prep_init_batch, METH_VARARGS, NULL},
    {"shares_to_message_batch", (PyCFunction)prio3_shares_to_message_batch, METH_VARARGS, NULL},
    {"agg_sum", (PyCFunction)prio3_agg_sum, METH_VARARGS, NULL},
    {"sizes", (PyCFunction)prio3_sizes, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Prio3Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ldpcollect.vdaf._native.Prio3",
    .tp_basicsize = sizeof(Prio3Object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)prio3_init,
    .tp_dealloc = (destructor)prio3_dealloc,
    .tp_methods = prio3_methods,
    .tp_doc = "Prio3 over Field128 for a range-check circuit (see prio3.h).",
};

static PyMethodDef module_methods[] = {
    {"vec_add", py_vec_add, METH_VARARGS, NULL},
    {"vec_sub", py_vec_sub, METH_VARARGS, NULL},
    {"vec_mul", py_vec_mul, METH_VARARGS, NULL},
    {"inner_product", py_inner_product, METH_VARARGS, NULL},
    {"ntt", py_ntt, METH_VARARGS, NULL},
    {"inv_ntt", py_inv_ntt, METH_VARARGS, NULL},
    {"double_evaluations", py_double_evaluations, METH_VARARGS, NULL},
    {"extend_values", py_extend_values, METH_VARARGS, NULL},
    {"poly_eval", py_poly_eval, METH_VARARGS, NULL},
    {"lagrange_eval", py_lagrange_eval, METH_VARARGS, NULL},
    {"in_range", py_in_range, METH_VARARGS, NULL},
    {"xof_expand", py_xof_expand, METH_VARARGS, NULL},
    {"xof_bytes", py_xof_bytes, METH_VARARGS, NULL},
    {"turboshake128", py_turboshake128, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ldpcollect.vdaf._native",
    "Compiled field kernels, TurboSHAKE128 and Prio3 for range-check circuits.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (ts_init_constants()) {
        PyErr_SetString(PyExc_ImportError, "TurboSHAKE128 constants differ from the specification");
        return NULL;
    }
    field_init_constants();
    if (PyType_Ready(&Prio3Type) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(&Prio3Type);
    if (PyModule_AddObject(m, "Prio3", (PyObject *)&Prio3Type) < 0) {
        Py_DECREF(&Prio3Type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
