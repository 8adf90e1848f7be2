/* HPKE base-mode Open (RFC 9180, sections 4.1, 5.1 and 5.2) for the secure mode's suite,
 * DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, with an empty aad (as `cryptography`'s
 * HPKE API seals), on the machine's OpenSSL (libcrypto): a whole batch of ciphertexts sealed
 * to one key pair in one call, with the interpreter lock released. Each ciphertext has its own
 * ephemeral key, so every report's key schedule is computed in full; only the key objects
 * and contexts are made once per batch.
 *
 * `cryptography`'s `Suite.decrypt` stays the reference (ldpcollect/secure/sealing.py): tests
 * compare the two on random inputs and on tampered ciphertexts
 * (tests/secure/test_native_hpke.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#define ENC_SIZE 32
#define KEY_SIZE 32
#define TAG_SIZE 16
#define AEAD_KEY_SIZE 16
#define NONCE_SIZE 12
#define HASH_SIZE 32
#define BLOCK_SIZE 64

static const unsigned char VERSION[] = "HPKE-v1";
/* "KEM" || I2OSP(0x0020, 2) */
static const unsigned char KEM_SUITE[] = {'K', 'E', 'M', 0x00, 0x20};
/* "HPKE" || I2OSP(kem 0x0020, 2) || I2OSP(kdf 0x0001, 2) || I2OSP(aead 0x0001, 2) */
static const unsigned char HPKE_SUITE[] = {'H', 'P', 'K', 'E', 0x00, 0x20, 0x00, 0x01, 0x00, 0x01};

typedef struct {
    const unsigned char *data;
    size_t size;
} Part;

typedef struct {
    EVP_MD_CTX *md;
    const EVP_MD *sha256;
} Hmac;

/* HMAC-SHA256 of the concatenated parts under `key` (at most one block long). */
static int hmac_sha256(Hmac *h, const unsigned char *key, size_t key_size, const Part *parts,
                       int count, unsigned char out[HASH_SIZE])
{
    unsigned char pad[BLOCK_SIZE], inner[HASH_SIZE];
    memset(pad, 0x36, sizeof pad);
    for (size_t i = 0; i < key_size; i++)
        pad[i] ^= key[i];
    if (EVP_DigestInit_ex2(h->md, h->sha256, NULL) != 1 ||
        EVP_DigestUpdate(h->md, pad, sizeof pad) != 1)
        return 0;
    for (int i = 0; i < count; i++)
        if (parts[i].size && EVP_DigestUpdate(h->md, parts[i].data, parts[i].size) != 1)
            return 0;
    if (EVP_DigestFinal_ex(h->md, inner, NULL) != 1)
        return 0;
    memset(pad, 0x5c, sizeof pad);
    for (size_t i = 0; i < key_size; i++)
        pad[i] ^= key[i];
    return EVP_DigestInit_ex2(h->md, h->sha256, NULL) == 1 &&
           EVP_DigestUpdate(h->md, pad, sizeof pad) == 1 &&
           EVP_DigestUpdate(h->md, inner, sizeof inner) == 1 &&
           EVP_DigestFinal_ex(h->md, out, NULL) == 1;
}

/* LabeledExtract(salt, label, ikm) = HKDF-Extract(salt, "HPKE-v1" || suite || label || ikm);
 * an empty salt is HashLen zero bytes, the same HMAC key. */
static int labeled_extract(Hmac *h, const unsigned char *suite, size_t suite_size,
                           const unsigned char *salt, size_t salt_size, const char *label,
                           const unsigned char *ikm, size_t ikm_size, unsigned char out[HASH_SIZE])
{
    Part parts[] = {{VERSION, sizeof VERSION - 1},
                    {suite, suite_size},
                    {(const unsigned char *)label, strlen(label)},
                    {ikm, ikm_size}};
    return hmac_sha256(h, salt, salt_size, parts, 4, out);
}

/* LabeledExpand(prk, label, info, L) for L <= HashLen: the first L bytes of
 * HMAC(prk, I2OSP(L, 2) || "HPKE-v1" || suite || label || info || 0x01). */
