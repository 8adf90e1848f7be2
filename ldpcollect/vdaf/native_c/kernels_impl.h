/* The bodies of kernels.h; included by kernels.c once per field with FIELD, GEN_LOG2 (log2
 * of the generator's order), GEN_CANONICAL (the generator) and P_MINUS_2 defined. */
#define KCAT_(a, b) a##_##b
#define KCAT(a, b) KCAT_(a, b)
#define K(name) KCAT(FIELD, name)
#define T FIELD
#define ADD K(add)
#define SUB K(sub)
#define MUL K(mul)
#define ONE K(one)

T K(pow)(T x, u128 e) {
    T acc = ONE();
    while (e) {
        if (e & 1) acc = MUL(acc, x);
        x = MUL(x, x);
        e >>= 1;
    }
    return acc;
}

T K(inv)(T x) { return K(pow)(x, P_MINUS_2); }

T K(nth_root)(size_t n) {
    unsigned log = 0;
    while (((size_t)1 << log) < n) log++;
    T g = K(in)(GEN_CANONICAL);
    for (unsigned i = log; i < GEN_LOG2; i++) g = MUL(g, g);
    return g;
}

void K(powers)(T *powers, size_t count, T x) {
    T acc = ONE();
    for (size_t i = 0; i < count; i++) {
        powers[i] = acc;
        acc = MUL(acc, x);
    }
}

/* Cooley-Tukey butterflies on input in bit-reversed order: natural-order output. */
void K(transform_dit)(T *values, size_t n, const T *powers) {
    for (size_t len = 2; len <= n; len <<= 1) {
        size_t half = len / 2, stride = n / len;
        for (size_t start = 0; start < n; start += len) {
            T u = values[start], v = values[start + half]; /* twiddle 1: no multiplication */
            values[start] = ADD(u, v);
            values[start + half] = SUB(u, v);
            for (size_t k = 1; k < half; k++) {
                u = values[start + k];
                v = MUL(values[start + k + half], powers[k * stride]);
                values[start + k] = ADD(u, v);
                values[start + k + half] = SUB(u, v);
            }
        }
    }
}

/* Gentleman-Sande butterflies on natural-order input: output in bit-reversed order. */
void K(transform_dif)(T *values, size_t n, const T *powers) {
    for (size_t len = n; len >= 2; len >>= 1) {
        size_t half = len / 2, stride = n / len;
        for (size_t start = 0; start < n; start += len) {
            T u = values[start], v = values[start + half];
            values[start] = ADD(u, v);
            values[start + half] = SUB(u, v);
            for (size_t k = 1; k < half; k++) {
                u = values[start + k];
                v = values[start + k + half];
                values[start + k] = ADD(u, v);
                values[start + k + half] = MUL(SUB(u, v), powers[k * stride]);
            }
        }
    }
}

void K(bit_reverse)(T *values, size_t n) {
    for (size_t i = 1, j = 0; i < n; i++) {
        size_t bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j |= bit;
        if (i < j) {
            T tmp = values[i];
            values[i] = values[j];
            values[j] = tmp;
        }
    }
}

void K(transform_powers)(T *values, size_t n, const T *powers) {
    K(bit_reverse)(values, n);
    K(transform_dit)(values, n, powers);
}

void K(coset_plan)(T *plan, size_t n) {
    T w = K(nth_root)(n), s = K(nth_root)(2 * n), n_inv = K(inv)(K(in)((u128)n));
    T *inv_powers = plan, *powers = plan + n / 2, *scale = plan + n;
    K(powers)(inv_powers, n / 2, K(inv)(w));
    K(powers)(powers, n / 2, w);
    K(powers)(scale, n, s);
    for (size_t i = 0; i < n; i++) scale[i] = MUL(scale[i], n_inv);
    K(bit_reverse)(scale, n); /* in the order of the coefficients between the two */
}

void K(coset_values)(T *out, const T *values, size_t n, const T *plan) {
    const T *inv_powers = plan, *powers = plan + n / 2, *scale = plan + n;
    memcpy(out, values, n * sizeof(T));
    K(transform_dif)(out, n, inv_powers); /* n times the coefficients, bit-reversed */
    for (size_t i = 0; i < n; i++) out[i] = MUL(out[i], scale[i]);
    K(transform_dit)(out, n, powers);
}

