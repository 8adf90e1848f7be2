#include "prio3.h"

#include <stdlib.h>
#include <string.h>

#define FIELD f64
#include "kernels.h"
#undef FIELD
#define FIELD f128
#include "kernels.h"
#undef FIELD
#include "turboshake.h"

#define VERSION 18
#define ELEM 16

enum {
    USAGE_MEAS_SHARE = 1,
    USAGE_PROOF_SHARE = 2,
    USAGE_JOINT_RANDOMNESS = 3,
    USAGE_PROVE_RANDOMNESS = 4,
    USAGE_QUERY_RANDOMNESS = 5,
    USAGE_JOINT_RAND_SEED = 6,
    USAGE_JOINT_RAND_PART = 7,
};

static size_t next_pow2(size_t x) {
    size_t n = 1;
    while (n < x) n <<= 1;
    return n;
}

static unsigned bit_length(uint64_t x) {
    unsigned b = 0;
    while (x) {
        b++;
        x >>= 1;
    }
    return b;
}

const char *circuit_init(circuit *c, int kind, uint32_t vdaf_id, unsigned shares, size_t length,
                         uint64_t max_value, size_t chunk) {
    memset(c, 0, sizeof *c);
    if (kind < KIND_SUM_VEC || kind > KIND_PAIR) return "unknown circuit kind";
    if (shares < 2 || shares > 255) return "shares must be in [2, 256)";
    if (length < 1 || chunk < 1 || length > 10000000 || chunk > 1000000)
        return "length and chunk_length must be positive (and not absurd)";
    c->kind = kind;
    c->vdaf_id = vdaf_id;
    c->shares = shares;
    c->length = length;
    c->chunk = chunk;
    c->max_value = max_value;
    c->bits = bit_length(max_value);
    switch (kind) {
    case KIND_SUM_VEC:
        if (max_value < 1 || c->bits > 62) return "max_measurement must be in [1, 2^62)";
        c->meas_len = c->checked_len = length * c->bits;
        c->outputs = 1;
        c->output_len = length;
        break;
    case KIND_HISTOGRAM:
        c->meas_len = c->checked_len = length;
        c->outputs = 2;
        c->output_len = length;
        break;
    case KIND_MULTIHOT:
        if (max_value < 1 || max_value > length) return "max_weight must be in [1, length]";
        c->meas_len = c->checked_len = length + c->bits;
        c->outputs = 2;
        c->output_len = length;
        break;
    default: /* KIND_PAIR */
        c->meas_len = 2 * length + 1;
        c->checked_len = 3 * length + 1;
        c->outputs = 2;
        c->output_len = 2 * length;
        break;
    }
    if (c->bits) { /* weights 1, 2, ..., 2^(bits-2), then max - (2^(bits-1) - 1) */
        for (unsigned i = 0; i + 1 < c->bits; i++) c->range_weights[i] = f128_in((u128)1 << i);
        c->range_weights[c->bits - 1] =
            f128_in((u128)(max_value - (((uint64_t)1 << (c->bits - 1)) - 1)));
    }
    c->calls = (c->checked_len + chunk - 1) / chunk;
    c->arity = 2 * chunk;
    c->wire_len = next_pow2(1 + c->calls);
    c->gadget_len = 2 * (c->wire_len - 1) + 1;
    c->proof_len = c->arity + c->gadget_len;
    c->query_rand_len = 1 + (c->outputs > 1 ? c->outputs : 0);
    c->verifier_len = 1 + c->arity + 1;
    c->shares_inv = f128_inv(f128_in(shares));

    size_t p = c->wire_len, n = 2 * p;
    c->wire_nodes = malloc(p * sizeof(f128));
    c->gadget_nodes = malloc(n * sizeof(f128));
    c->coset_plan = malloc(2 * p * sizeof(f128));
    if (!c->wire_nodes || !c->gadget_nodes || !c->coset_plan) {
        circuit_free(c);
        return "out of memory";
    }
    f128 w = f128_nth_root(p);
    c->gadget_root = f128_nth_root(n);
    f128_powers(c->wire_nodes, p, w);
    f128_powers(c->gadget_nodes, n, c->gadget_root);
    c->wire_n_inv = f128_inv(f128_in(p));
    c->gadget_n_inv = f128_inv(f128_in(n));
    f128_coset_plan(c->coset_plan, p);
    return NULL;
}