static int labeled_expand(Hmac *h, const unsigned char *suite, size_t suite_size,
                          const unsigned char prk[HASH_SIZE], const char *label,
                          const unsigned char *info, size_t info_size, size_t length,
                          unsigned char *out)
{
    unsigned char size[2] = {(unsigned char)(length >> 8), (unsigned char)length}, one = 1;
    unsigned char block[HASH_SIZE];
    Part parts[] = {{size, 2},
                    {VERSION, sizeof VERSION - 1},
                    {suite, suite_size},
                    {(const unsigned char *)label, strlen(label)},
                    {info, info_size},
                    {&one, 1}};
    if (!hmac_sha256(h, prk, HASH_SIZE, parts, 6, block))
        return 0;
    memcpy(out, block, length);
    OPENSSL_cleanse(block, sizeof block);
    return 1;
}

typedef struct {
    EVP_PKEY *private_key;
    unsigned char public_key[KEY_SIZE];
    EVP_PKEY_CTX *derive;
    EVP_CIPHER_CTX *aead;
    EVP_CIPHER *aes_gcm;
    EVP_MD *sha256;
    Hmac hmac;
    unsigned char psk_id_hash[HASH_SIZE];
} Opener;

/* The plaintext of one `enc || ciphertext || tag` into `out` (size - ENC_SIZE - TAG_SIZE
 * bytes); 0 when it does not open. */
static int open_one(Opener *o, const unsigned char *info, size_t info_size,
                    const unsigned char *sealed, size_t size, unsigned char *out)
{
    int ok = 0, written = 0;
    unsigned char dh[KEY_SIZE], kem_context[ENC_SIZE + KEY_SIZE], eae_prk[HASH_SIZE];
    unsigned char shared[HASH_SIZE], info_hash[HASH_SIZE], secret[HASH_SIZE];
    unsigned char context[1 + 2 * HASH_SIZE], key[AEAD_KEY_SIZE], nonce[NONCE_SIZE];
    size_t dh_size = sizeof dh, body = size - ENC_SIZE - TAG_SIZE;
    EVP_PKEY *ephemeral = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, sealed, ENC_SIZE);
    /* Decap: OpenSSL refuses an all-zero shared secret (RFC 9180, 7.1.4). */
    if (!ephemeral || EVP_PKEY_derive_set_peer_ex(o->derive, ephemeral, 0) != 1 ||
        EVP_PKEY_derive(o->derive, dh, &dh_size) != 1 || dh_size != KEY_SIZE)
        goto done;
    memcpy(kem_context, sealed, ENC_SIZE);
    memcpy(kem_context + ENC_SIZE, o->public_key, KEY_SIZE);
    if (!labeled_extract(&o->hmac, KEM_SUITE, sizeof KEM_SUITE, NULL, 0, "eae_prk", dh, dh_size,
                         eae_prk) ||
        !labeled_expand(&o->hmac, KEM_SUITE, sizeof KEM_SUITE, eae_prk, "shared_secret",
                        kem_context, sizeof kem_context, HASH_SIZE, shared))
        goto done;
    /* KeyScheduleR, mode_base: no psk, so psk_id_hash is the same for every report. */
    context[0] = 0x00;
    memcpy(context + 1, o->psk_id_hash, HASH_SIZE);
    if (!labeled_extract(&o->hmac, HPKE_SUITE, sizeof HPKE_SUITE, NULL, 0, "info_hash", info,
                         info_size, info_hash))
        goto done;
    memcpy(context + 1 + HASH_SIZE, info_hash, HASH_SIZE);
    if (!labeled_extract(&o->hmac, HPKE_SUITE, sizeof HPKE_SUITE, shared, HASH_SIZE, "secret",
                         NULL, 0, secret) ||
        !labeled_expand(&o->hmac, HPKE_SUITE, sizeof HPKE_SUITE, secret, "key", context,
                        sizeof context, AEAD_KEY_SIZE, key) ||
        !labeled_expand(&o->hmac, HPKE_SUITE, sizeof HPKE_SUITE, secret, "base_nonce", context,
                        sizeof context, NONCE_SIZE, nonce))
        goto done;
    /* The first message: its nonce is base_nonce itself (sequence number 0). */
    if (EVP_DecryptInit_ex2(o->aead, o->aes_gcm, key, nonce, NULL) != 1 ||
        (body && EVP_DecryptUpdate(o->aead, out, &written, sealed + ENC_SIZE, (int)body) != 1) ||
        EVP_CIPHER_CTX_ctrl(o->aead, EVP_CTRL_GCM_SET_TAG, TAG_SIZE,
                            (void *)(sealed + ENC_SIZE + body)) != 1)
        goto done;
    int tail = 0;
    ok = EVP_DecryptFinal_ex(o->aead, out + written, &tail) == 1;
