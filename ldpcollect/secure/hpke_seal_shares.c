/* HPKE base-mode Seal (RFC 9180, 5.1.1 and 4.1) of many input shares to one recipient in one
 * call, for a fleet of devices sealing a batch: each share's ephemeral key derived from its
 * own 32 bytes of fresh key material (DeriveKeyPair, 7.1.3), the ephemeral public keys and
 * the shared secrets computed eight at a time in lanes where the CPU has them, then each key
 * schedule and AES-128-GCM seal, with the interpreter lock released. Given the same key
 * material it gives the bytes `hpke_seal.seal_base` gives (tests/secure/test_seal_shares.py),
 * and what it seals opens with `cryptography`. */
#include "hpke_seal_shares.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>

#include "hpke_suite.h"

static const unsigned char BASE_POINT[KEY_SIZE] = {9};

/* An ephemeral key's public key and its DH with the recipient, on OpenSSL (the key object
 * computes its public key when made: one ladder each). */
static int keys_on_openssl(const unsigned char *secret, const unsigned char *recipient,
                           unsigned char enc[KEY_SIZE], unsigned char dh[KEY_SIZE])
{
    size_t enc_size = KEY_SIZE, dh_size = KEY_SIZE;
    EVP_PKEY *key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, secret, KEY_SIZE);
    EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, recipient, KEY_SIZE);
    EVP_PKEY_CTX *context = key ? EVP_PKEY_CTX_new(key, NULL) : NULL;
    int ok = context && peer && EVP_PKEY_get_raw_public_key(key, enc, &enc_size) == 1 &&
             EVP_PKEY_derive_init(context) == 1 &&
             EVP_PKEY_derive_set_peer_ex(context, peer, 0) == 1 &&
             EVP_PKEY_derive(context, dh, &dh_size) == 1 && dh_size == KEY_SIZE;
    EVP_PKEY_CTX_free(context);
    EVP_PKEY_free(peer);
    EVP_PKEY_free(key);
    return ok;
}

typedef struct {
    const unsigned char *report_id, *public_share, *plaintext;
    size_t public_size, plaintext_size;
    unsigned char *out; /* config id || enc || ciphertext || tag */
} ToSeal;

/* Every item sealed into its `out`; 0 when OpenSSL fails or the recipient's key is a
 * low-order point (every shared secret all zeros). */
static int seal_all(ToSeal *items, size_t n, const unsigned char *recipient,
                    const unsigned char *ikms, const Binding *bind)
{
    size_t slots = n ? n : 1, info_size = bind->prefix_size + HASH_SIZE;
    Suite suite;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char(*secret)[KEY_SIZE] = PyMem_RawMalloc(slots * KEY_SIZE);
    unsigned char(*enc)[KEY_SIZE] = PyMem_RawMalloc(slots * KEY_SIZE);
    unsigned char(*dh)[KEY_SIZE] = PyMem_RawMalloc(slots * KEY_SIZE);
    const unsigned char **scalars = PyMem_RawMalloc(slots * sizeof *scalars);
    const unsigned char **points = PyMem_RawMalloc(slots * sizeof *points);
    int *ok = PyMem_RawMalloc(slots * sizeof *ok);
    unsigned char *info = PyMem_RawMalloc(info_size);
    int sealed = hpke_suite_init(&suite) && md && secret && enc && dh && scalars && points &&
                 ok && info;
    /* skE = DeriveKeyPair(ikm): LabeledExpand(LabeledExtract("", "dkp_prk", ikm), "sk") */
    for (size_t i = 0; sealed && i < n; i++) {
        unsigned char prk[HASH_SIZE];
        sealed = hpke_labeled_extract(&suite.hmac, 1, NULL, 0, "dkp_prk", ikms + i * KEY_SIZE,
                                      KEY_SIZE, prk) &&
                 hpke_labeled_expand(&suite.hmac, 1, prk, "sk", NULL, 0, KEY_SIZE, secret[i]);
        OPENSSL_cleanse(prk, sizeof prk);
        scalars[i] = secret[i], points[i] = BASE_POINT;
    }
    if (sealed && hpke_lanes_on() && n >= LANES_WORTH_IT) {
        /* pkE = X25519(skE, 9), then the DH with the recipient (all zeros only for a
         * low-order recipient key), eight at a time */
        hpke_x25519_many(scalars, points, n, NULL, enc, ok);
        for (size_t i = 0; sealed && i < n; i++)
            sealed = ok[i], points[i] = recipient;
        if (sealed)
            hpke_x25519_many(scalars, points, n, NULL, dh, ok);
    } else if (sealed) {
        /* on OpenSSL (a device's one report, or no lanes here), one key object per seal
         * gives both: its public key, then the DH */
        for (size_t i = 0; i < n; i++)
            ok[i] = keys_on_openssl(secret[i], recipient, enc[i], dh[i]);
    }
    for (size_t i = 0; sealed && i < n; i++) {
        ToSeal *t = &items[i];
        unsigned char key[AEAD_KEY_SIZE], nonce[NONCE_SIZE];
        unsigned char *body = t->out + 1 + ENC_SIZE;
        int written = 0, tail = 0;
        memcpy(t->out + 1, enc[i], ENC_SIZE);
        sealed = ok[i] &&
                 hpke_share_info(md, suite.sha256, bind, t->report_id, t->public_share,
                                 t->public_size, info) &&
                 hpke_key_schedule(&suite, dh[i], enc[i], recipient, info, info_size, key,
                                   nonce) &&
                 EVP_EncryptInit_ex2(suite.aead, suite.aes_gcm, key, nonce, NULL) == 1 &&
                 (!t->plaintext_size ||
                  EVP_EncryptUpdate(suite.aead, body, &written, t->plaintext,
                                    (int)t->plaintext_size) == 1) &&
                 EVP_EncryptFinal_ex(suite.aead, body + written, &tail) == 1 &&
                 EVP_CIPHER_CTX_ctrl(suite.aead, EVP_CTRL_GCM_GET_TAG, TAG_SIZE,
                                     body + t->plaintext_size) == 1;
        OPENSSL_cleanse(key, sizeof key);
    }
    if (secret)
        OPENSSL_cleanse(secret, slots * KEY_SIZE);
    if (dh)
        OPENSSL_cleanse(dh, slots * KEY_SIZE);
    PyMem_RawFree(secret);
    PyMem_RawFree(enc);
    PyMem_RawFree(dh);
    PyMem_RawFree(scalars);
    PyMem_RawFree(points);
    PyMem_RawFree(ok);
    PyMem_RawFree(info);
    EVP_MD_CTX_free(md);
    hpke_suite_free(&suite);
    ERR_clear_error();
    return sealed;
}

