/* HPKE base-mode Open (RFC 9180, sections 4.1, 5.1 and 5.2) for the secure mode's suite,
 * DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, with an empty aad (as `cryptography`'s
 * HPKE API seals), on the machine's OpenSSL (libcrypto): a whole batch of input shares sealed
 * to one key pair in one call, each share's info (its binding to the query, round, report and
 * public share) computed in the same call, with the interpreter lock released. Each
 * ciphertext has its own ephemeral key, so every report's key schedule is computed in full;
 * only the key objects and contexts are made once per batch. Two entry points: the helper's
 * shares of a job (`open_shares`) and the leader's uploads, parsed and checked too
 * (`open_uploads`).
 *
 * `cryptography`'s `Suite.decrypt` stays the reference (ldpcollect/secure/sealing.py): tests
 * compare the two on random inputs, on tampered ciphertexts and on RFC 9180 seals
 * (tests/secure/test_native_hpke.py, tests/secure/test_upload_fast_path.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "x25519_lanes.h"

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
    unsigned char raw_private_key[KEY_SIZE], public_key[KEY_SIZE];
    EVP_PKEY_CTX *derive;
    EVP_CIPHER_CTX *aead;
    EVP_CIPHER *aes_gcm;
    EVP_MD *sha256;
    Hmac hmac;
    unsigned char psk_id_hash[HASH_SIZE];
} Opener;

/* The X25519 shared secret of one ciphertext's `enc` with the opener's key, on OpenSSL; 0 when
 * it is all zeros (OpenSSL refuses it: RFC 9180, 7.1.4). */
static int dh_one(Opener *o, const unsigned char *enc, unsigned char dh[KEY_SIZE])
{
    size_t dh_size = KEY_SIZE;
    EVP_PKEY *ephemeral = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, enc, ENC_SIZE);
    int ok = ephemeral && EVP_PKEY_derive_set_peer_ex(o->derive, ephemeral, 0) == 1 &&
             EVP_PKEY_derive(o->derive, dh, &dh_size) == 1 && dh_size == KEY_SIZE;
    EVP_PKEY_free(ephemeral);
    return ok;
}

/* The plaintext of one `enc || ciphertext || tag` into `out` (size - ENC_SIZE - TAG_SIZE
 * bytes), given its shared secret `dh`; 0 when it does not open. */