void circuit_free(circuit *c) {
    free(c->wire_nodes);
    free(c->gadget_nodes);
    free(c->coset_plan);
    c->wire_nodes = c->gadget_nodes = c->coset_plan = NULL;
}

size_t leader_share_size(const circuit *c) { return (c->meas_len + c->proof_len) * ELEM + SEED; }
size_t verifier_share_size(const circuit *c) { return c->verifier_len * ELEM + SEED; }

/* -- codecs ------------------------------------------------------------------------------ */

static void encode_vec(uint8_t *dst, const f128 *v, size_t n) {
    for (size_t i = 0; i < n; i++) store_le(dst + ELEM * i, f128_out(v[i]), ELEM);
}

static int decode_vec(f128 *v, const uint8_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        u128 x = load_le(src + ELEM * i, ELEM);
        if (x >= F128_P) return -1;
        v[i] = f128_in(x);
    }
    return 0;
}

/* -- the XOF (draft section 6.2.1) ------------------------------------------------------- */

typedef struct {
    uint8_t *bytes;
    size_t len;
} dst_t;

/* version, algorithm class 0, the VDAF id, usage (big-endian), then the context */
static int dst_make(dst_t *d, const circuit *c, const uint8_t *ctx, size_t ctx_len) {
    d->len = 8 + ctx_len;
    d->bytes = malloc(d->len);
    if (!d->bytes) return -1;
    d->bytes[0] = VERSION;
    d->bytes[1] = 0;
    d->bytes[2] = (uint8_t)(c->vdaf_id >> 24);
    d->bytes[3] = (uint8_t)(c->vdaf_id >> 16);
    d->bytes[4] = (uint8_t)(c->vdaf_id >> 8);
    d->bytes[5] = (uint8_t)c->vdaf_id;
    d->bytes[6] = 0;
    memcpy(d->bytes + 8, ctx, ctx_len);
    return 0;
}

static void xof_start(ts_state *s, const uint8_t *seed, const dst_t *d, int usage) {
    d->bytes[7] = (uint8_t)usage;
    uint8_t dst_len[2] = {(uint8_t)d->len, (uint8_t)(d->len >> 8)};
    uint8_t seed_len = SEED;
    ts_init(s);
    ts_absorb(s, dst_len, 2);
    ts_absorb(s, d->bytes, d->len);
    ts_absorb(s, &seed_len, 1);
    ts_absorb(s, seed, SEED);
}

/* Rejection sampling: 16 bytes little-endian per draw, kept when below p; in Montgomery
 * form, or with `canonical` as drawn (the shard's shares stay canonical: they are only
 * subtracted and encoded, and subtraction commutes with the Montgomery map). */
static void xof_vec(ts_state *s, f128 *out, size_t n, int canonical) {
    uint8_t buf[ELEM * 8];
    size_t have = 0, used = 0;
    for (size_t i = 0; i < n;) {
        if (used == have) {
            size_t want = n - i < 8 ? n - i : 8;
            ts_squeeze(s, buf, want * ELEM);
            have = want;
            used = 0;
        }
        u128 x = load_le(buf + ELEM * used++, ELEM);
        if (x < F128_P) out[i++] = canonical ? x : f128_in(x);
    }
}

static void expand_as(f128 *out, size_t n, const uint8_t *seed, const dst_t *d, int usage,
                      const uint8_t *binder, size_t binder_len, int canonical) {
    ts_state s;
    xof_start(&s, seed, d, usage);
    ts_absorb(&s, binder, binder_len);
    ts_finish(&s, 1);
    xof_vec(&s, out, n, canonical);
}