/* seal_shares(public_key, prefix, query_id, round, config_id, items, ikms) -> list[bytes]:
 * each (report id, public share, plaintext) of `items` sealed to `public_key` with its info
 * (`prefix` || the metadata digest), its ephemeral key derived from the next 32 bytes of
 * `ikms`; each ciphertext is config_id || enc || ciphertext || tag. */
PyObject *hpke_seal_shares(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer key, prefix, query, ikms;
    unsigned long round;
    int config_id, sealed = 0;
    PyObject *items, *seq = NULL, *result = NULL;
    ToSeal *work = NULL;
    Binding bind;
    if (!PyArg_ParseTuple(args, "y*y*y*kiOy*", &key, &prefix, &query, &round, &config_id, &items,
                          &ikms))
        return NULL;
    seq = PySequence_Tuple(items);
    if (!seq || !hpke_binding(&bind, &prefix, &query, round))
        goto done;
    size_t n = (size_t)PyTuple_GET_SIZE(seq);
    if (key.len != KEY_SIZE || config_id < 0 || config_id > 255 ||
        (size_t)ikms.len != n * KEY_SIZE) {
        PyErr_Format(PyExc_ValueError,
                     "a %d-byte public key, a config id of one byte and %d bytes of key "
                     "material per item",
                     KEY_SIZE, KEY_SIZE);
        goto done;
    }
    work = PyMem_Calloc(n ? n : 1, sizeof *work);
    result = work ? PyList_New((Py_ssize_t)n) : PyErr_NoMemory();
    for (size_t i = 0; result && i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, (Py_ssize_t)i), *id, *pub, *plain;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 ||
            !PyBytes_Check(id = PyTuple_GET_ITEM(item, 0)) ||
            !PyBytes_Check(pub = PyTuple_GET_ITEM(item, 1)) ||
            !PyBytes_Check(plain = PyTuple_GET_ITEM(item, 2))) {
            PyErr_SetString(PyExc_TypeError, "each item must be a triple of bytes");
            Py_CLEAR(result);
            break;
        }
        if (PyBytes_GET_SIZE(id) != REPORT_ID_SIZE || PyBytes_GET_SIZE(plain) > 0x7fffffff) {
            PyErr_Format(PyExc_ValueError, "a report id is %d bytes", REPORT_ID_SIZE);
            Py_CLEAR(result);
            break;
        }
        ToSeal *t = &work[i];
        t->report_id = (const unsigned char *)PyBytes_AS_STRING(id);
        t->public_share = (const unsigned char *)PyBytes_AS_STRING(pub);
        t->public_size = (size_t)PyBytes_GET_SIZE(pub);
        t->plaintext = (const unsigned char *)PyBytes_AS_STRING(plain);
        t->plaintext_size = (size_t)PyBytes_GET_SIZE(plain);
        PyObject *out = PyBytes_FromStringAndSize(
            NULL, (Py_ssize_t)(1 + ENC_SIZE + t->plaintext_size + TAG_SIZE));
        if (!out) {
            Py_CLEAR(result);
            break;
        }
        t->out = (unsigned char *)PyBytes_AS_STRING(out);
        t->out[0] = (unsigned char)config_id;
        PyList_SET_ITEM(result, (Py_ssize_t)i, out);
    }
    if (result) {
        /* the items and the outputs are this call's own until it returns */
        Py_BEGIN_ALLOW_THREADS
        sealed = seal_all(work, n, key.buf, ikms.buf, &bind);
        Py_END_ALLOW_THREADS
        if (!sealed) {
            PyErr_SetString(PyExc_ValueError,
                            "OpenSSL could not seal, or the public key is a low-order point");
            Py_CLEAR(result);
        }
    }
done:
    PyMem_Free(work);
    Py_XDECREF(seq);
    PyBuffer_Release(&key);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&query);
    PyBuffer_Release(&ikms);
    return result;
}