done:
    EVP_PKEY_free(ephemeral);
    OPENSSL_cleanse(dh, sizeof dh);
    OPENSSL_cleanse(eae_prk, sizeof eae_prk);
    OPENSSL_cleanse(shared, sizeof shared);
    OPENSSL_cleanse(secret, sizeof secret);
    OPENSSL_cleanse(key, sizeof key);
    if (!ok && body)
        OPENSSL_cleanse(out, body);
    return ok;
}

static void opener_free(Opener *o)
{
    EVP_PKEY_free(o->private_key);
    EVP_PKEY_CTX_free(o->derive);
    EVP_CIPHER_CTX_free(o->aead);
    EVP_CIPHER_free(o->aes_gcm);
    EVP_MD_CTX_free(o->hmac.md);
    EVP_MD_free(o->sha256);
}

static int opener_init(Opener *o, const unsigned char *private_key)
{
    size_t public_size = KEY_SIZE;
    memset(o, 0, sizeof *o);
    o->private_key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, private_key, KEY_SIZE);
    if (!o->private_key ||
        EVP_PKEY_get_raw_public_key(o->private_key, o->public_key, &public_size) != 1)
        return 0;
    o->derive = EVP_PKEY_CTX_new(o->private_key, NULL);
    o->aead = EVP_CIPHER_CTX_new();
    o->aes_gcm = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
    o->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    o->hmac.md = EVP_MD_CTX_new();
    o->hmac.sha256 = o->sha256;
    if (!o->derive || !o->aead || !o->aes_gcm || !o->sha256 || !o->hmac.md ||
        EVP_PKEY_derive_init(o->derive) != 1)
        return 0;
    return labeled_extract(&o->hmac, HPKE_SUITE, sizeof HPKE_SUITE, NULL, 0, "psk_id_hash", NULL,
                           0, o->psk_id_hash);
}

/* open_base(private_key, items) -> list[bytes | None]: items are (info, enc || ciphertext)
 * pairs of bytes, each sealed to the X25519 key `private_key` (32 bytes); per item its
 * plaintext, or None when it is too short or does not open. */
static PyObject *open_base(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer key;
    PyObject *items, *result = NULL, *seq = NULL;
    const unsigned char **infos = NULL, **sealed = NULL;
    size_t *info_sizes = NULL, *sizes = NULL, *offsets = NULL, total = 0;
    unsigned char *plain = NULL, *ok = NULL;
    Opener opener;
    int opener_ready = 0;
    if (!PyArg_ParseTuple(args, "y*O", &key, &items))
        return NULL;
    if (key.len != KEY_SIZE) {
        PyErr_Format(PyExc_ValueError, "an X25519 private key is %d bytes", KEY_SIZE);
        goto done;
    }
    /* A tuple of the pairs: nothing another thread does to `items` while the lock is released
     * frees them (pairs of bytes are immutable). */
    seq = PySequence_Tuple(items);
    if (!seq)
        goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    size_t count = (size_t)n ? (size_t)n : 1;
    infos = PyMem_Calloc(count, sizeof *infos);
    sealed = PyMem_Calloc(count, sizeof *sealed);
    info_sizes = PyMem_Calloc(count, sizeof *info_sizes);
    sizes = PyMem_Calloc(count, sizeof *sizes);
    offsets = PyMem_Calloc(count, sizeof *offsets);
    ok = PyMem_Calloc(count, 1);
    if (!infos || !sealed || !info_sizes || !sizes || !offsets || !ok) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(seq, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyBytes_Check(PyTuple_GET_ITEM(pair, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(pair, 1))) {
            PyErr_SetString(PyExc_TypeError, "each item must be a (bytes, bytes) pair");
            goto done;
        }
        PyObject *info = PyTuple_GET_ITEM(pair, 0), *ct = PyTuple_GET_ITEM(pair, 1);
        infos[i] = (const unsigned char *)PyBytes_AS_STRING(info);
        info_sizes[i] = (size_t)PyBytes_GET_SIZE(info);
        sealed[i] = (const unsigned char *)PyBytes_AS_STRING(ct);
        sizes[i] = (size_t)PyBytes_GET_SIZE(ct);
        offsets[i] = total;
        if (sizes[i] >= ENC_SIZE + TAG_SIZE)
            total += sizes[i] - ENC_SIZE - TAG_SIZE;
    }
    plain = PyMem_Malloc(total ? total : 1);
    if (!plain) {
        PyErr_NoMemory();
        goto done;
    }
    int ready;
    Py_BEGIN_ALLOW_THREADS
    ready = opener_init(&opener, key.buf);
    opener_ready = 1;
    for (Py_ssize_t i = 0; ready && i < n; i++)
        ok[i] = sizes[i] >= ENC_SIZE + TAG_SIZE &&
                open_one(&opener, infos[i], info_sizes[i], sealed[i], sizes[i], plain + offsets[i]);
    ERR_clear_error();
    Py_END_ALLOW_THREADS
    if (!ready) {
        PyErr_SetString(PyExc_ValueError, "OpenSSL could not set up X25519, SHA-256 or AES-GCM");
        goto done;
    }
    result = PyList_New(n);
    if (!result)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = ok[i] ? PyBytes_FromStringAndSize((const char *)plain + offsets[i],
                                                           (Py_ssize_t)(sizes[i] - ENC_SIZE - TAG_SIZE))
                               : Py_NewRef(Py_None);
        if (!item) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, item);
    }