static void expand(f128 *out, size_t n, const uint8_t *seed, const dst_t *d, int usage,
                   const uint8_t *binder, size_t binder_len) {
    expand_as(out, n, seed, d, usage, binder, binder_len, 0);
}

/* joint_rand_part: derive_seed(blind, dst(7), agg_id || nonce || encode(meas_share)), the
 * share given encoded (`encoded`), canonical (`canonical`) or in Montgomery form. */
static void joint_rand_part(uint8_t *out, const circuit *c, const dst_t *d, unsigned agg_id,
                            const uint8_t *blind, const uint8_t *encoded, const f128 *meas,
                            int canonical, const uint8_t *nonce) {
    ts_state s;
    uint8_t id = (uint8_t)agg_id, buf[ELEM * 16];
    xof_start(&s, blind, d, USAGE_JOINT_RAND_PART);
    ts_absorb(&s, &id, 1);
    ts_absorb(&s, nonce, NONCE);
    if (encoded) {
        ts_absorb(&s, encoded, c->meas_len * ELEM);
    } else {
        for (size_t i = 0; i < c->meas_len; i += 16) {
            size_t n = c->meas_len - i < 16 ? c->meas_len - i : 16;
            if (canonical)
                for (size_t k = 0; k < n; k++) store_le(buf + ELEM * k, meas[i + k], ELEM);
            else
                encode_vec(buf, meas + i, n);
            ts_absorb(&s, buf, n * ELEM);
        }
    }
    ts_finish(&s, 1);
    ts_squeeze(&s, out, SEED);
}

static void joint_rand_seed(uint8_t *out, const circuit *c, const dst_t *d,
                            const uint8_t *parts) {
    static const uint8_t zero[SEED];
    ts_state s;
    xof_start(&s, zero, d, USAGE_JOINT_RAND_SEED);
    ts_absorb(&s, parts, (size_t)c->shares * SEED);
    ts_finish(&s, 1);
    ts_squeeze(&s, out, SEED);
}

/* -- the circuit ------------------------------------------------------------------------- */

/* The range-checked vector, zero-padded to calls * chunk entries. */
static void checked_of(const circuit *c, const f128 *meas, f128 *checked) {
    size_t padded = c->calls * c->chunk;
    if (c->kind == KIND_PAIR) {
        size_t t = c->length;
        memcpy(checked, meas, 2 * t * sizeof(f128));
        for (size_t i = 0; i < t; i++) checked[2 * t + i] = f128_sub(meas[t + i], meas[i]);
        checked[3 * t] = meas[2 * t];
    } else {
        memcpy(checked, meas, c->meas_len * sizeof(f128));
    }
    for (size_t i = c->checked_len; i < padded; i++) checked[i] = f128_zero();
}

static f128 range_decode(const circuit *c, const f128 *bits) {
    f128 acc = f128_zero();
    for (unsigned i = 0; i < c->bits; i++) acc = f128_add(acc, f128_mul(c->range_weights[i], bits[i]));
    return acc;
}

static f128 sum_of(const f128 *v, size_t n) {
    f128 acc = f128_zero();
    for (size_t i = 0; i < n; i++) acc = f128_add(acc, v[i]);
    return acc;
}

/* The circuit's second output (the first is the range check), on a share. */
static f128 second_output(const circuit *c, const f128 *meas) {
    switch (c->kind) {
    case KIND_HISTOGRAM:
        return f128_sub(sum_of(meas, c->length), c->shares_inv);
    case KIND_MULTIHOT:
        return f128_sub(sum_of(meas, c->length), range_decode(c, meas + c->length));
    case KIND_PAIR: {
        size_t t = c->length;
        f128 diff = f128_sub(sum_of(meas + t, t), sum_of(meas, t));
        return f128_sub(diff, meas[2 * t]);
    }
    default:
        return f128_zero();
    }
}

static void truncate_meas(const circuit *c, const f128 *meas, f128 *out) {
    if (c->kind == KIND_SUM_VEC) {
        for (size_t i = 0; i < c->length; i++) out[i] = range_decode(c, meas + i * c->bits);
    } else {
        memcpy(out, meas, c->output_len * sizeof(f128));
    }
}