static int open_one(Opener *o, const unsigned char *info, size_t info_size,
                    const unsigned char *sealed, size_t size, const unsigned char *dh,
                    unsigned char *out)
{
    int ok = 0, written = 0;
    unsigned char kem_context[ENC_SIZE + KEY_SIZE], eae_prk[HASH_SIZE];
    unsigned char shared[HASH_SIZE], info_hash[HASH_SIZE], secret[HASH_SIZE];
    unsigned char context[1 + 2 * HASH_SIZE], key[AEAD_KEY_SIZE], nonce[NONCE_SIZE];
    size_t body = size - ENC_SIZE - TAG_SIZE;
    memcpy(kem_context, sealed, ENC_SIZE);
    memcpy(kem_context + ENC_SIZE, o->public_key, KEY_SIZE);
    if (!labeled_extract(&o->hmac, KEM_SUITE, sizeof KEM_SUITE, NULL, 0, "eae_prk", dh, KEY_SIZE,
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
    OPENSSL_cleanse(o->raw_private_key, KEY_SIZE);
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
    memcpy(o->raw_private_key, private_key, KEY_SIZE);
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

/* -- a batch: every ciphertext of one call, opened with the interpreter lock released ------- */

/* One ciphertext of a batch: its info, its `enc || ciphertext || tag`, where its plaintext
 * goes, and whether it is worth opening (then: whether it opened). */
typedef struct {
    const unsigned char *info, *sealed;
    size_t info_size, size, offset;
    int ok;
} Sealed;

typedef struct {
    PyObject *seq; /* the call's items, a tuple: alive while the lock is released */
    Sealed *items;
    size_t count, total;
    unsigned char *plain;
} Batch;

/* Called for each item worth opening, without the interpreter lock, before it is opened:
 * what the item needs first (its info); 0 when it must not be opened. */
typedef int (*Prepare)(void *context, size_t i, EVP_MD_CTX *md, const EVP_MD *sha256);

static int batch_new(Batch *b, PyObject *items)
{
    memset(b, 0, sizeof *b);
    b->seq = PySequence_Tuple(items);
    if (!b->seq)
        return 0;
    b->count = (size_t)PyTuple_GET_SIZE(b->seq);
    b->items = PyMem_Calloc(b->count ? b->count : 1, sizeof *b->items);
    if (!b->items)
        PyErr_NoMemory();
    return b->items != NULL;
}

/* Room for the plaintexts of the items worth opening. */
static int batch_room(Batch *b)
{
    for (size_t i = 0; i < b->count; i++) {
        Sealed *s = &b->items[i];
        s->ok = s->ok && s->size >= ENC_SIZE + TAG_SIZE;
        s->offset = b->total;
        if (s->ok)
            b->total += s->size - ENC_SIZE - TAG_SIZE;
    }
    b->plain = PyMem_Malloc(b->total ? b->total : 1);
    if (!b->plain)
        PyErr_NoMemory();
    return b->plain != NULL;
}

/* Whether batches use the eight-lane X25519 where the CPU has it (`set_lanes`: tests compare
 * the two). */
static int use_lanes = 1;

/* Fewer ciphertexts than this left over go to OpenSSL one at a time: an eight-lane call costs
 * about what three of OpenSSL's cost. */
#define LANES_WORTH_IT 3

/* The shared secrets of the ciphertexts `todo[0..n)`, into dh[i]; ok[i] 0 where there is
 * none. Groups of eight on the eight-lane kernel when it runs here, the rest on OpenSSL. */
static void batch_dh(Opener *o, const Batch *b, const size_t *todo, size_t n,
                     unsigned char (*dh)[KEY_SIZE], int *ok)
{
    size_t done = 0;
    if (use_lanes && x25519_lanes_available()) {
        unsigned char u[X25519_LANES][32], out[X25519_LANES][32];
        int lane_ok[X25519_LANES];
        while (n - done >= LANES_WORTH_IT) {
            size_t group = n - done < X25519_LANES ? n - done : X25519_LANES;
            for (size_t j = 0; j < X25519_LANES; j++) /* a short group repeats its first */
                memcpy(u[j], b->items[todo[done + (j < group ? j : 0)]].sealed, ENC_SIZE);
            x25519_lanes(out, lane_ok, o->raw_private_key, (const unsigned char (*)[32])u);
            for (size_t j = 0; j < group; j++) {
                memcpy(dh[done + j], out[j], KEY_SIZE);
                ok[done + j] = lane_ok[j];
            }
            done += group;
        }
        OPENSSL_cleanse(out, sizeof out);
    }
    for (; done < n; done++)
        ok[done] = dh_one(o, b->items[todo[done]].sealed, dh[done]);
}

/* Prepare and open every item worth it under `private_key`, without the interpreter lock
 * (the caller keeps what the items point into alive and unchanged): first every item's
 * preparation, then the shared secrets of those still worth opening (in lanes), then each
 * key schedule and AEAD open. */
static int batch_open(Batch *b, const unsigned char *private_key, Prepare prepare, void *context)
{
    int ready;
    Py_BEGIN_ALLOW_THREADS
    Opener opener;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t n = 0, slots = b->count ? b->count : 1;
    size_t *todo = PyMem_RawMalloc(slots * sizeof *todo);
    unsigned char(*dh)[KEY_SIZE] = PyMem_RawMalloc(slots * KEY_SIZE);
    int *dh_ok = PyMem_RawMalloc(slots * sizeof *dh_ok);
    ready = opener_init(&opener, private_key) && md && todo && dh && dh_ok;
    for (size_t i = 0; ready && i < b->count; i++) {
        Sealed *s = &b->items[i];
        s->ok = s->ok && (!prepare || prepare(context, i, md, opener.sha256));
        if (s->ok)
            todo[n++] = i;
    }
    if (ready)
        batch_dh(&opener, b, todo, n, dh, dh_ok);
    for (size_t j = 0; ready && j < n; j++) {
        Sealed *s = &b->items[todo[j]];
        s->ok = dh_ok[j] && open_one(&opener, s->info, s->info_size, s->sealed, s->size, dh[j],
                                     b->plain + s->offset);
    }
    if (dh)
        OPENSSL_cleanse(dh, slots * KEY_SIZE);
    PyMem_RawFree(todo);
    PyMem_RawFree(dh);
    PyMem_RawFree(dh_ok);
    opener_free(&opener);
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    Py_END_ALLOW_THREADS
    if (!ready)
        PyErr_SetString(PyExc_ValueError, "OpenSSL could not set up X25519, SHA-256 or AES-GCM");
    return ready;
}

static PyObject *bytes_at(const unsigned char *data, size_t size)
{
    return PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)size);
}

/* Item i's plaintext as bytes (it opened). */
static PyObject *plaintext(const Batch *b, size_t i)
{
    const Sealed *s = &b->items[i];
    return bytes_at(b->plain + s->offset, s->size - ENC_SIZE - TAG_SIZE);
}

/* Per item its plaintext, or None. */
static PyObject *plaintexts(const Batch *b)
{
    PyObject *result = PyList_New((Py_ssize_t)b->count);
    for (size_t i = 0; result && i < b->count; i++) {
        PyObject *item = b->items[i].ok ? plaintext(b, i) : Py_NewRef(Py_None);
        if (!item)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, (Py_ssize_t)i, item);
    }
    return result;
}