done:
    if (opener_ready)
        opener_free(&opener);
    if (plain) {
        OPENSSL_cleanse(plain, total);
        PyMem_Free(plain);
    }
    PyMem_Free(infos);
    PyMem_Free(sealed);
    PyMem_Free(info_sizes);
    PyMem_Free(sizes);
    PyMem_Free(offsets);
    PyMem_Free(ok);
    Py_XDECREF(seq);
    PyBuffer_Release(&key);
    return result;
}

/* -- the leader's uploads: parse, bind, open and hold, one call per upload ------------------ */

#define REPORT_ID_SIZE 16

/* One upload's fields, as offsets into its bytes (the layout of SecureReport.encode:
 * len(query) (1) || query || round (4) || report id (16) || then the public share, the
 * leader's and the helper's ciphertexts, each after its 4-byte big-endian length). */
typedef struct {
    size_t report_id, public_share, public_size, leader, leader_size, helper, helper_size;
} Fields;

typedef struct {
    const unsigned char *query;
    size_t query_size;
    unsigned char round[4];
    int leader_config, helper_config;
    size_t helper_size;
} Expected;

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* 1 when `body` is a whole report of the expected query and round whose ciphertexts name the
 * expected configs, the helper's of the expected size and the leader's long enough to open. */
static int parse_upload(const unsigned char *body, size_t size, const Expected *e, Fields *f)
{
    size_t offset = 1 + e->query_size, *starts[3], *sizes[3];
    if (size < offset + 4 + REPORT_ID_SIZE || body[0] != e->query_size ||
        memcmp(body + 1, e->query, e->query_size) != 0 || memcmp(body + offset, e->round, 4) != 0)
        return 0;
    f->report_id = offset + 4;
    offset += 4 + REPORT_ID_SIZE;
    starts[0] = &f->public_share, starts[1] = &f->leader, starts[2] = &f->helper;
    sizes[0] = &f->public_size, sizes[1] = &f->leader_size, sizes[2] = &f->helper_size;
    for (int i = 0; i < 3; i++) {
        if (size - offset < 4)
            return 0;
        size_t field = be32(body + offset);
        offset += 4;
        if (field > size - offset)
            return 0;
        *starts[i] = offset, *sizes[i] = field;
        offset += field;
    }
    return offset == size && f->leader_size >= 1 + ENC_SIZE + TAG_SIZE &&
           body[f->leader] == e->leader_config && f->helper_size == e->helper_size &&
           body[f->helper] == e->helper_config;
}

/* The HPKE info of an input share: `prefix` (label || role) || SHA-256 of the query, round,
 * report id and public share, each after its 4-byte big-endian length
 * (sealing.input_share_info). */