/* The prover runs on the device, over its secret measurement: for an honest measurement
 * (every x 0 or 1) it does the same work, and takes the same branches, whatever the values.
 * A shortcut whose work grew with the number of 1s (adding a basis column per node in
 * place of a right wire's transforms, about 10% of the pair's prover) was measured and not
 * kept: its time would tell whether a device is at a target
 * (tests/vdaf/test_prover_constant_work.py counts the instructions). */

/* The prover (num_shares 1). proof: arity seeds, then the gadget polynomial's first
 * 2P - 1 values at the 2P-th roots. work: (arity + 6) * P + calls * chunk elements. */
static void prove(const circuit *c, const f128 *meas, const f128 *prove_rand,
                  const f128 *joint_rand, f128 *proof, f128 *work) {
    size_t p = c->wire_len, a = c->arity, chunk = c->chunk, calls = c->calls;
    f128 *wires = work, *odd_left = wires + a * p, *odd_right = odd_left + p;
    f128 *powers = odd_right + p, *checked = powers + p;
    checked_of(c, meas, checked);
    /* wire i's values at the P-th roots: its seed, one value per call, zeros after */
    for (size_t i = 0; i < a; i++) {
        wires[i * p] = prove_rand[i];
        memset(wires + i * p + 1 + calls, 0, (p - 1 - calls) * sizeof(f128));
    }
    /* left wire j at call k: r_k^(j+1) x; right: x - 1. The calls' powers advance side by
     * side (independent products, not one chain per call). An honest x is 0 or 1, and
     * then r_k^(j+1) x is 0 or the power itself: selected by a mask, without a product (the
     * same value); only a dishonest measurement takes the other branch. Masks, not `==`
     * and `||`: no branch on which of the two an honest x is. */
    f128 one = f128_one();
    memcpy(powers, joint_rand, calls * sizeof(f128));
    for (size_t j = 0; j < chunk; j++) {
        f128 *left = wires + 2 * j * p + 1, *right = left + p;
        for (size_t k = 0; k < calls; k++) {
            f128 x = checked[k * chunk + j];
            u128 is_one = f128_eq_mask(x, one);
            if ((uint64_t)(is_one | f128_eq_mask(x, 0))) {
                left[k] = powers[k] & is_one;
            } else {
                left[k] = f128_mul(powers[k], x);
            }
            right[k] = f128_sub(x, one);
            powers[k] = f128_mul(powers[k], joint_rand[k]);
        }
    }
    /* the gadget polynomial sum_j left_j * right_j at the 2P-th roots: at the even ones
     * from the wire values, at the odd ones from the wires' coset values */
    f128 *gadget = proof + a;
    memset(gadget, 0, c->gadget_len * sizeof(f128));
    for (size_t j = 0; j < chunk; j++) {
        const f128 *left = wires + 2 * j * p, *right = left + p;
        f128_coset_values(odd_left, left, p, c->coset_plan);
        f128_coset_values(odd_right, right, p, c->coset_plan);
        /* at the P-th roots: r^(j+1) x (x - 1), zero at every call of an honest
         * measurement (one of the two factors is), and zero past the calls; masks, so an
         * honest x = 0 and x = 1 take the same branches */
        for (size_t i = 0; i < p; i++)
            if ((uint64_t)~(f128_eq_mask(left[i], 0) | f128_eq_mask(right[i], 0)))
                gadget[2 * i] = f128_add(gadget[2 * i], f128_mul(left[i], right[i]));
        for (size_t i = 0; i + 1 < p; i++) /* the last odd root's value is not sent */
            gadget[2 * i + 1] =
                f128_add(gadget[2 * i + 1], f128_mul(odd_left[i], odd_right[i]));
    }
    memcpy(proof, prove_rand, a * sizeof(f128));
}

