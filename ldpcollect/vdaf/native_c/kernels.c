#include <stdlib.h>

#include "field.h"

f128 f128_r2;

void field_init_constants(void) {
    /* 2^128 mod p, doubled 128 times: 2^256 mod p. */
    f128 x = f128_one();
    for (int i = 0; i < 128; i++) x = f128_add(x, x);
    f128_r2 = x;
}

#define FIELD f64
#include "kernels.h"
#define GEN_LOG2 32
/* 7^((p - 1) / 2^32), computed once */
static u128 f64_generator_canonical(void);
#define GEN_CANONICAL f64_generator_canonical()
#define P_MINUS_2 ((u128)F64_P - 2)
#include "kernels_impl.h"
#undef FIELD
#undef GEN_LOG2
#undef GEN_CANONICAL
#undef P_MINUS_2

static u128 f64_generator_canonical(void) {
    static u128 cached;
    if (!cached) cached = f64_pow(7, 4294967295ULL);
    return cached;
}

/* The generator in canonical form for f128_nth_root: 7^((p - 1) / 2^66), computed once. */
static u128 f128_generator_canonical(void);

#define FIELD f128
#include "kernels.h"
#define GEN_LOG2 66
#define GEN_CANONICAL f128_generator_canonical()
#define P_MINUS_2 (F128_P - 2)
#include "kernels_impl.h"

static u128 f128_generator_canonical(void) {
    static u128 cached;
    if (!cached) cached = f128_out(f128_pow(f128_in(7), 4611686018427387897ULL));
    return cached;
}