static int share_info(EVP_MD_CTX *md, const EVP_MD *sha256, const unsigned char *prefix,
                      size_t prefix_size, const Expected *e, const unsigned char *report_id,
                      const unsigned char *public_share, size_t public_size, unsigned char *info)
{
    const unsigned char *fields[] = {e->query, e->round, report_id, public_share};
    size_t sizes[] = {e->query_size, 4, REPORT_ID_SIZE, public_size};
    if (EVP_DigestInit_ex2(md, sha256, NULL) != 1)
        return 0;
    for (int i = 0; i < 4; i++) {
        unsigned char length[4] = {(unsigned char)(sizes[i] >> 24), (unsigned char)(sizes[i] >> 16),
                                   (unsigned char)(sizes[i] >> 8), (unsigned char)sizes[i]};
        if (EVP_DigestUpdate(md, length, 4) != 1 ||
            (sizes[i] && EVP_DigestUpdate(md, fields[i], sizes[i]) != 1))
            return 0;
    }
    memcpy(info, prefix, prefix_size);
    return EVP_DigestFinal_ex(md, info + prefix_size, NULL) == 1;
}

/* The held body (aggregator/secure/upload.py, held_body): the report with its leader
 * ciphertext replaced by the ciphertext's SHA-256. */
static PyObject *held_body(const unsigned char *body, size_t size, const Fields *f,
                           const unsigned char digest[HASH_SIZE])
{
    size_t head = f->leader - 4, tail = size - (f->leader + f->leader_size);
    PyObject *held = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(head + 4 + HASH_SIZE + tail));
    if (!held)
        return NULL;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(held);
    memcpy(out, body, head);
    memcpy(out + head, (const unsigned char[]){0, 0, 0, HASH_SIZE}, 4);
    memcpy(out + head + 4, digest, HASH_SIZE);
    memcpy(out + head + 4 + HASH_SIZE, body + f->leader + f->leader_size, tail);
    return held;
}

static PyObject *bytes_at(const unsigned char *data, size_t size)
{
    return PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)size);
}

static Expected expected(const Py_buffer *query, unsigned long round, int leader_config,
                         int helper_config, size_t helper_size)
{
    Expected e = {query->buf, (size_t)query->len,
                  {(unsigned char)(round >> 24), (unsigned char)(round >> 16),
                   (unsigned char)(round >> 8), (unsigned char)round},
                  leader_config, helper_config, helper_size};
    return e;
}

/* open_uploads(private_key, prefix, query_id, round, leader_config, helper_config,
 * helper_size, bodies) -> list[tuple[bytes, bytes, bytes, bytes] | None]: per upload body
 * that is a whole report of `query_id` (UTF-8) and `round`, whose ciphertexts name the two
 * configs (the helper's `helper_size` bytes) and whose leader ciphertext opens under
 * `private_key` with its info (`prefix` || the metadata digest): (report id, public share,
 * held body, opened share); None for any other body, which the caller's reference path
 * refuses with its reason. The lock is released while the batch is parsed and opened. */
