/* The secure mode's HPKE suite, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM (RFC
 * 9180), on the machine's OpenSSL, with what both directions share: the labeled HKDF, the
 * base mode's key schedule, an input share's binding (its HPKE info), and X25519 for many
 * (scalar, point) pairs, eight at a time in AVX-512 IFMA lanes where the CPU has them
 * (x25519_lanes.h). The batch Open (`_native_hpke.c`) and the batch Seal (`hpke_seal_shares.c`)
 * are built on it. */
#ifndef LDPCOLLECT_HPKE_SUITE_H
#define LDPCOLLECT_HPKE_SUITE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

#include <openssl/evp.h>

#define ENC_SIZE 32
#define KEY_SIZE 32
#define TAG_SIZE 16
#define AEAD_KEY_SIZE 16
#define NONCE_SIZE 12
#define HASH_SIZE 32
#define BLOCK_SIZE 64
#define REPORT_ID_SIZE 16

/* "KEM" || I2OSP(0x0020, 2) */
extern const unsigned char HPKE_KEM_SUITE[5];

typedef struct {
    const unsigned char *data;
    size_t size;
} Part;

typedef struct {
    EVP_MD_CTX *md;
    const EVP_MD *sha256;
} Hmac;

/* What every operation of the suite needs, made once per batch. */
typedef struct {
    EVP_MD *sha256;
    EVP_CIPHER *aes_gcm;
    EVP_CIPHER_CTX *aead;
    Hmac hmac;
    unsigned char psk_id_hash[HASH_SIZE]; /* mode_base: no psk, the same for every message */
} Suite;

int hpke_suite_init(Suite *s);
void hpke_suite_free(Suite *s);

/* LabeledExtract and LabeledExpand (L <= HashLen) under the KEM's suite id (`kem`) or the
 * HPKE one. */
int hpke_labeled_extract(Hmac *h, int kem, const unsigned char *salt, size_t salt_size,
                         const char *label, const unsigned char *ikm, size_t ikm_size,
                         unsigned char out[HASH_SIZE]);
int hpke_labeled_expand(Hmac *h, int kem, const unsigned char prk[HASH_SIZE], const char *label,
                        const unsigned char *info, size_t info_size, size_t length,
                        unsigned char *out);

/* The AEAD key and base nonce of a base-mode context: the DHKEM's shared secret from `dh`,
 * `enc` and the recipient's public key, then the key schedule with `info`. */
int hpke_key_schedule(Suite *s, const unsigned char dh[KEY_SIZE],
                      const unsigned char enc[ENC_SIZE], const unsigned char recipient[KEY_SIZE],
                      const unsigned char *info, size_t info_size,
                      unsigned char key[AEAD_KEY_SIZE], unsigned char nonce[NONCE_SIZE]);

/* The binding of a call's input shares: `prefix` (label || role), the query id and round. */
typedef struct {
    const unsigned char *query;
    size_t query_size;
    unsigned char round[4];
    const unsigned char *prefix;
    size_t prefix_size;
} Binding;

/* 0 (a ValueError set) unless the query id is 1-255 bytes and the round 32 bits. */
int hpke_binding(Binding *b, const Py_buffer *prefix, const Py_buffer *query,
                 unsigned long round);

/* An input share's HPKE info into `info` (prefix_size + HASH_SIZE bytes): the prefix || the
 * SHA-256 of the query, round, report id and public share, each after its 4-byte big-endian
 * length (sealing.input_share_info). */
int hpke_share_info(EVP_MD_CTX *md, const EVP_MD *sha256, const Binding *b,
                    const unsigned char *report_id, const unsigned char *public_share,
                    size_t public_size, unsigned char *info);

/* Whether X25519 batches use the eight-lane kernel where the CPU has it (tests compare). */
extern int hpke_use_lanes;

/* 1 when batches run in lanes here: hpke_use_lanes, and the CPU has them. */
int hpke_lanes_on(void);

/* Fewer X25519s than this go to OpenSSL one at a time: an eight-lane call costs about what
 * three of OpenSSL's cost. */
#define LANES_WORTH_IT 3

/* A scalar whose X25519s go through an OpenSSL context made once (a server's key). */
typedef struct {
    const unsigned char *scalar;
    EVP_PKEY_CTX *derive; /* derive_init done */
} KnownKey;

/* out[j] = X25519(scalars[j], points[j]) for j < n; ok[j] 0 where it is all zeros (or
 * OpenSSL fails). Groups of eight in lanes where they run, the rest on OpenSSL (through
 * `known`'s context where the scalar is its, when given). Without the interpreter lock. */
void hpke_x25519_many(const unsigned char *const *scalars, const unsigned char *const *points,
                      size_t n, const KnownKey *known, unsigned char (*out)[KEY_SIZE], int *ok);

#endif
