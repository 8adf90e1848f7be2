/* HPKE base-mode Open (RFC 9180, sections 4.1, 5.1 and 5.2) for the secure mode's suite,
 * DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, with an empty aad (as `cryptography`'s
 * HPKE API seals), on the machine's OpenSSL (libcrypto): a whole batch of input shares sealed
 * to one key pair in one call, each share's info (its binding to the query, round, report and
 * public share) computed in the same call, with the interpreter lock released. Each
 * ciphertext has its own ephemeral key, so every report's key schedule is computed in full;
 * the key objects and contexts are made once per batch, and the batch's X25519s run eight at
 * a time where the CPU can (hpke_suite.c, x25519_lanes.c). Two entry points: the helper's
 * shares of a job (`open_shares`) and the leader's uploads, parsed and checked too
 * (`open_uploads`). The module also holds the fleet's batch Seal (hpke_seal_shares.c).
 *
 * `cryptography`'s `Suite.decrypt` stays the reference (ldpcollect/secure/sealing.py): tests
 * compare the two on random inputs, on tampered ciphertexts and on RFC 9180 seals
 * (tests/secure/test_native_hpke.py, tests/secure/test_upload_fast_path.py,
 * tests/secure/test_x25519_lanes.py).
 */
#include "hpke_seal_shares.h"
#include "hpke_suite.h"
#include "x25519_lanes.h"

#include <stdint.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

typedef struct {
    Suite suite;
    EVP_PKEY *private_key;
    unsigned char raw_private_key[KEY_SIZE], public_key[KEY_SIZE];
    EVP_PKEY_CTX *derive;
} Opener;

/* The plaintext of one `enc || ciphertext || tag` into `out` (size - ENC_SIZE - TAG_SIZE
 * bytes), given its shared secret `dh`; 0 when it does not open. */
static int open_one(Opener *o, const unsigned char *info, size_t info_size,
                    const unsigned char *sealed, size_t size, const unsigned char *dh,
                    unsigned char *out)
{
    int ok = 0, written = 0, tail = 0;
    unsigned char key[AEAD_KEY_SIZE], nonce[NONCE_SIZE];
    size_t body = size - ENC_SIZE - TAG_SIZE;
    Suite *s = &o->suite;
    /* The first message: its nonce is base_nonce itself (sequence number 0). */
    ok = hpke_key_schedule(s, dh, sealed, o->public_key, info, info_size, key, nonce) &&
         EVP_DecryptInit_ex2(s->aead, s->aes_gcm, key, nonce, NULL) == 1 &&
         (!body || EVP_DecryptUpdate(s->aead, out, &written, sealed + ENC_SIZE, (int)body) == 1) &&
         EVP_CIPHER_CTX_ctrl(s->aead, EVP_CTRL_GCM_SET_TAG, TAG_SIZE,
                             (void *)(sealed + ENC_SIZE + body)) == 1 &&
         EVP_DecryptFinal_ex(s->aead, out + written, &tail) == 1;
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
    hpke_suite_free(&o->suite);
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
    return o->derive && EVP_PKEY_derive_init(o->derive) == 1 && hpke_suite_init(&o->suite);
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
    const unsigned char **scalars = PyMem_RawMalloc(slots * sizeof *scalars);
    const unsigned char **points = PyMem_RawMalloc(slots * sizeof *points);
    unsigned char(*dh)[KEY_SIZE] = PyMem_RawMalloc(slots * KEY_SIZE);
    int *dh_ok = PyMem_RawMalloc(slots * sizeof *dh_ok);
    ready = opener_init(&opener, private_key) && md && todo && scalars && points && dh && dh_ok;
    for (size_t i = 0; ready && i < b->count; i++) {
        Sealed *s = &b->items[i];
        s->ok = s->ok && (!prepare || prepare(context, i, md, opener.suite.sha256));
        if (s->ok) {
            scalars[n] = opener.raw_private_key, points[n] = s->sealed;
            todo[n++] = i;
        }
    }
    if (ready) {
        KnownKey known = {opener.raw_private_key, opener.derive};
        hpke_x25519_many(scalars, points, n, &known, dh, dh_ok);
    }
    for (size_t j = 0; ready && j < n; j++) {
        Sealed *s = &b->items[todo[j]];
        s->ok = dh_ok[j] && open_one(&opener, s->info, s->info_size, s->sealed, s->size, dh[j],
                                     b->plain + s->offset);
    }
    if (dh)
        OPENSSL_cleanse(dh, slots * KEY_SIZE);
    PyMem_RawFree(todo);
    PyMem_RawFree(scalars);
    PyMem_RawFree(points);
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
    return hpke_share_info(md, sha256, d->binding, d->report_ids[i], d->public_shares[i],
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
    if (!hpke_binding(&bind, &prefix, &query, round) || !batch_new(&batch, items) ||
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
    if (!hpke_binding(&bind, &prefix, &query, round) || !batch_new(&batch, items) ||
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

/* The 32-byte items of a sequence as pointers (into `seq`, a tuple the caller keeps). */
static const unsigned char **keys_of(PyObject *seq, const char *what)
{
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    const unsigned char **keys = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!keys)
        return (const unsigned char **)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) != KEY_SIZE) {
            PyErr_Format(PyExc_ValueError, "each %s must be %d bytes", what, KEY_SIZE);
            PyMem_Free(keys);
            return NULL;
        }
        keys[i] = (const unsigned char *)PyBytes_AS_STRING(item);
    }
    return keys;
}

