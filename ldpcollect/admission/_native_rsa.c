/* Token kernels on the machine's OpenSSL (libcrypto): the issuer's blind signature (RSA's
 * private operation, with OpenSSL's CRT, base blinding, constant-time exponentiation and its
 * check of the result with the public exponent) and the redeemer's RSASSA-PSS verification
 * of a whole batch in one call. Both loops run with the interpreter lock released.
 *
 * The Python code stays the reference (ldpcollect/admission/blind_rsa.py): tests compare the
 * two on random inputs (tests/admission/test_native_rsa.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

typedef struct {
    PyObject_HEAD
    EVP_PKEY *key;
    int private_key;
    Py_ssize_t size; /* modulus bytes */
} RsaKey;

static PyObject *openssl_error(const char *what)
{
    unsigned long code = ERR_get_error();
    char text[256] = "no detail";
    if (code)
        ERR_error_string_n(code, text, sizeof text);
    ERR_clear_error();
    PyErr_Format(PyExc_ValueError, "%s: %s", what, text);
    return NULL;
}

/* RsaKey(der, private): a DER private key (PKCS#8 or PKCS#1) or SubjectPublicKeyInfo. */
static PyObject *RsaKey_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"der", "private", NULL};
    Py_buffer der;
    int private_key;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*p", kwlist, &der, &private_key))
        return NULL;
    const unsigned char *p = der.buf;
    EVP_PKEY *key = private_key ? d2i_AutoPrivateKey(NULL, &p, (long)der.len)
                                : d2i_PUBKEY(NULL, &p, (long)der.len);
    PyBuffer_Release(&der);
    if (!key)
        return openssl_error("not a DER RSA key");
    if (EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA) {
        EVP_PKEY_free(key);
        PyErr_SetString(PyExc_ValueError, "not an RSA key");
        return NULL;
    }
    RsaKey *self = (RsaKey *)type->tp_alloc(type, 0);
    if (!self) {
        EVP_PKEY_free(key);
        return NULL;
    }
    self->key = key;
    self->private_key = private_key;
    self->size = EVP_PKEY_get_size(key);
    return (PyObject *)self;
}

static void RsaKey_dealloc(RsaKey *self)
{
    EVP_PKEY_free(self->key);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Copies of the items of a list of bytes, so the loops can run without the lock. */
typedef struct {
    Py_ssize_t n;
    PyObject **items; /* new references */
} Items;

static int items_of(PyObject *list, Items *out)
{
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "expected a list of bytes");
        return -1;
    }
    out->n = PyList_GET_SIZE(list);
    out->items = PyMem_Calloc((size_t)out->n + 1, sizeof(PyObject *));
    if (!out->items) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < out->n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "expected a list of bytes");
            return -1;
        }
        out->items[i] = Py_NewRef(item);
    }
    return 0;
}

static void items_free(Items *items)
{
    if (!items->items)
        return;
    for (Py_ssize_t i = 0; i < items->n; i++)
        Py_XDECREF(items->items[i]);
    PyMem_Free(items->items);
    items->items = NULL;
}

/* sign_raw(messages) -> list[bytes | None]: each message (modulus-length, big-endian, below
 * the modulus) raised to the private exponent; None where OpenSSL refuses one. */
static PyObject *RsaKey_sign_raw(RsaKey *self, PyObject *list)
{
    if (!self->private_key) {
        PyErr_SetString(PyExc_ValueError, "a public key cannot sign");
        return NULL;
    }
    Items in = {0, NULL};
    PyObject *result = NULL;
    unsigned char *out = NULL;
    char *ok = NULL;
    if (items_of(list, &in) < 0)
        goto done;
    Py_ssize_t k = self->size;
    out = PyMem_Malloc((size_t)(in.n * k + 1));
    ok = PyMem_Calloc((size_t)in.n + 1, 1);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(self->key, NULL);
    if (!out || !ok || !ctx) {
        EVP_PKEY_CTX_free(ctx);
        PyErr_NoMemory();
        goto done;
    }
    if (EVP_PKEY_decrypt_init(ctx) <= 0 || EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_NO_PADDING) <= 0) {
        EVP_PKEY_CTX_free(ctx);
        openssl_error("cannot set up RSA's private operation");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < in.n; i++) {
        size_t written = (size_t)k;
        const unsigned char *m = (const unsigned char *)PyBytes_AS_STRING(in.items[i]);
        if (PyBytes_GET_SIZE(in.items[i]) == k &&
            EVP_PKEY_decrypt(ctx, out + i * k, &written, m, (size_t)k) > 0 &&
            written == (size_t)k)
            ok[i] = 1;
    }
    ERR_clear_error();
    Py_END_ALLOW_THREADS
    EVP_PKEY_CTX_free(ctx);
    result = PyList_New(in.n);
    for (Py_ssize_t i = 0; result && i < in.n; i++) {
        PyObject *item = ok[i] ? PyBytes_FromStringAndSize((char *)out + i * k, k)
                               : Py_NewRef(Py_None);
        if (!item)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, item);
    }
