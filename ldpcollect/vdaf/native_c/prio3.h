/* Prio3 over Field128 for the circuits whose only gadget is the range check's
 * ParallelSum(Mul) (ldpcollect/vdaf/circuits.py `bits_check`): SumVec, Histogram,
 * MultihotCountVec and our Sampling Privacy pair (ldpcollect/secure/sampling_pair.py). One
 * proof, joint randomness, any number of shares. The Python classes are the reference: every
 * function here computes byte for byte what they compute. */
#ifndef LDPCOLLECT_PRIO3_H
#define LDPCOLLECT_PRIO3_H

#include <stddef.h>
#include <stdint.h>

#include "field.h"

enum circuit_kind { KIND_SUM_VEC = 0, KIND_HISTOGRAM = 1, KIND_MULTIHOT = 2, KIND_PAIR = 3 };

#define SEED 32
#define NONCE 16

typedef struct {
    int kind;
    uint32_t vdaf_id;
    unsigned shares;
    size_t length;      /* entries (SumVec, Histogram, MultihotCountVec) or targets (pair) */
    uint64_t max_value; /* SumVec's max_measurement, MultihotCountVec's max_weight */
    unsigned bits;      /* bit length of max_value */
    size_t chunk;
    size_t meas_len, checked_len, calls, arity, wire_len, gadget_len, proof_len;
    size_t outputs, query_rand_len, verifier_len, output_len;
    f128 range_weights[64]; /* the range-checked integer's bit weights */
    f128 shares_inv;
    /* plans: nodes of the wire (P) and gadget (2P) polynomials, f128_coset_plan for P */
    f128 *wire_nodes, *gadget_nodes, *coset_plan;
    f128 wire_n_inv, gadget_n_inv, gadget_root;
} circuit;

/* The error kinds a step reports (the Python side maps them to VdafError). */
enum { OK = 0, ERR_DECODE = 1, ERR_PROOF = 2, ERR_MEMORY = 3 };

const char *circuit_init(circuit *c, int kind, uint32_t vdaf_id, unsigned shares, size_t length,
                         uint64_t max_value, size_t chunk);
void circuit_free(circuit *c);

size_t leader_share_size(const circuit *c);
size_t verifier_share_size(const circuit *c);

/* Sharding: meas is the encoded measurement in Montgomery form (for the prover) and
 * meas_canonical the same canonical (for the shares); rand is shares * 2 seeds. public_out:
 * shares seeds; leader_out: leader_share_size; helpers_out: (shares - 1) * 2 seeds. */
int prio3_shard(const circuit *c, const uint8_t *ctx, size_t ctx_len, const f128 *meas,
                const u128 *meas_canonical, const uint8_t *nonce, const uint8_t *rand,
                uint8_t *public_out, uint8_t *leader_out, uint8_t *helpers_out);

/* One aggregator's verify_init on an encoded public and input share. Outputs: the encoded
 * verifier share (with the joint randomness part), the corrected joint randomness seed and
 * the encoded output share. On error, *message says why. */
int prio3_prep_init(const circuit *c, const uint8_t *verify_key, const uint8_t *ctx,
                    size_t ctx_len, unsigned agg_id, const uint8_t *nonce,
                    const uint8_t *public_share, size_t public_len, const uint8_t *input_share,
                    size_t input_len, uint8_t *verifier_out, uint8_t *seed_out,
                    uint8_t *out_share_out, const char **message);

/* The verifier message from every aggregator's encoded verifier share (each of
 * verifier_share_size bytes): adds them up, decides, derives the joint randomness seed. */
int prio3_shares_to_message(const circuit *c, const uint8_t *ctx, size_t ctx_len,
                            const uint8_t *const *shares, const size_t *lengths,
                            uint8_t *message_out, const char **message);

#endif
