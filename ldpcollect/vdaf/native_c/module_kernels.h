/* The Python-facing field kernels, instantiated per field by module.c (FIELD = f64 or f128,
 * SIZE = its encoded size). Vectors cross as canonical little-endian bytes. */
#define MCAT_(a, b) a##_##b
#define MCAT(a, b) MCAT_(a, b)
#define M(name) MCAT(FIELD, name)
#define T FIELD

/* Decodes `len` bytes into a fresh array (NULL with an exception set on a bad length or an
 * element not below the modulus). */
static T *M(decode)(const char *what, const uint8_t *src, Py_ssize_t len, size_t *count) {
    if (len % SIZE) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of %d-byte elements",
                     what, len, SIZE);
        return NULL;
    }
    size_t n = (size_t)len / SIZE;
    T *out = PyMem_Malloc((n ? n : 1) * sizeof(T));
    if (!out) {
        PyErr_NoMemory();
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        u128 x = load_le(src + SIZE * i, SIZE);
        if (x >= M(modulus)) {
            PyMem_Free(out);
            PyErr_Format(PyExc_ValueError, "%s: an element is not below the modulus", what);
            return NULL;
        }
        out[i] = M(in)(x);
    }
    *count = n;
    return out;
}

static PyObject *M(encode)(const T *v, size_t n) {
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * SIZE));
    if (!bytes) return NULL;
    uint8_t *dst = (uint8_t *)PyBytes_AS_STRING(bytes);
    for (size_t i = 0; i < n; i++) store_le(dst + SIZE * i, M(out)(v[i]), SIZE);
    return bytes;
}

/* op: 0 add, 1 sub, 2 mul (element-wise), 3 inner product */
static PyObject *M(binary)(int op, Py_buffer *a, Py_buffer *b) {
    size_t n, m;
    T *x = M(decode)("left", a->buf, a->len, &n);
    if (!x) return NULL;
    T *y = M(decode)("right", b->buf, b->len, &m);
    if (!y) {
        PyMem_Free(x);
        return NULL;
    }
    PyObject *result = NULL;
    if (n != m) {
        PyErr_Format(PyExc_ValueError, "vectors of lengths %zu and %zu", n, m);
    } else if (op == 3) {
        T acc = M(zero)();
        for (size_t i = 0; i < n; i++) acc = M(add)(acc, M(mul)(x[i], y[i]));
        result = M(encode)(&acc, 1);
    } else {
        for (size_t i = 0; i < n; i++)
            x[i] = op == 0 ? M(add)(x[i], y[i]) : op == 1 ? M(sub)(x[i], y[i]) : M(mul)(x[i], y[i]);
        result = M(encode)(x, n);
    }
    PyMem_Free(x);
    PyMem_Free(y);
    return result;
}

/* op: 0 ntt, 1 ntt on the coset, 2 inverse ntt, 3 double_evaluations, 4 extend_values */
static PyObject *M(transform_op)(int op, Py_buffer *a, size_t n) {
    size_t m;
    T *x = M(decode)("values", a->buf, a->len, &m);
    if (!x) return NULL;
    PyObject *result = NULL;
    size_t out_n = op == 3 ? 2 * n : n;
    T *out = PyMem_Malloc((out_n ? out_n : 1) * sizeof(T) * 2);
    if (!out) {
        PyErr_NoMemory();
    } else if (op <= 1 && m > n) {
        PyErr_Format(PyExc_ValueError, "%zu coefficients do not fit an NTT of size %zu", m, n);
    } else if ((op == 2 || op == 3) && m != n) {
        PyErr_Format(PyExc_ValueError, "%zu values for size %zu", m, n);
    } else if (op == 4 && m > n) {
        PyErr_Format(PyExc_ValueError, "%zu values do not fit %zu evaluation points", m, n);
    } else if (op <= 1) {
        memcpy(out, x, m * sizeof(T));
        for (size_t i = m; i < n; i++) out[i] = M(zero)();
        result = M(ntt)(out, n, op) ? PyErr_NoMemory() : M(encode)(out, n);
    } else if (op == 2) {
        memcpy(out, x, n * sizeof(T));
        result = M(inv_ntt)(out, n) ? PyErr_NoMemory() : M(encode)(out, n);
    } else if (op == 3) {
        result = M(double_evaluations)(out, x, n, out + 2 * n) ? PyErr_NoMemory()
                                                                 : M(encode)(out, 2 * n);
    } else if (M(extend_values)(out, x, m, n)) {
        PyErr_NoMemory();
    } else {
        result = M(encode)(out, n);
    }
    PyMem_Free(out);
    PyMem_Free(x);
    return result;
}

/* op: 0 poly_eval (monomial), 1 lagrange_eval (values at the n-th roots) */
static PyObject *M(eval_op)(int op, Py_buffer *a, Py_buffer *point) {
    size_t n, one;
    T *x = M(decode)("values", a->buf, a->len, &n);
    if (!x) return NULL;
    T *t = M(decode)("point", point->buf, point->len, &one);
    PyObject *result = NULL;
    if (t && one != 1) {
        PyErr_SetString(PyExc_ValueError, "the point is one element");
    } else if (t && op == 0) {
        T v = M(poly_eval)(x, n, t[0]);
        result = M(encode)(&v, 1);
    } else if (t) {
        T *weights = PyMem_Malloc((n ? n : 1) * sizeof(T));
        if (!weights) {
            PyErr_NoMemory();
        } else {
            T acc = M(zero)();
            if (M(lagrange_weights)(weights, n, t[0])) {
                result = PyErr_NoMemory();
            } else {
                for (size_t i = 0; i < n; i++) acc = M(add)(acc, M(mul)(weights[i], x[i]));
                result = M(encode)(&acc, 1);
            }
            PyMem_Free(weights);
        }
    }
    PyMem_Free(t);
    PyMem_Free(x);
    return result;
}

/* `length` elements by rejection sampling from an XOF stream */
static PyObject *M(xof_vec)(ts_state *s, size_t length) {
    T *out = PyMem_Malloc((length ? length : 1) * sizeof(T));
    if (!out) return PyErr_NoMemory();
    uint8_t buf[SIZE];
    for (size_t i = 0; i < length;) {
        ts_squeeze(s, buf, SIZE);
        u128 x = load_le(buf, SIZE);
        if (x < M(modulus)) out[i++] = M(in)(x);
    }
    PyObject *result = M(encode)(out, length);
    PyMem_Free(out);
    return result;
}

#undef MCAT_
#undef MCAT
#undef M
#undef T