static PyObject *open_uploads(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer key, prefix, query;
    unsigned long round;
    int leader_config, helper_config;
    Py_ssize_t helper_size;
    PyObject *items, *result = NULL, *seq = NULL;
    Fields *fields = NULL;
    unsigned char *plain = NULL, *ok = NULL, *infos = NULL, *digests = NULL;
    size_t *offsets = NULL, total = 0, info_size = 0;
    Opener opener;
    int opener_ready = 0;
    EVP_MD_CTX *md = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*kiinO", &key, &prefix, &query, &round, &leader_config,
                          &helper_config, &helper_size, &items))
        return NULL;
    if (key.len != KEY_SIZE || query.len < 1 || query.len > 255 || round > 0xffffffffUL ||
        helper_size < 1) {
        PyErr_SetString(PyExc_ValueError, "a 32-byte key, a 1-255 byte query id, a 32-bit round "
                                          "and a positive helper ciphertext size");
        goto done;
    }
    Expected e = expected(&query, round, leader_config, helper_config, (size_t)helper_size);
    seq = PySequence_Tuple(items); /* immutable bytes, kept alive while the lock is released */
    if (!seq)
        goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    size_t count = n ? (size_t)n : 1;
    info_size = (size_t)prefix.len + HASH_SIZE;
    fields = PyMem_Calloc(count, sizeof *fields);
    offsets = PyMem_Calloc(count, sizeof *offsets);
    ok = PyMem_Calloc(count, 1);
    infos = PyMem_Malloc(count * info_size);
    digests = PyMem_Malloc(count * HASH_SIZE);
    if (!fields || !offsets || !ok || !infos || !digests) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *body = PyTuple_GET_ITEM(seq, i);
        if (!PyBytes_Check(body)) {
            PyErr_SetString(PyExc_TypeError, "each upload body must be bytes");
            goto done;
        }
        const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(body);
        ok[i] = parse_upload(data, (size_t)PyBytes_GET_SIZE(body), &e, &fields[i]);
        offsets[i] = total;
        if (ok[i])
            total += fields[i].leader_size - 1 - ENC_SIZE - TAG_SIZE;
    }
    plain = PyMem_Malloc(total ? total : 1);
    if (!plain) {
        PyErr_NoMemory();
        goto done;
    }
    int ready;
    Py_BEGIN_ALLOW_THREADS
    ready = opener_init(&opener, key.buf) && (md = EVP_MD_CTX_new()) != NULL;
    opener_ready = 1;
    for (Py_ssize_t i = 0; ready && i < n; i++) {
        if (!ok[i])
            continue;
        const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(seq, i));
        const Fields *f = &fields[i];
        unsigned char *info = infos + (size_t)i * info_size;
        ok[i] = share_info(md, opener.sha256, prefix.buf, (size_t)prefix.len, &e,
                           data + f->report_id, data + f->public_share, f->public_size, info) &&
                open_one(&opener, info, info_size, data + f->leader + 1, f->leader_size - 1,
                         plain + offsets[i]) &&
                EVP_Digest(data + f->leader, f->leader_size, digests + (size_t)i * HASH_SIZE, NULL,
                           opener.sha256, NULL) == 1;
    }
    ERR_clear_error();
    Py_END_ALLOW_THREADS
    if (!ready) {
        PyErr_SetString(PyExc_ValueError, "OpenSSL could not set up X25519, SHA-256 or AES-GCM");
        goto done;
    }
    result = PyList_New(n);
    if (!result)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!ok[i]) {
            PyList_SET_ITEM(result, i, Py_NewRef(Py_None));
            continue;
        }
        PyObject *body = PyTuple_GET_ITEM(seq, i);
        const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(body);
        const Fields *f = &fields[i];
        PyObject *item = Py_BuildValue(
            "(NNNN)", bytes_at(data + f->report_id, REPORT_ID_SIZE),
            bytes_at(data + f->public_share, f->public_size),
            held_body(data, (size_t)PyBytes_GET_SIZE(body), f, digests + (size_t)i * HASH_SIZE),
            bytes_at(plain + offsets[i], f->leader_size - 1 - ENC_SIZE - TAG_SIZE));
        if (!item) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, item);
    }
done:
    if (opener_ready)
        opener_free(&opener);
    EVP_MD_CTX_free(md);
    if (plain) {
        OPENSSL_cleanse(plain, total);
        PyMem_Free(plain);
    }
    PyMem_Free(fields);
    PyMem_Free(offsets);
    PyMem_Free(ok);
    PyMem_Free(infos);
    PyMem_Free(digests);
    Py_XDECREF(seq);
    PyBuffer_Release(&key);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&query);
    return result;
}

/* open_shares(private_key, prefix, query_id, round, config_id, items) -> list[bytes | None]:
 * per (report id, public share, ciphertext) triple of one query and round whose report id is
 * 16 bytes and whose ciphertext names `config_id` and opens under `private_key` with its info
 * (`prefix` || the metadata digest, computed here), the plaintext; None for any other item,
 * which the caller's reference path refuses with its reason (the helper's shares of a job). */