/* The batch, and the call's buffers. */
static void batch_free(Batch *b, Py_buffer *key, Py_buffer *prefix, Py_buffer *query)
{
    if (b->plain) {
        OPENSSL_cleanse(b->plain, b->total);
        PyMem_Free(b->plain);
    }
    PyMem_Free(b->items);
    Py_XDECREF(b->seq);
    PyBuffer_Release(key);
    PyBuffer_Release(prefix);
    PyBuffer_Release(query);
}

/* -- input shares bound to their reports: the leader's uploads, the helper's jobs ---------- */

#define REPORT_ID_SIZE 16

typedef struct {
    const unsigned char *query;
    size_t query_size;
    unsigned char round[4];
    const unsigned char *prefix;
    size_t prefix_size;
} Binding;

/* The binding of a call's shares: `prefix` (label || role), the query id and round. */
static int binding(Binding *b, const Py_buffer *prefix, const Py_buffer *query, unsigned long round)
{
    if (query->len < 1 || query->len > 255 || round > 0xffffffffUL) {
        PyErr_SetString(PyExc_ValueError, "a 1-255 byte query id and a 32-bit round");
        return 0;
    }
    *b = (Binding){query->buf, (size_t)query->len,
                   {(unsigned char)(round >> 24), (unsigned char)(round >> 16),
                    (unsigned char)(round >> 8), (unsigned char)round},
                   prefix->buf, (size_t)prefix->len};
    return 1;
}

/* The HPKE info of an input share: the prefix || SHA-256 of the query, round, report id and
 * public share, each after its 4-byte big-endian length (sealing.input_share_info). */
static int share_info(EVP_MD_CTX *md, const EVP_MD *sha256, const Binding *b,
                      const unsigned char *report_id, const unsigned char *public_share,
                      size_t public_size, unsigned char *info)
{
    const unsigned char *fields[] = {b->query, b->round, report_id, public_share};
    size_t sizes[] = {b->query_size, 4, REPORT_ID_SIZE, public_size};
    if (EVP_DigestInit_ex2(md, sha256, NULL) != 1)
        return 0;
    for (int i = 0; i < 4; i++) {
        unsigned char length[4] = {(unsigned char)(sizes[i] >> 24), (unsigned char)(sizes[i] >> 16),
                                   (unsigned char)(sizes[i] >> 8), (unsigned char)sizes[i]};
        if (EVP_DigestUpdate(md, length, 4) != 1 ||
            (sizes[i] && EVP_DigestUpdate(md, fields[i], sizes[i]) != 1))
            return 0;
    }
    memcpy(info, b->prefix, b->prefix_size);
    return EVP_DigestFinal_ex(md, info + b->prefix_size, NULL) == 1;
}

/* What binding an item needs: its report id and public share, and room for its info. */
typedef struct {
    const Binding *binding;
    Batch *batch;
    const unsigned char **report_ids, **public_shares;
    size_t *public_sizes;
    unsigned char *infos, *digests; /* digests: the leader ciphertexts' SHA-256, or NULL */
    const unsigned char **digested;
    size_t *digested_sizes;
} Bound;