int K(transform)(T *values, size_t n, T root) {
    T *powers = malloc((n / 2 + 1) * sizeof(T));
    if (!powers) return -1;
    K(powers)(powers, n / 2 + 1, root);
    K(transform_powers)(values, n, powers);
    free(powers);
    return 0;
}

int K(ntt)(T *values, size_t n, int coset) {
    if (coset) {
        T s = K(nth_root)(2 * n), scale = ONE();
        for (size_t i = 0; i < n; i++) {
            values[i] = MUL(values[i], scale);
            scale = MUL(scale, s);
        }
    }
    return K(transform)(values, n, K(nth_root)(n));
}

int K(inv_ntt)(T *values, size_t n) {
    if (K(transform)(values, n, K(inv)(K(nth_root)(n)))) return -1;
    T n_inv = K(inv)(K(in)((u128)n));
    for (size_t i = 0; i < n; i++) values[i] = MUL(values[i], n_inv);
    return 0;
}

T K(poly_eval)(const T *coeffs, size_t len, T x) {
    T acc = K(zero)();
    for (size_t i = len; i-- > 0;) acc = ADD(MUL(acc, x), coeffs[i]);
    return acc;
}

void K(lagrange_weights_nodes)(T *out, size_t n, T x, const T *nodes, T n_inv) {
    /* out[i] = (1/n) w^i prod_{j != i} (x - w^j): prefix products in `out`, the suffix
     * product carried backwards. */
    T prefix = ONE();
    for (size_t i = 0; i < n; i++) {
        out[i] = prefix;
        prefix = MUL(prefix, SUB(x, nodes[i]));
    }
    T suffix = n_inv;
    for (size_t i = n; i-- > 0;) {
        out[i] = MUL(MUL(out[i], suffix), nodes[i]);
        suffix = MUL(suffix, SUB(x, nodes[i]));
    }
}

int K(lagrange_weights)(T *out, size_t n, T x) {
    T *nodes = malloc(n * sizeof(T));
    if (!nodes) return -1;
    K(powers)(nodes, n, K(nth_root)(n));
    K(lagrange_weights_nodes)(out, n, x, nodes, K(inv)(K(in)((u128)n)));
    free(nodes);
    return 0;
}

int K(double_evaluations)(T *out, const T *values, size_t n, T *tmp) {
    T *plan = malloc(2 * n * sizeof(T));
    if (!plan) return -1;
    K(coset_plan)(plan, n);
    K(coset_values)(tmp, values, n, plan);
    free(plan);
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = values[i];
        out[2 * i + 1] = tmp[i];
    }
    return 0;
}

int K(extend_values)(T *out, const T *values, size_t m, size_t n) {
    /* q(x_k) = L(x_k) sum_i b_i q(x_i) / (x_k - x_i), L(x) = prod_i (x - x_i),
     * b_i = 1 / prod_{j != i} (x_i - x_j): barycentric over the m known nodes. */
    T w = K(nth_root)(n);
    T *nodes = malloc(n * sizeof(T));
    T *bary = malloc((m ? m : 1) * sizeof(T));
    if (!nodes || !bary) {
        free(nodes);
        free(bary);
        return -1;
    }
    nodes[0] = ONE();
    for (size_t i = 1; i < n; i++) nodes[i] = MUL(nodes[i - 1], w);
    for (size_t i = 0; i < m; i++) {
        T d = ONE();
        for (size_t j = 0; j < m; j++)
            if (i != j) d = MUL(d, SUB(nodes[i], nodes[j]));
        bary[i] = K(inv)(d);
    }
    memcpy(out, values, m * sizeof(T));
    for (size_t k = m; k < n; k++) {
        T whole = ONE(), acc = K(zero)();
        for (size_t i = 0; i < m; i++) {
            T diff = SUB(nodes[k], nodes[i]);
            whole = MUL(whole, diff);
            acc = ADD(acc, MUL(MUL(bary[i], values[i]), K(inv)(diff)));
        }
        out[k] = MUL(whole, acc);
    }
    free(nodes);
    free(bary);
    return 0;
}

#undef KCAT_
#undef KCAT
#undef K
#undef T
#undef ADD
#undef SUB
#undef MUL
#undef ONE