/* A verifier share; -1 when the query point is a root of unity. work: 3P + calls * chunk. */
static int query(const circuit *c, const f128 *meas, const f128 *proof, const f128 *query_rand,
                 const f128 *joint_rand, f128 *verifier, f128 *work) {
    size_t p = c->wire_len, n = 2 * p, a = c->arity, chunk = c->chunk;
    f128 *weights = work, *checked = work + n + p;
    const f128 *seeds = proof, *gadget = proof + a;

    f128 range = f128_zero();
    for (size_t k = 1; k <= c->calls; k++) range = f128_add(range, gadget[2 * k]);
    f128 v, t;
    if (c->outputs > 1) {
        v = f128_add(f128_mul(query_rand[0], range),
                     f128_mul(query_rand[1], second_output(c, meas)));
        t = query_rand[2];
    } else {
        v = range;
        t = query_rand[0];
    }
    if (f128_eq(f128_pow(t, p), f128_one())) return -1;

    /* the missing gadget value at the last 2P-th root: the polynomial has degree < 2P - 1,
     * so sum_i v_i w^i = 0 over all 2P roots, hence v_last = -w * sum_{i < last} v_i w^i */
    f128 s = f128_zero();
    for (size_t i = 0; i + 1 < n; i++) s = f128_add(s, f128_mul(gadget[i], c->gadget_nodes[i]));
    f128 last = f128_sub(f128_zero(), f128_mul(c->gadget_root, s));
    f128_lagrange_weights_nodes(weights, n, t, c->gadget_nodes, c->gadget_n_inv);
    f128 gadget_at_t = f128_mul(weights[n - 1], last);
    for (size_t i = 0; i + 1 < n; i++)
        gadget_at_t = f128_add(gadget_at_t, f128_mul(weights[i], gadget[i]));

    f128 *wire_weights = weights + n;
    f128_lagrange_weights_nodes(wire_weights, p, t, c->wire_nodes, c->wire_n_inv);
    checked_of(c, meas, checked);
    f128 *wires = verifier + 1;
    for (size_t i = 0; i < a; i++) wires[i] = f128_mul(wire_weights[0], seeds[i]);
    for (size_t call = 0; call < c->calls; call++) {
        f128 w = wire_weights[call + 1], r = joint_rand[call], rp = f128_mul(w, r);
        const f128 *x = checked + call * chunk;
        for (size_t j = 0; j < chunk; j++) {
            wires[2 * j] = f128_add(wires[2 * j], f128_mul(rp, x[j]));
            wires[2 * j + 1] =
                f128_add(wires[2 * j + 1], f128_mul(w, f128_sub(x[j], c->shares_inv)));
            rp = f128_mul(rp, r);
        }
    }
    verifier[0] = v;
    verifier[1 + a] = gadget_at_t;
    return 0;
}

static int decide(const circuit *c, const f128 *verifier) {
    if (!f128_is_zero(verifier[0])) return 0;
    f128 acc = f128_zero();
    for (size_t j = 0; j < c->chunk; j++)
        acc = f128_add(acc, f128_mul(verifier[1 + 2 * j], verifier[2 + 2 * j]));
    return f128_eq(acc, verifier[1 + c->arity]);
}

/* -- Prio3 ------------------------------------------------------------------------------- */

static size_t work_size(const circuit *c) {
    size_t p = c->wire_len;
    return (c->arity + 6) * p + c->calls * c->chunk + 3 * p + c->proof_len + c->meas_len;
}