done:
    PyMem_Free(out);
    PyMem_Free(ok);
    items_free(&in);
    return result;
}

/* verify_pss_sha384(messages, signatures, salt_length) -> bytes: 1 where the signature is a
 * valid RSASSA-PSS signature (SHA-384, MGF1-SHA-384, that salt length) of the message. */
static PyObject *RsaKey_verify_pss_sha384(RsaKey *self, PyObject *args)
{
    PyObject *messages, *signatures;
    int salt_length;
    if (!PyArg_ParseTuple(args, "OOi", &messages, &signatures, &salt_length))
        return NULL;
    Items msgs = {0, NULL}, sigs = {0, NULL};
    PyObject *result = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    EVP_MD *sha384 = NULL;
    if (items_of(messages, &msgs) < 0 || items_of(signatures, &sigs) < 0)
        goto done;
    if (msgs.n != sigs.n) {
        PyErr_SetString(PyExc_ValueError, "as many signatures as messages");
        goto done;
    }
    sha384 = EVP_MD_fetch(NULL, "SHA384", NULL);
    ctx = EVP_PKEY_CTX_new(self->key, NULL);
    if (!sha384 || !ctx || EVP_PKEY_verify_init(ctx) <= 0 ||
        EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PSS_PADDING) <= 0 ||
        EVP_PKEY_CTX_set_signature_md(ctx, sha384) <= 0 ||
        EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, sha384) <= 0 ||
        EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, salt_length) <= 0) {
        openssl_error("cannot set up RSA-PSS verification");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, msgs.n);
    if (!result)
        goto done;
    char *valid = PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < msgs.n; i++) {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int digest_length = 0;
        PyObject *m = msgs.items[i], *s = sigs.items[i];
        valid[i] = EVP_Digest(PyBytes_AS_STRING(m), (size_t)PyBytes_GET_SIZE(m), digest,
                              &digest_length, sha384, NULL) == 1 &&
                   EVP_PKEY_verify(ctx, (const unsigned char *)PyBytes_AS_STRING(s),
                                   (size_t)PyBytes_GET_SIZE(s), digest, digest_length) == 1;
    }
    ERR_clear_error();
    Py_END_ALLOW_THREADS
done:
    EVP_PKEY_CTX_free(ctx);
    EVP_MD_free(sha384);
    items_free(&msgs);
    items_free(&sigs);
    return result;
}

static PyMethodDef RsaKey_methods[] = {
    {"sign_raw", (PyCFunction)RsaKey_sign_raw, METH_O,
     "sign_raw(messages) -> list[bytes | None]: RSA's private operation on each."},
    {"verify_pss_sha384", (PyCFunction)RsaKey_verify_pss_sha384, METH_VARARGS,
     "verify_pss_sha384(messages, signatures, salt_length) -> bytes of 0/1."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RsaKeyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ldpcollect.admission._native_rsa.RsaKey",
    .tp_basicsize = sizeof(RsaKey),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An RSA key held by OpenSSL (see the module source).",
    .tp_new = RsaKey_new,
    .tp_dealloc = (destructor)RsaKey_dealloc,
    .tp_methods = RsaKey_methods,
};

static PyObject *openssl_version(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    return PyUnicode_FromString(OpenSSL_version(OPENSSL_VERSION));
}

static PyMethodDef module_methods[] = {
    {"openssl_version", openssl_version, METH_NOARGS, "The libcrypto this module runs on."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ldpcollect.admission._native_rsa",
    "Blind RSA signing and batched RSA-PSS verification on OpenSSL.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native_rsa(void)
{
    if (PyType_Ready(&RsaKeyType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "RsaKey", (PyObject *)&RsaKeyType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
