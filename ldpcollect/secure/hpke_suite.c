/* The suite's shared steps: see hpke_suite.h. */
#include "hpke_suite.h"

#include <string.h>

#include <openssl/crypto.h>

#include "x25519_lanes.h"

static const unsigned char VERSION[] = "HPKE-v1";
const unsigned char HPKE_KEM_SUITE[5] = {'K', 'E', 'M', 0x00, 0x20};
/* "HPKE" || I2OSP(kem 0x0020, 2) || I2OSP(kdf 0x0001, 2) || I2OSP(aead 0x0001, 2) */
static const unsigned char HPKE_SUITE[] = {'H', 'P', 'K', 'E', 0x00, 0x20, 0x00, 0x01, 0x00, 0x01};

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

static Part suite_id(int kem)
{
    return kem ? (Part){HPKE_KEM_SUITE, sizeof HPKE_KEM_SUITE}
               : (Part){HPKE_SUITE, sizeof HPKE_SUITE};
}

/* LabeledExtract(salt, label, ikm) = HKDF-Extract(salt, "HPKE-v1" || suite || label || ikm);
 * an empty salt is HashLen zero bytes, the same HMAC key. */
int hpke_labeled_extract(Hmac *h, int kem, const unsigned char *salt, size_t salt_size,
                         const char *label, const unsigned char *ikm, size_t ikm_size,
                         unsigned char out[HASH_SIZE])
{
    Part parts[] = {{VERSION, sizeof VERSION - 1},
                    suite_id(kem),
                    {(const unsigned char *)label, strlen(label)},
                    {ikm, ikm_size}};
    return hmac_sha256(h, salt, salt_size, parts, 4, out);
}

/* LabeledExpand(prk, label, info, L) for L <= HashLen: the first L bytes of
 * HMAC(prk, I2OSP(L, 2) || "HPKE-v1" || suite || label || info || 0x01). */
int hpke_labeled_expand(Hmac *h, int kem, const unsigned char prk[HASH_SIZE], const char *label,
                        const unsigned char *info, size_t info_size, size_t length,
                        unsigned char *out)
{
    unsigned char size[2] = {(unsigned char)(length >> 8), (unsigned char)length}, one = 1;
    unsigned char block[HASH_SIZE];
    Part parts[] = {{size, 2},
                    {VERSION, sizeof VERSION - 1},
                    suite_id(kem),
                    {(const unsigned char *)label, strlen(label)},
                    {info, info_size},
                    {&one, 1}};
    if (!hmac_sha256(h, prk, HASH_SIZE, parts, 6, block))
        return 0;
    memcpy(out, block, length);
    OPENSSL_cleanse(block, sizeof block);
    return 1;
}

void hpke_suite_free(Suite *s)
{
    EVP_CIPHER_CTX_free(s->aead);
    EVP_CIPHER_free(s->aes_gcm);
    EVP_MD_CTX_free(s->hmac.md);
    EVP_MD_free(s->sha256);
    memset(s, 0, sizeof *s);
}

int hpke_suite_init(Suite *s)
{
    memset(s, 0, sizeof *s);
    s->aead = EVP_CIPHER_CTX_new();
    s->aes_gcm = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
    s->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    s->hmac.md = EVP_MD_CTX_new();
    s->hmac.sha256 = s->sha256;
    return s->aead && s->aes_gcm && s->sha256 && s->hmac.md &&
           hpke_labeled_extract(&s->hmac, 0, NULL, 0, "psk_id_hash", NULL, 0, s->psk_id_hash);
}