static PyObject *open_shares(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer key, prefix, query;
    unsigned long round;
    int config_id;
    PyObject *items, *result = NULL, *seq = NULL;
    unsigned char *plain = NULL, *ok = NULL, *info = NULL;
    size_t *offsets = NULL, total = 0, info_size = 0;
    Opener opener;
    int opener_ready = 0;
    EVP_MD_CTX *md = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*kiO", &key, &prefix, &query, &round, &config_id, &items))
        return NULL;
    if (key.len != KEY_SIZE || query.len < 1 || query.len > 255 || round > 0xffffffffUL) {
        PyErr_SetString(PyExc_ValueError, "a 32-byte key, a 1-255 byte query id, a 32-bit round");
        goto done;
    }
    Expected e = expected(&query, round, config_id, 0, 0);
    seq = PySequence_Tuple(items); /* immutable bytes, kept alive while the lock is released */
    if (!seq)
        goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    size_t count = n ? (size_t)n : 1;
    info_size = (size_t)prefix.len + HASH_SIZE;
    offsets = PyMem_Calloc(count, sizeof *offsets);
    ok = PyMem_Calloc(count, 1);
    info = PyMem_Malloc(info_size);
    if (!offsets || !ok || !info) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 ||
            !PyBytes_Check(PyTuple_GET_ITEM(item, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(item, 1)) ||
            !PyBytes_Check(PyTuple_GET_ITEM(item, 2))) {
            PyErr_SetString(PyExc_TypeError, "each item must be a (bytes, bytes, bytes) triple");
            goto done;
        }
        PyObject *ct = PyTuple_GET_ITEM(item, 2);
        size_t size = (size_t)PyBytes_GET_SIZE(ct);
        ok[i] = PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 0)) == REPORT_ID_SIZE &&
                size >= 1 + ENC_SIZE + TAG_SIZE &&
                (unsigned char)PyBytes_AS_STRING(ct)[0] == (unsigned char)config_id;
        offsets[i] = total;
        if (ok[i])
            total += size - 1 - ENC_SIZE - TAG_SIZE;
    }
    plain = PyMem_Malloc(total ? total : 1);
    if (!plain) {
        PyErr_NoMemory();
        goto done;
    }
    int ready;
    Py_BEGIN_ALLOW_THREADS
    ready = opener_init(&opener, key.buf) && (md = EVP_MD_CTX_new()) != NULL;
    opener_ready = 1;
    for (Py_ssize_t i = 0; ready && i < n; i++) {
        if (!ok[i])
            continue;
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        PyObject *public_share = PyTuple_GET_ITEM(item, 1), *ct = PyTuple_GET_ITEM(item, 2);
        const unsigned char *sealed = (const unsigned char *)PyBytes_AS_STRING(ct) + 1;
        ok[i] = share_info(md, opener.sha256, prefix.buf, (size_t)prefix.len, &e,
                           (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(item, 0)),
                           (const unsigned char *)PyBytes_AS_STRING(public_share),
                           (size_t)PyBytes_GET_SIZE(public_share), info) &&
                open_one(&opener, info, info_size, sealed, (size_t)PyBytes_GET_SIZE(ct) - 1,
                         plain + offsets[i]);
    }
    ERR_clear_error();
    Py_END_ALLOW_THREADS
    if (!ready) {
        PyErr_SetString(PyExc_ValueError, "OpenSSL could not set up X25519, SHA-256 or AES-GCM");
        goto done;
    }
    result = PyList_New(n);
    if (!result)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t size = (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(PyTuple_GET_ITEM(seq, i), 2));
        PyObject *share = ok[i] ? bytes_at(plain + offsets[i], size - 1 - ENC_SIZE - TAG_SIZE)
                                : Py_NewRef(Py_None);
        if (!share) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, share);
    }
done:
    if (opener_ready)
        opener_free(&opener);
    EVP_MD_CTX_free(md);
    if (plain) {
        OPENSSL_cleanse(plain, total);
        PyMem_Free(plain);
    }
    PyMem_Free(offsets);
    PyMem_Free(ok);
    PyMem_Free(info);
    Py_XDECREF(seq);
    PyBuffer_Release(&key);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&query);
    return result;
}

static PyMethodDef module_methods[] = {
    {"open_base", open_base, METH_VARARGS,
     "open_base(private_key, items) -> list[bytes | None]: HPKE base-mode Open of each "
     "(info, enc || ciphertext) pair (X25519, HKDF-SHA256, AES-128-GCM, empty aad)."},
    {"open_uploads", open_uploads, METH_VARARGS,
     "open_uploads(private_key, prefix, query_id, round, leader_config, helper_config, "
     "helper_size, bodies) -> list[tuple[bytes, bytes, bytes, bytes] | None]: the leader's "
     "uploads of one query parsed, checked, bound and opened; None where the reference path "
     "must decide."},
    {"open_shares", open_shares, METH_VARARGS,
     "open_shares(private_key, prefix, query_id, round, config_id, items) -> "
     "list[bytes | None]: (report id, public share, ciphertext) triples of one query bound "
     "and opened; None where the reference path must decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ldpcollect.secure._native_hpke",
    "Batched HPKE base-mode Open on OpenSSL.", -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native_hpke(void) { return PyModule_Create(&module); }