/* x25519(scalars, points, lanes) -> list[bytes | None]: X25519 of each scalar with its point
 * (None where the result is all zeros), on the eight-lane kernel (`lanes`, where this CPU
 * runs it) or on OpenSSL: what the batches compute, for the tests to compare. */
static PyObject *x25519(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *scalar_seq, *point_seq, *result = NULL, *scalars_t = NULL, *points_t = NULL;
    const unsigned char **scalars = NULL, **points = NULL;
    unsigned char(*out)[KEY_SIZE] = NULL;
    int lanes, *ok = NULL, before = hpke_use_lanes;
    size_t n = 0;
    if (!PyArg_ParseTuple(args, "OOp", &scalar_seq, &point_seq, &lanes))
        return NULL;
    scalars_t = PySequence_Tuple(scalar_seq);
    points_t = scalars_t ? PySequence_Tuple(point_seq) : NULL;
    if (!points_t)
        goto done;
    n = (size_t)PyTuple_GET_SIZE(points_t);
    if ((size_t)PyTuple_GET_SIZE(scalars_t) != n) {
        PyErr_SetString(PyExc_ValueError, "as many scalars as points");
        goto done;
    }
    scalars = keys_of(scalars_t, "scalar");
    points = scalars ? keys_of(points_t, "point") : NULL;
    out = PyMem_Malloc((n ? n : 1) * KEY_SIZE);
    ok = PyMem_Malloc((n ? n : 1) * sizeof *ok);
    if (!points || !out || !ok) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    /* one scalar for all (a server's key): OpenSSL through one context, as a batch open */
    int one_key = n > 0;
    for (size_t i = 1; one_key && i < n; i++)
        one_key = memcmp(scalars[i], scalars[0], KEY_SIZE) == 0;
    EVP_PKEY *key = one_key ? EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, scalars[0],
                                                            KEY_SIZE)
                            : NULL;
    KnownKey known = {key ? scalars[0] : NULL, key ? EVP_PKEY_CTX_new(key, NULL) : NULL};
    if (known.derive && EVP_PKEY_derive_init(known.derive) != 1)
        EVP_PKEY_CTX_free(known.derive), known.derive = NULL;
    if (known.derive)
        for (size_t i = 0; i < n; i++) /* the same pointer: the batch's way of saying "its" */
            scalars[i] = scalars[0];
    hpke_use_lanes = lanes;
    hpke_x25519_many(scalars, points, n, known.derive ? &known : NULL, out, ok);
    hpke_use_lanes = before;
    EVP_PKEY_CTX_free(known.derive);
    EVP_PKEY_free(key);
    ERR_clear_error();
    result = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; result && i < n; i++) {
        PyObject *item = ok[i] ? bytes_at(out[i], KEY_SIZE) : Py_NewRef(Py_None);
        if (!item)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, (Py_ssize_t)i, item);
    }
done:
    if (out)
        OPENSSL_cleanse(out, (n ? n : 1) * KEY_SIZE);
    PyMem_Free(scalars);
    PyMem_Free(points);
    PyMem_Free(out);
    PyMem_Free(ok);
    Py_XDECREF(scalars_t);
    Py_XDECREF(points_t);
    return result;
}

/* set_lanes(enabled) -> bool: whether batches may use the eight-lane X25519; the setting
 * before. */
static PyObject *set_lanes(PyObject *Py_UNUSED(module), PyObject *args)
{
    int enabled, before = hpke_use_lanes;
    if (!PyArg_ParseTuple(args, "p", &enabled))
        return NULL;
    hpke_use_lanes = enabled;
    return PyBool_FromLong(before);
}

static PyObject *lanes_available(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args))
{
    return PyBool_FromLong(x25519_lanes_available());
}

static PyMethodDef module_methods[] = {
    {"seal_shares", hpke_seal_shares, METH_VARARGS,
     "seal_shares(public_key, prefix, query_id, round, config_id, items, ikms) -> list[bytes]: "
     "(report id, public share, plaintext) triples of one query sealed to one recipient, each "
     "ephemeral key derived from its 32 bytes of `ikms`."},
    {"x25519", x25519, METH_VARARGS,
     "x25519(scalars, points, lanes) -> list[bytes | None]: X25519 of each scalar with its "
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
    "Batched HPKE base-mode Open and Seal on OpenSSL, X25519 in AVX-512 IFMA lanes.", -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native_hpke(void) { return PyModule_Create(&module); }