int hpke_key_schedule(Suite *s, const unsigned char dh[KEY_SIZE],
                      const unsigned char enc[ENC_SIZE], const unsigned char recipient[KEY_SIZE],
                      const unsigned char *info, size_t info_size,
                      unsigned char key[AEAD_KEY_SIZE], unsigned char nonce[NONCE_SIZE])
{
    unsigned char kem_context[ENC_SIZE + KEY_SIZE], eae_prk[HASH_SIZE], shared[HASH_SIZE];
    unsigned char info_hash[HASH_SIZE], secret[HASH_SIZE], context[1 + 2 * HASH_SIZE];
    memcpy(kem_context, enc, ENC_SIZE);
    memcpy(kem_context + ENC_SIZE, recipient, KEY_SIZE);
    /* KeyScheduleR/S, mode_base: context = mode || psk_id_hash || info_hash */
    context[0] = 0x00;
    memcpy(context + 1, s->psk_id_hash, HASH_SIZE);
    int ok = hpke_labeled_extract(&s->hmac, 1, NULL, 0, "eae_prk", dh, KEY_SIZE, eae_prk) &&
             hpke_labeled_expand(&s->hmac, 1, eae_prk, "shared_secret", kem_context,
                                 sizeof kem_context, HASH_SIZE, shared) &&
             hpke_labeled_extract(&s->hmac, 0, NULL, 0, "info_hash", info, info_size,
                                  info_hash);
    if (ok) {
        memcpy(context + 1 + HASH_SIZE, info_hash, HASH_SIZE);
        ok = hpke_labeled_extract(&s->hmac, 0, shared, HASH_SIZE, "secret", NULL, 0, secret) &&
             hpke_labeled_expand(&s->hmac, 0, secret, "key", context, sizeof context,
                                 AEAD_KEY_SIZE, key) &&
             hpke_labeled_expand(&s->hmac, 0, secret, "base_nonce", context, sizeof context,
                                 NONCE_SIZE, nonce);
    }
    OPENSSL_cleanse(eae_prk, sizeof eae_prk);
    OPENSSL_cleanse(shared, sizeof shared);
    OPENSSL_cleanse(secret, sizeof secret);
    return ok;
}

int hpke_binding(Binding *b, const Py_buffer *prefix, const Py_buffer *query, unsigned long round)
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

int hpke_share_info(EVP_MD_CTX *md, const EVP_MD *sha256, const Binding *b,
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

int hpke_use_lanes = 1;

int hpke_lanes_on(void)
{
    return hpke_use_lanes && x25519_lanes_available();
}

/* X25519 on OpenSSL: through `derive` (a context of the scalar's key, derive_init done) when
 * given, else with keys made for this call. */
static int x25519_openssl(const unsigned char *scalar, const unsigned char *point,
                          EVP_PKEY_CTX *derive, unsigned char out[KEY_SIZE])
{
    size_t size = KEY_SIZE;
    EVP_PKEY *own = derive ? NULL : EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, scalar,
                                                                   KEY_SIZE);
    EVP_PKEY_CTX *context = derive ? derive : (own ? EVP_PKEY_CTX_new(own, NULL) : NULL);
    EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, point, ENC_SIZE);
    /* OpenSSL refuses an all-zero shared secret (RFC 9180, 7.1.4) */
    int ok = context && peer && (derive || EVP_PKEY_derive_init(context) == 1) &&
             EVP_PKEY_derive_set_peer_ex(context, peer, 0) == 1 &&
             EVP_PKEY_derive(context, out, &size) == 1 && size == KEY_SIZE;
    EVP_PKEY_free(peer);
    if (!derive)
        EVP_PKEY_CTX_free(context);
    EVP_PKEY_free(own);
    return ok;
}

void hpke_x25519_many(const unsigned char *const *scalars, const unsigned char *const *points,
                      size_t n, const KnownKey *known, unsigned char (*out)[KEY_SIZE], int *ok)
{
    size_t done = 0;
    if (hpke_lanes_on()) {
        unsigned char k[X25519_LANES][32], u[X25519_LANES][32], r[X25519_LANES][32];
        int lane_ok[X25519_LANES];
        while (n - done >= LANES_WORTH_IT) {
            size_t group = n - done < X25519_LANES ? n - done : X25519_LANES;
            for (size_t j = 0; j < X25519_LANES; j++) { /* a short group repeats its first */
                size_t from = done + (j < group ? j : 0);
                memcpy(k[j], scalars[from], KEY_SIZE);
                memcpy(u[j], points[from], KEY_SIZE);
            }
            x25519_lanes(r, lane_ok, (const unsigned char(*)[32])k,
                         (const unsigned char(*)[32])u);
            for (size_t j = 0; j < group; j++) {
                memcpy(out[done + j], r[j], KEY_SIZE);
                ok[done + j] = lane_ok[j];
            }
            done += group;
        }
        OPENSSL_cleanse(k, sizeof k);
        OPENSSL_cleanse(r, sizeof r);
    }
    for (; done < n; done++) {
        EVP_PKEY_CTX *derive = known && scalars[done] == known->scalar ? known->derive : NULL;
        ok[done] = x25519_openssl(scalars[done], points[done], derive, out[done]);
    }
}