static int bound_new(Bound *d, const Binding *binding, Batch *batch, int digests)
{
    size_t n = batch->count ? batch->count : 1, info_size = binding->prefix_size + HASH_SIZE;
    memset(d, 0, sizeof *d);
    d->binding = binding, d->batch = batch;
    d->report_ids = PyMem_Calloc(n, sizeof *d->report_ids);
    d->public_shares = PyMem_Calloc(n, sizeof *d->public_shares);
    d->public_sizes = PyMem_Calloc(n, sizeof *d->public_sizes);
    d->infos = PyMem_Malloc(n * info_size);
    if (digests) {
        d->digests = PyMem_Malloc(n * HASH_SIZE);
        d->digested = PyMem_Calloc(n, sizeof *d->digested);
        d->digested_sizes = PyMem_Calloc(n, sizeof *d->digested_sizes);
    }
    if (!d->report_ids || !d->public_shares || !d->public_sizes || !d->infos ||
        (digests && (!d->digests || !d->digested || !d->digested_sizes))) {
        PyErr_NoMemory();
        return 0;
    }
    for (size_t i = 0; i < batch->count; i++)
        batch->items[i].info = d->infos + i * info_size, batch->items[i].info_size = info_size;
    return 1;
}

static void bound_free(Bound *d)
{
    PyMem_Free(d->report_ids);
    PyMem_Free(d->public_shares);
    PyMem_Free(d->public_sizes);
    PyMem_Free(d->infos);
    PyMem_Free(d->digests);
    PyMem_Free(d->digested);
    PyMem_Free(d->digested_sizes);
}

/* Prepare: item i's info, and its ciphertext's digest when the call keeps them. */
static int bind_one(void *context, size_t i, EVP_MD_CTX *md, const EVP_MD *sha256)
{
    Bound *d = context;
    unsigned char *info = (unsigned char *)d->batch->items[i].info;
    return share_info(md, sha256, d->binding, d->report_ids[i], d->public_shares[i],
                      d->public_sizes[i], info) &&
           (!d->digests || EVP_Digest(d->digested[i], d->digested_sizes[i],
                                      d->digests + i * HASH_SIZE, NULL, sha256, NULL) == 1);
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
    PyObject *items, *result = NULL;
    Batch batch = {0};
    Bound bound = {0};
    Binding bind;
    if (!PyArg_ParseTuple(args, "y*y*y*kiO", &key, &prefix, &query, &round, &config_id, &items))
        return NULL;
    if (key.len != KEY_SIZE) {
        PyErr_Format(PyExc_ValueError, "an X25519 private key is %d bytes", KEY_SIZE);
        goto done;
    }
    if (!binding(&bind, &prefix, &query, round) || !batch_new(&batch, items) ||
        !bound_new(&bound, &bind, &batch, 0))
        goto done;
    for (size_t i = 0; i < batch.count; i++) {
        PyObject *item = PyTuple_GET_ITEM(batch.seq, (Py_ssize_t)i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 ||
            !PyBytes_Check(PyTuple_GET_ITEM(item, 0)) ||
            !PyBytes_Check(PyTuple_GET_ITEM(item, 1)) ||
            !PyBytes_Check(PyTuple_GET_ITEM(item, 2))) {
            PyErr_SetString(PyExc_TypeError, "each item must be a (bytes, bytes, bytes) triple");
            goto done;
        }
        PyObject *report_id = PyTuple_GET_ITEM(item, 0), *public_share = PyTuple_GET_ITEM(item, 1);
        PyObject *ct = PyTuple_GET_ITEM(item, 2);
        const unsigned char *sealed = (const unsigned char *)PyBytes_AS_STRING(ct);
        size_t size = (size_t)PyBytes_GET_SIZE(ct);
        bound.report_ids[i] = (const unsigned char *)PyBytes_AS_STRING(report_id);
        bound.public_shares[i] = (const unsigned char *)PyBytes_AS_STRING(public_share);
        bound.public_sizes[i] = (size_t)PyBytes_GET_SIZE(public_share);
        batch.items[i].ok = PyBytes_GET_SIZE(report_id) == REPORT_ID_SIZE && size >= 1 &&
                            sealed[0] == (unsigned char)config_id;
        batch.items[i].sealed = sealed + 1, batch.items[i].size = size ? size - 1 : 0;
    }
    if (batch_room(&batch) && batch_open(&batch, key.buf, bind_one, &bound))
        result = plaintexts(&batch);
done:
    bound_free(&bound);
    batch_free(&batch, &key, &prefix, &query);
    return result;
}

