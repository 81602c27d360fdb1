/* BLAKE2b (RFC 7693) for the chunk identities of identity.py.
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_IDENTITY_H
#define KBSYNC_KERNEL_IDENTITY_H

/* ------------------------------------------------------------------ BLAKE2b (RFC 7693) */

typedef struct {
    uint64_t h[8];
    uint64_t t[2];
    uint8_t buf[128];
    size_t c;
    size_t outlen;
} B2b;

static const uint64_t B2B_IV[8] = {
    0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL, 0xA54FF53A5F1D36F1ULL,
    0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL, 0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL,
};

static const uint8_t B2B_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t rotr64(uint64_t x, unsigned n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t load64le(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
#endif
}

#define B2B_G(a, b, c, d, x, y)            \
    do {                                   \
        v[a] = v[a] + v[b] + (x);          \
        v[d] = rotr64(v[d] ^ v[a], 32);    \
        v[c] = v[c] + v[d];                \
        v[b] = rotr64(v[b] ^ v[c], 24);    \
        v[a] = v[a] + v[b] + (y);          \
        v[d] = rotr64(v[d] ^ v[a], 16);    \
        v[c] = v[c] + v[d];                \
        v[b] = rotr64(v[b] ^ v[c], 63);    \
    } while (0)

static void b2b_compress(B2b *ctx, const uint8_t *block, int last)
{
    uint64_t v[16], m[16];
    for (int i = 0; i < 8; i++) {
        v[i] = ctx->h[i];
        v[i + 8] = B2B_IV[i];
    }
    v[12] ^= ctx->t[0];
    v[13] ^= ctx->t[1];
    if (last) v[14] = ~v[14];
    for (int i = 0; i < 16; i++) m[i] = load64le(block + 8 * i);
    /* The twelve rounds written out, so the message schedule is constant indices and
       the message words stay in registers. */
#define B2B_ROUND(r)                                                        \
    do {                                                                    \
        B2B_G(0, 4, 8, 12, m[B2B_SIGMA[r][0]], m[B2B_SIGMA[r][1]]);         \
        B2B_G(1, 5, 9, 13, m[B2B_SIGMA[r][2]], m[B2B_SIGMA[r][3]]);         \
        B2B_G(2, 6, 10, 14, m[B2B_SIGMA[r][4]], m[B2B_SIGMA[r][5]]);        \
        B2B_G(3, 7, 11, 15, m[B2B_SIGMA[r][6]], m[B2B_SIGMA[r][7]]);        \
        B2B_G(0, 5, 10, 15, m[B2B_SIGMA[r][8]], m[B2B_SIGMA[r][9]]);        \
        B2B_G(1, 6, 11, 12, m[B2B_SIGMA[r][10]], m[B2B_SIGMA[r][11]]);      \
        B2B_G(2, 7, 8, 13, m[B2B_SIGMA[r][12]], m[B2B_SIGMA[r][13]]);       \
        B2B_G(3, 4, 9, 14, m[B2B_SIGMA[r][14]], m[B2B_SIGMA[r][15]]);       \
    } while (0)
    B2B_ROUND(0);
    B2B_ROUND(1);
    B2B_ROUND(2);
    B2B_ROUND(3);
    B2B_ROUND(4);
    B2B_ROUND(5);
    B2B_ROUND(6);
    B2B_ROUND(7);
    B2B_ROUND(8);
    B2B_ROUND(9);
    B2B_ROUND(10);
    B2B_ROUND(11);
#undef B2B_ROUND
    for (int i = 0; i < 8; i++) ctx->h[i] ^= v[i] ^ v[i + 8];
}

static void b2b_init(B2b *ctx, size_t outlen)
{
    memcpy(ctx->h, B2B_IV, sizeof ctx->h);
    ctx->h[0] ^= 0x01010000ULL ^ (uint64_t)outlen;  /* no key */
    ctx->t[0] = ctx->t[1] = 0;
    ctx->c = 0;
    ctx->outlen = outlen;
}

static inline void b2b_count(B2b *ctx, size_t n)
{
    ctx->t[0] += n;
    if (ctx->t[0] < n) ctx->t[1]++;
}

/* The last block must be compressed with the final flag, so a full buffer is only
   compressed once more input arrives. */
static void b2b_update(B2b *ctx, const uint8_t *in, size_t n)
{
    while (n > 0) {
        if (ctx->c == 128) {
            b2b_count(ctx, 128);
            b2b_compress(ctx, ctx->buf, 0);
            ctx->c = 0;
        }
        if (ctx->c == 0 && n > 128) {
            b2b_count(ctx, 128);
            b2b_compress(ctx, in, 0);
            in += 128;
            n -= 128;
            continue;
        }
        size_t take = 128 - ctx->c;
        if (take > n) take = n;
        memcpy(ctx->buf + ctx->c, in, take);
        ctx->c += take;
        in += take;
        n -= take;
    }
}

static void b2b_final(B2b *ctx, uint8_t *out)
{
    b2b_count(ctx, ctx->c);
    memset(ctx->buf + ctx->c, 0, 128 - ctx->c);
    b2b_compress(ctx, ctx->buf, 1);
    for (size_t i = 0; i < ctx->outlen; i++) out[i] = (uint8_t)(ctx->h[i >> 3] >> (8 * (i & 7)));
}

#endif /* KBSYNC_KERNEL_IDENTITY_H */