int prio3_shard(const circuit *c, const uint8_t *ctx, size_t ctx_len, const f128 *meas_in,
                const u128 *meas_canonical, const uint8_t *nonce, const uint8_t *rand,
                uint8_t *public_out, uint8_t *leader_out, uint8_t *helpers_out) {
    size_t m = c->meas_len, pl = c->proof_len, helpers = c->shares - 1;
    dst_t d;
    if (dst_make(&d, c, ctx, ctx_len)) return ERR_MEMORY;
    f128 *buf = malloc((3 * m + 2 * pl + c->calls + c->arity + work_size(c)) * sizeof(f128));
    if (!buf) {
        free(d.bytes);
        return ERR_MEMORY;
    }
    /* The shares are computed on canonical values (subtraction is the same on either form),
     * so the XOF's draws need no conversion in and the shares none out. */
    f128 *meas = buf, *leader_meas = meas + m, *share = leader_meas + m;
    f128 *proof = share + m, *helper_proof = proof + pl, *joint_rand = helper_proof + pl;
    f128 *prove_rand = joint_rand + c->calls, *work = prove_rand + c->arity;
    memcpy(meas, meas_in, m * sizeof(f128));
    memcpy(leader_meas, meas_canonical, m * sizeof(f128));

    const uint8_t *leader_blind = rand + 2 * helpers * SEED;
    const uint8_t *prove_seed = leader_blind + SEED;
    for (unsigned j = 1; j <= helpers; j++) {
        const uint8_t *seed = rand + 2 * (j - 1) * SEED, *blind = seed + SEED;
        uint8_t binder = (uint8_t)j;
        expand_as(share, m, seed, &d, USAGE_MEAS_SHARE, &binder, 1, 1);
        for (size_t i = 0; i < m; i++) leader_meas[i] = f128_sub(leader_meas[i], share[i]);
        joint_rand_part(public_out + j * SEED, c, &d, j, blind, NULL, share, 1, nonce);
        memcpy(helpers_out + 2 * (j - 1) * SEED, seed, 2 * SEED);
    }
    for (size_t i = 0; i < m; i++) store_le(leader_out + ELEM * i, leader_meas[i], ELEM);
    joint_rand_part(public_out, c, &d, 0, leader_blind, leader_out, NULL, 1, nonce);
    uint8_t jr_seed[SEED], one_proof = 1;
    joint_rand_seed(jr_seed, c, &d, public_out);
    expand(joint_rand, c->calls, jr_seed, &d, USAGE_JOINT_RANDOMNESS, &one_proof, 1);
    expand(prove_rand, c->arity, prove_seed, &d, USAGE_PROVE_RANDOMNESS, &one_proof, 1);
    prove(c, meas, prove_rand, joint_rand, proof, work);
    for (size_t i = 0; i < pl; i++) proof[i] = f128_out(proof[i]);
    for (unsigned j = 1; j <= helpers; j++) {
        uint8_t binder[2] = {1, (uint8_t)j};
        expand_as(helper_proof, pl, rand + 2 * (j - 1) * SEED, &d, USAGE_PROOF_SHARE, binder, 2,
                  1);
        for (size_t i = 0; i < pl; i++) proof[i] = f128_sub(proof[i], helper_proof[i]);
    }
    for (size_t i = 0; i < pl; i++) store_le(leader_out + (m + i) * ELEM, proof[i], ELEM);
    memcpy(leader_out + (m + pl) * ELEM, leader_blind, SEED);
    free(buf);
    free(d.bytes);
    return OK;
}