/* One upload's fields, as offsets into its bytes (the layout of SecureReport.encode:
 * len(query) (1) || query || round (4) || report id (16) || then the public share, the
 * leader's and the helper's ciphertexts, each after its 4-byte big-endian length). */
typedef struct {
    size_t report_id, public_share, public_size, leader, leader_size, helper, helper_size;
} Fields;

typedef struct {
    int leader_config, helper_config;
    size_t helper_size;
} Configs;

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* 1 when `body` is a whole report of the bound query and round whose ciphertexts name the
 * expected configs, the helper's of the expected size. */
static int parse_upload(const unsigned char *body, size_t size, const Binding *b,
                        const Configs *c, Fields *f)
{
    size_t offset = 1 + b->query_size, *starts[3], *sizes[3];
    if (size < offset + 4 + REPORT_ID_SIZE || body[0] != b->query_size ||
        memcmp(body + 1, b->query, b->query_size) != 0 || memcmp(body + offset, b->round, 4) != 0)
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
    return offset == size && f->leader_size >= 1 && body[f->leader] == c->leader_config &&
           f->helper_size == c->helper_size && body[f->helper] == c->helper_config;
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

/* open_uploads(private_key, prefix, query_id, round, leader_config, helper_config,
 * helper_size, bodies) -> list[tuple[bytes, bytes, bytes, bytes] | None]: per upload body
 * that is a whole report of `query_id` (UTF-8) and `round`, whose ciphertexts name the two
 * configs (the helper's `helper_size` bytes) and whose leader ciphertext opens under
 * `private_key` with its info (`prefix` || the metadata digest): (report id, public share,
 * held body, opened share); None for any other body, which the caller's reference path
 * refuses with its reason. The lock is released while the batch is bound and opened. */
static PyObject *open_uploads(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer key, prefix, query;
    unsigned long round;
    Configs configs;
    Py_ssize_t helper_size;
    PyObject *items, *result = NULL;
    Batch batch = {0};
    Bound bound = {0};
    Binding bind;
    Fields *fields = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*kiinO", &key, &prefix, &query, &round,
                          &configs.leader_config, &configs.helper_config, &helper_size, &items))
        return NULL;
    if (key.len != KEY_SIZE || helper_size < 1) {
        PyErr_SetString(PyExc_ValueError, "a 32-byte key and a positive helper ciphertext size");
        goto done;
    }
    configs.helper_size = (size_t)helper_size;
    if (!binding(&bind, &prefix, &query, round) || !batch_new(&batch, items) ||
        !bound_new(&bound, &bind, &batch, 1))
        goto done;
    fields = PyMem_Calloc(batch.count ? batch.count : 1, sizeof *fields);
    if (!fields) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < batch.count; i++) {
        PyObject *body = PyTuple_GET_ITEM(batch.seq, (Py_ssize_t)i);
        if (!PyBytes_Check(body)) {
            PyErr_SetString(PyExc_TypeError, "each upload body must be bytes");
            goto done;
        }
        const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(body);
        Fields *f = &fields[i];
        Sealed *s = &batch.items[i];
        s->ok = parse_upload(data, (size_t)PyBytes_GET_SIZE(body), &bind, &configs, f);
        if (!s->ok)
            continue;
        s->sealed = data + f->leader + 1, s->size = f->leader_size - 1;
        bound.report_ids[i] = data + f->report_id;
        bound.public_shares[i] = data + f->public_share, bound.public_sizes[i] = f->public_size;
        bound.digested[i] = data + f->leader, bound.digested_sizes[i] = f->leader_size;
    }
    if (!batch_room(&batch) || !batch_open(&batch, key.buf, bind_one, &bound))
        goto done;
    result = PyList_New((Py_ssize_t)batch.count);
    for (size_t i = 0; result && i < batch.count; i++) {
        PyObject *item = Py_NewRef(Py_None);
        if (batch.items[i].ok) {
            PyObject *body = PyTuple_GET_ITEM(batch.seq, (Py_ssize_t)i);
            const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(body);
            const Fields *f = &fields[i];
            Py_DECREF(item);
            item = Py_BuildValue(
                "(NNNN)", bytes_at(data + f->report_id, REPORT_ID_SIZE),
                bytes_at(data + f->public_share, f->public_size),
                held_body(data, (size_t)PyBytes_GET_SIZE(body), f, bound.digests + i * HASH_SIZE),
                plaintext(&batch, i));
        }
        if (!item)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, (Py_ssize_t)i, item);
    }
done:
    PyMem_Free(fields);
    bound_free(&bound);
    batch_free(&batch, &key, &prefix, &query);
    return result;
}

/* x25519(private_key, points, lanes) -> list[bytes | None]: X25519 of the key with each
 * 32-byte point (None where the result is all zeros), on the eight-lane kernel (`lanes`, where
 * this CPU runs it) or on OpenSSL: what the batches compute, for the tests to compare. */
static PyObject *x25519(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer key;
    PyObject *points, *result = NULL;
    int lanes;
    Batch batch = {0};
    if (!PyArg_ParseTuple(args, "y*Op", &key, &points, &lanes))
        return NULL;
    Opener opener = {0};
    size_t *todo = NULL;
    unsigned char(*dh)[KEY_SIZE] = NULL;
    int *dh_ok = NULL, before = use_lanes;
    if (key.len != KEY_SIZE) {
        PyErr_Format(PyExc_ValueError, "an X25519 private key is %d bytes", KEY_SIZE);
        goto done;
    }
    if (!batch_new(&batch, points))
        goto done;
    size_t slots = batch.count ? batch.count : 1;
    todo = PyMem_Malloc(slots * sizeof *todo);
    dh = PyMem_Malloc(slots * KEY_SIZE);
    dh_ok = PyMem_Malloc(slots * sizeof *dh_ok);
    if (!todo || !dh || !dh_ok) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < batch.count; i++) {
        PyObject *point = PyTuple_GET_ITEM(batch.seq, (Py_ssize_t)i);
        if (!PyBytes_Check(point) || PyBytes_GET_SIZE(point) != KEY_SIZE) {
            PyErr_Format(PyExc_ValueError, "each point must be %d bytes", KEY_SIZE);
            goto done;
        }
        batch.items[i].sealed = (const unsigned char *)PyBytes_AS_STRING(point);
        todo[i] = i;
    }
    if (!opener_init(&opener, key.buf)) {
        PyErr_SetString(PyExc_ValueError, "OpenSSL could not set up X25519");
        goto done;
    }
    use_lanes = lanes;
    batch_dh(&opener, &batch, todo, batch.count, dh, dh_ok);
    use_lanes = before;
    result = PyList_New((Py_ssize_t)batch.count);
    for (size_t i = 0; result && i < batch.count; i++) {
        PyObject *item = dh_ok[i] ? bytes_at(dh[i], KEY_SIZE) : Py_NewRef(Py_None);
        if (!item)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, (Py_ssize_t)i, item);
    }
done:
    opener_free(&opener);
    PyMem_Free(todo);
    PyMem_Free(dh);
    PyMem_Free(dh_ok);
    PyMem_Free(batch.items);
    Py_XDECREF(batch.seq);
    PyBuffer_Release(&key);
    return result;
}

/* set_lanes(enabled) -> bool: whether batches may use the eight-lane X25519; the setting
 * before. */
static PyObject *set_lanes(PyObject *Py_UNUSED(module), PyObject *args)
{
    int enabled, before = use_lanes;
    if (!PyArg_ParseTuple(args, "p", &enabled))
        return NULL;
    use_lanes = enabled;
    return PyBool_FromLong(before);
}

static PyObject *lanes_available(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args))
{
    return PyBool_FromLong(x25519_lanes_available());
}

static PyMethodDef module_methods[] = {
    {"x25519", x25519, METH_VARARGS,
     "x25519(private_key, points, lanes) -> list[bytes | None]: X25519 of the key with each "
     "point, on the eight-lane kernel or on OpenSSL; None where the result is all zeros."},
    {"set_lanes", set_lanes, METH_VARARGS,
     "set_lanes(enabled) -> bool: whether batches may use the eight-lane X25519 (where the "
     "CPU runs it); the setting before."},
    {"lanes_available", lanes_available, METH_NOARGS,
     "lanes_available() -> bool: whether this CPU runs the eight-lane X25519 (AVX-512 IFMA)."},
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