int prio3_prep_init(const circuit *c, const uint8_t *verify_key, const uint8_t *ctx,
                    size_t ctx_len, unsigned agg_id, const uint8_t *nonce,
                    const uint8_t *public_share, size_t public_len, const uint8_t *input_share,
                    size_t input_len, uint8_t *verifier_out, uint8_t *seed_out,
                    uint8_t *out_share_out, const char **message) {
    size_t m = c->meas_len, pl = c->proof_len;
    if (agg_id >= c->shares) {
        *message = "aggregator id out of range";
        return ERR_DECODE;
    }
    if (public_len != (size_t)c->shares * SEED) {
        *message = "the public share has the wrong length";
        return ERR_DECODE;
    }
    size_t expected = agg_id == 0 ? leader_share_size(c) : 2 * SEED;
    if (input_len != expected) {
        *message = agg_id == 0 ? "the leader's input share has the wrong length"
                               : "a helper's input share has the wrong length";
        return ERR_DECODE;
    }
    dst_t d;
    if (dst_make(&d, c, ctx, ctx_len)) return ERR_MEMORY;
    f128 *buf = malloc((m + pl + c->calls + c->query_rand_len + c->verifier_len + c->output_len +
                        work_size(c)) *
                       sizeof(f128));
    if (!buf) {
        free(d.bytes);
        return ERR_MEMORY;
    }
    f128 *meas = buf, *proof = meas + m, *joint_rand = proof + pl;
    f128 *query_rand = joint_rand + c->calls, *verifier = query_rand + c->query_rand_len;
    f128 *out = verifier + c->verifier_len, *work = out + c->output_len;
    int status = OK;
    const uint8_t *blind;
    if (agg_id == 0) {
        if (decode_vec(meas, input_share, m) || decode_vec(proof, input_share + m * ELEM, pl)) {
            *message = "an encoded element is not below the Field128 modulus";
            status = ERR_DECODE;
            goto done;
        }
        blind = input_share + (m + pl) * ELEM;
    } else {
        uint8_t binder[2] = {1, (uint8_t)agg_id};
        expand(meas, m, input_share, &d, USAGE_MEAS_SHARE, binder + 1, 1);
        expand(proof, pl, input_share, &d, USAGE_PROOF_SHARE, binder, 2);
        blind = input_share + SEED;
    }
    truncate_meas(c, meas, out);
    uint8_t *parts = malloc((size_t)c->shares * SEED);
    if (!parts) {
        status = ERR_MEMORY;
        goto done;
    }
    memcpy(parts, public_share, (size_t)c->shares * SEED);
    uint8_t *own_part = verifier_out + c->verifier_len * ELEM;
    /* the leader's measurement share as it came, no re-encoding */
    joint_rand_part(own_part, c, &d, agg_id, blind, agg_id == 0 ? input_share : NULL, meas, 0,
                       nonce);
    memcpy(parts + agg_id * SEED, own_part, SEED);
    joint_rand_seed(seed_out, c, &d, parts);
    free(parts);
    uint8_t one_proof = 1, query_binder[1 + NONCE];
    expand(joint_rand, c->calls, seed_out, &d, USAGE_JOINT_RANDOMNESS, &one_proof, 1);
    query_binder[0] = 1;
    memcpy(query_binder + 1, nonce, NONCE);
    expand(query_rand, c->query_rand_len, verify_key, &d, USAGE_QUERY_RANDOMNESS, query_binder,
           sizeof query_binder);
    if (query(c, meas, proof, query_rand, joint_rand, verifier, work)) {
        *message = "the query point is a root of unity";
        status = ERR_PROOF;
        goto done;
    }
    encode_vec(verifier_out, verifier, c->verifier_len);
    encode_vec(out_share_out, out, c->output_len);
done:
    free(buf);
    free(d.bytes);
    return status;
}

int prio3_shares_to_message(const circuit *c, const uint8_t *ctx, size_t ctx_len,
                            const uint8_t *const *shares, const size_t *lengths,
                            uint8_t *message_out, const char **message) {
    size_t vl = c->verifier_len, size = verifier_share_size(c);
    f128 *total = calloc(2 * vl, sizeof(f128)), *one = total + vl;
    uint8_t *parts = malloc((size_t)c->shares * SEED);
    dst_t d = {NULL, 0};
    int status = OK;
    if (!total || !parts || dst_make(&d, c, ctx, ctx_len)) {
        status = ERR_MEMORY;
        goto done;
    }
    for (unsigned j = 0; j < c->shares; j++) {
        if (lengths[j] != size) {
            *message = "a verifier share has the wrong length";
            status = ERR_DECODE;
            goto done;
        }
        if (decode_vec(one, shares[j], vl)) {
            *message = "an encoded element is not below the Field128 modulus";
            status = ERR_DECODE;
            goto done;
        }
        for (size_t i = 0; i < vl; i++) total[i] = f128_add(total[i], one[i]);
        memcpy(parts + j * SEED, shares[j] + vl * ELEM, SEED);
    }
    if (!decide(c, total)) {
        *message = "proof verifier check failed";
        status = ERR_PROOF;
        goto done;
    }
    joint_rand_seed(message_out, c, &d, parts);
done:
    free(total);
    free(parts);
    free(d.bytes);
    return status;
}
