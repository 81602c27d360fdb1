/*
 * kbsync._kernel: the compiled hot path of normalization and chunking.
 *
 * One pass over the UTF-8 bytes of a block finds words, whitespace runs (and whether
 * each is a paragraph mark), character offsets, the canonical text, the per-word
 * 64-bit hash, the estimated token count and the sentence-end flag; the window
 * fingerprints roll over the word hashes as words complete. The TTTD cutter keeps
 * its pending words in C and builds Chunk objects directly (BLAKE2b included), so
 * no Python runs between the bytes and the chunks.
 *
 * Every function here mirrors a NumPy reference in the pure package
 * (normalize.py, chunking/fingerprint.py, tokens.py, stream.py, tttd.py,
 * bytecdc.py); tests/unit/test_kernel_equivalence.py requires identical output.
 * Input text must already be NFC without NUL or surrogates (the Python side checks;
 * a NUL makes these functions decline, a surrogate fails the UTF-8 conversion).
 * The GIL is held throughout: the work per call is one block, and the objects
 * built at the end need it anyway.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_nfc_table.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

/* ------------------------------------------------------------------ growable buffers */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra, Py_ssize_t item)
{
    if (extra < 0 || b->len > PY_SSIZE_T_MAX / item - extra) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->len + extra;
    if (need <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1024;
    while (cap < need) {
        if (cap > PY_SSIZE_T_MAX / 2 / item) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->p, (size_t)cap * (size_t)item);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static void buf_free(Buf *b)
{
    PyMem_Free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------ UTF-8 of a str */

/* The UTF-8 of text: its own data when ASCII, else encoded into tmp (reused from call to
   call). PyUnicode_AsUTF8 would keep a copy on the string for as long as it lives and
   allocate it afresh for every block; two-byte strings, the common non-ASCII case, are
   encoded here eight ASCII characters at a time. Returns NULL with UnicodeEncodeError
   set at a surrogate, or with MemoryError. */
static const char *utf8_of(PyObject *text, Buf *tmp, Py_ssize_t *n)
{
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text)) {
        *n = len;
        return (const char *)PyUnicode_DATA(text);
    }
    int kind = PyUnicode_KIND(text);
    if (kind == PyUnicode_4BYTE_KIND || len > PY_SSIZE_T_MAX / 4) return PyUnicode_AsUTF8AndSize(text, n);
    tmp->len = 0;
    if (buf_reserve(tmp, 3 * len + 16, 1) < 0) return NULL;
    uint8_t *o = (uint8_t *)tmp->p;
    Py_ssize_t w = 0, i = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const uint8_t *u = PyUnicode_1BYTE_DATA(text);
        for (; i < len; i++) {
            uint8_t c = u[i];
            if (c < 0x80) {
                o[w++] = c;
            } else {
                o[w++] = (uint8_t)(0xC0 | (c >> 6));
                o[w++] = (uint8_t)(0x80 | (c & 0x3F));
            }
        }
    } else {
        const Py_UCS2 *u = PyUnicode_2BYTE_DATA(text);
        while (i < len) {
#if defined(__SSE2__)
            if (len - i >= 8) {
                __m128i x = _mm_loadu_si128((const __m128i *)(u + i));
                /* All eight below 0x80: pack them to bytes. */
                if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(x, _mm_set1_epi16((short)0xFF80)),
                                                      _mm_setzero_si128())) == 0xFFFF) {
                    _mm_storel_epi64((__m128i *)(o + w), _mm_packus_epi16(x, x));
                    w += 8;
                    i += 8;
                    continue;
                }
            }
#endif
            Py_UCS2 c = u[i++];
            if (c < 0x80) {
                o[w++] = (uint8_t)c;
            } else if (c < 0x800) {
                o[w++] = (uint8_t)(0xC0 | (c >> 6));
                o[w++] = (uint8_t)(0x80 | (c & 0x3F));
            } else if (c >= 0xD800 && c <= 0xDFFF) {
                return PyUnicode_AsUTF8AndSize(text, n); /* fails with the codec's error */
            } else {
                o[w++] = (uint8_t)(0xE0 | (c >> 12));
                o[w++] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
                o[w++] = (uint8_t)(0x80 | (c & 0x3F));
            }
        }
    }
    o[w] = 0;
    tmp->len = w;
    *n = w;
    return (const char *)o;
}

/* ------------------------------------------------------------------ the scanner */

/* Character classes of the normalizer (normalize.py): word characters, and the
   whitespace kinds that decide between " " and a paragraph mark. */
enum { C_WORD, C_SPACE, C_LINE, C_CR, C_PARA, C_NUL, C_MULTI };

static uint8_t ASCII_CLASS[128];

/* Token estimate classes (tokens.py): letters, digits, other ASCII, non-ASCII bytes. */
enum { T_LETTER, T_DIGIT, T_SYMBOL, T_OTHER };
static uint8_t TOKEN_CLASS[256];
static const int64_t TOKEN_DIV[4] = {8, 3, 3, 3}; /* bytes per token of each class */

#define WORD_BASE 0x100000001B3ULL
#define WINDOW_BASE 0x9E3779B97F4A7C15ULL
#define POW_TABLE 256
static uint64_t WORD_POW[POW_TABLE + 8]; /* 8 more for the 8-byte steps */

static void init_tables(void)
{
    for (int c = 0; c < 128; c++) ASCII_CLASS[c] = C_WORD;
    ASCII_CLASS['\t'] = ASCII_CLASS[' '] = ASCII_CLASS[0x1f] = C_SPACE;
    ASCII_CLASS['\n'] = ASCII_CLASS[0x0b] = C_LINE;
    ASCII_CLASS['\r'] = C_CR;
    ASCII_CLASS[0x0c] = ASCII_CLASS[0x1c] = ASCII_CLASS[0x1d] = ASCII_CLASS[0x1e] = C_PARA;
    ASCII_CLASS[0] = C_NUL;
    for (int c = 0; c < 256; c++) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) TOKEN_CLASS[c] = T_LETTER;
        else if (c >= '0' && c <= '9') TOKEN_CLASS[c] = T_DIGIT;
        else if (c >= 0x80) TOKEN_CLASS[c] = T_OTHER;
        else TOKEN_CLASS[c] = T_SYMBOL;
    }
    uint64_t p = 1;
    for (int i = 0; i < POW_TABLE + 8; i++) {
        WORD_POW[i] = p;
        p *= WORD_BASE;
    }
}

/* The splitmix64 finalizer (fingerprint.mix64). */
static inline uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return z;
}

/* Class of the multi-byte character at s (len bytes) and the ASCII byte that the
   reference's 1:1 translation puts in its place (0 for a word character). */
static int multi_class(const uint8_t *s, int len, uint8_t *translated)
{
    if (len == 2 && s[0] == 0xC2) {
        if (s[1] == 0x85) { *translated = 0x0b; return C_LINE; }
        if (s[1] == 0xA0) { *translated = ' '; return C_SPACE; }
    } else if (len == 3) {
        if (s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80) { *translated = ' '; return C_SPACE; }
        if (s[0] == 0xE2 && s[1] == 0x80) {
            if (s[2] >= 0x80 && s[2] <= 0x8A) { *translated = ' '; return C_SPACE; }
            if (s[2] == 0xA8) { *translated = 0x0b; return C_LINE; }
            if (s[2] == 0xA9) { *translated = 0x1d; return C_PARA; }
            if (s[2] == 0xAF) { *translated = ' '; return C_SPACE; }
        }
        if (s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) { *translated = ' '; return C_SPACE; }
        if (s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80) { *translated = ' '; return C_SPACE; }
    }
    *translated = 0;
    return C_WORD;
}

/* Whether a code point can make text non-NFC (scripts/nfc_table.py). */
static inline int nfc_unstable(const uint8_t *s, int len)
{
    uint32_t cp;
    if (len == 2) cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    else if (len == 3) cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    else cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
              ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    if (cp >= NFC_LIMIT) return 1;
    uint8_t page = NFC_PAGE[cp >> 8];
    return page && ((NFC_BITS[page - 1][(cp & 255) >> 3] >> (cp & 7)) & 1);
}

/* One word as the chunkers see it. Offsets are int64 so huge inputs cannot overflow. */
typedef struct {
    int64_t data_start, data_end;   /* bytes of the translated data (scan() only) */
    int64_t in_start, in_end;       /* characters of the input, plus the caller's base */
    int64_t canon_start, canon_end; /* bytes of the canonical buffer */
    int64_t tchar_start, tchar_end; /* characters of the canonical text */
    uint64_t hash;                  /* mixed word hash; then the mixed window fingerprint */
    int64_t tokens;                 /* estimated tokens; the cutter keeps a running sum */
    uint8_t paragraph, sentence, primary, backup;
} Word;

/* Whitespace seen since the last word: carried from block to block. */
typedef struct {
    int64_t breaks;
    int sep;
    int prev_cr;
} Gap;

typedef struct {
    Buf words;          /* Word items */
    Buf canon;          /* canonical UTF-8 */
    int64_t canon_chars;
    Buf *data;          /* translated UTF-8 of the block, or NULL when not wanted */
    Gap gap;
    int seen_word;      /* a separator precedes the next word */
    int64_t first_paragraph; /* -1, or the paragraph flag forced on the first word */
    const int64_t *in_starts, *in_ends; /* input offsets given by the caller, or NULL */
    Py_ssize_t given;   /* how many of those */
    int check_nfc;      /* stop (-3) at a code point that might not be NFC */
    int plain;          /* words and offsets only: no hashes, tokens or sentence flags */
    int64_t chars;      /* characters the last scan_utf8 call read */
    int sentences;      /* flag sentence ends (else every flag is 0) */
} Scan;

static int sentence_end(const uint8_t *w, int64_t len)
{
    uint8_t last = w[len - 1];
#define IS_END(c) ((c) == '.' || (c) == '!' || (c) == '?')
    if (IS_END(last)) return 1;
    if ((last == '"' || last == '\'' || last == ')' || last == ']') && len >= 2 && IS_END(w[len - 2]))
        return 1;
    /* ” and ’ are E2 80 9D and E2 80 99. */
    if ((last == 0x9D || last == 0x99) && len >= 4 && w[len - 2] == 0x80 && w[len - 3] == 0xE2 &&
        IS_END(w[len - 4]))
        return 1;
#undef IS_END
    return 0;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define KB_SWAR 1
/* Eight input bytes x, of which the first k (1..8) are printable ASCII word bytes at
   offsets wl.. of a word: adds them to the word hash and the token count. */
static inline void ascii_step(uint64_t x, int k, int64_t wl, uint64_t *h, int64_t *tokens,
                              int64_t *run, int *run_cls)
{
    uint64_t xm = k == 8 ? x : x & ((1ULL << (8 * k)) - 1);
    const uint64_t *pw = WORD_POW + wl;
    *h += (xm & 0xFF) * pw[0] + ((xm >> 8) & 0xFF) * pw[1] + ((xm >> 16) & 0xFF) * pw[2] +
          ((xm >> 24) & 0xFF) * pw[3] + ((xm >> 32) & 0xFF) * pw[4] + ((xm >> 40) & 0xFF) * pw[5] +
          ((xm >> 48) & 0xFF) * pw[6] + (xm >> 56) * pw[7];
    /* Token runs by bit masks (the high bit of each byte): letters, digits, other
       symbols. When every run starts here and no digit or symbol run reaches 4 bytes,
       each run is one token. */
    const uint64_t H8 = 0x8080808080808080ULL, ONES = 0x0101010101010101ULL;
    uint64_t valid = k == 8 ? H8 : (((1ULL << (8 * k)) - 1) & H8);
    uint64_t y = x | (0x20 * ONES);
    uint64_t letter = (y + 0x1F * ONES) & ~(y + 0x05 * ONES) & valid;
    uint64_t digit = (x + 0x50 * ONES) & ~(x + 0x46 * ONES) & valid;
    uint64_t symbol = valid & ~letter & ~digit;
    int first = letter & 0x80 ? T_LETTER : digit & 0x80 ? T_DIGIT : T_SYMBOL;
    uint64_t long_run = (digit & (digit << 8) & (digit << 16) & (digit << 24)) |
                        (symbol & (symbol << 8) & (symbol << 16) & (symbol << 24));
    if (first != *run_cls && long_run == 0) {
        uint64_t starts = (letter & ~(letter << 8)) | (digit & ~(digit << 8)) | (symbol & ~(symbol << 8));
        *tokens += (int64_t)(((starts >> 7) * ONES) >> 56); /* bytes flagged */
        int last_start = (63 - __builtin_clzll(starts)) >> 3;
        *run = (k - 1) - last_start;
        *run_cls = TOKEN_CLASS[(uint8_t)(x >> (8 * (k - 1)))];
    } else {
        for (int j = 0; j < k; j++) {
            int tc = TOKEN_CLASS[(uint8_t)(x >> (8 * j))];
            int64_t phase = tc == *run_cls ? *run + 1 : 0;
            phase = phase == TOKEN_DIV[tc] ? 0 : phase;
            *tokens += phase == 0;
            *run = phase;
            *run_cls = tc;
        }
    }
}

/* How many of the eight bytes x start with printable ASCII (0x21..0x7f). */
static inline int ascii_word_bytes(uint64_t x)
{
    uint64_t stop = (((x - 0x2121212121212121ULL) & ~x) | x) & 0x8080808080808080ULL;
    return stop ? __builtin_ctzll(stop) >> 3 : 8;
}

/* The common case without the general loop's dispatch per character: words of
   printable ASCII, each ended by ASCII whitespace, one space between them. At i a
   word starts (a printable ASCII byte). Handles words until one it cannot (a
   non-ASCII or control byte in it, the input's last 8 bytes, a long word), which it
   leaves untouched for the general loop; after the last word it handled, i is at
   the whitespace that ended it. Returns how many words it handled, or -1. */
static Py_ssize_t scan_ascii_words(Scan *sc, const uint8_t *s, Py_ssize_t n, Py_ssize_t *pi,
                                   int64_t *pchars, int64_t char_base)
{
    Py_ssize_t i = *pi, handled = 0;
    int64_t chars = *pchars;
    uint8_t *out = (uint8_t *)sc->canon.p;
    uint8_t *data = sc->data ? (uint8_t *)sc->data->p : NULL;
    for (;;) {
        int paragraph = sc->gap.breaks >= 2 || sc->gap.sep;
        Py_ssize_t c0 = sc->canon.len, cpos = c0, dpos = data ? sc->data->len : 0;
        int sep = sc->seen_word ? (paragraph ? 2 : 1) : 0;
        if (sep == 2) {
            out[cpos++] = '\n';
            out[cpos++] = '\n';
        } else if (sep == 1) {
            out[cpos++] = ' ';
        }
        Py_ssize_t start = cpos, dstart = dpos, j = i;
        uint64_t h = 0;
        int64_t wl = 0, tokens = 0, run = 0;
        int run_cls = -1, k = 8;
        while (k == 8) {
            if (n - j < 8 || wl + 8 > POW_TABLE) goto bail;
            uint64_t x;
            memcpy(&x, s + j, 8);
            k = ascii_word_bytes(x);
            memcpy(out + cpos, &x, 8);
            if (data) memcpy(data + dpos, &x, 8);
            if (k == 0) break;
            if (!sc->plain) ascii_step(x, k, wl, &h, &tokens, &run, &run_cls);
            cpos += k;
            dpos += data ? k : 0;
            wl += k;
            j += k;
        }
        uint8_t c = s[j]; /* j < n: the last step had 8 bytes and k < 8 */
        if (c >= 0x80 || ASCII_CLASS[c] == C_WORD || ASCII_CLASS[c] == C_NUL) goto bail;
        Word *w = (Word *)sc->words.p + sc->words.len++;
        w->paragraph = (uint8_t)paragraph;
        w->primary = w->backup = 0;
        w->in_start = char_base + chars;
        w->in_end = char_base + chars + wl;
        w->data_start = dstart;
        w->data_end = dpos;
        w->canon_start = start;
        w->canon_end = cpos;
        w->tchar_start = sc->canon_chars + sep;
        w->tchar_end = sc->canon_chars + sep + wl;
        w->hash = sc->plain ? 0 : mix64(h ^ (uint64_t)wl);
        w->tokens = tokens > 0 ? tokens : 1;
        w->sentence = sc->plain || !sc->sentences ? 0 : (uint8_t)sentence_end(out + start, wl);
        sc->canon.len = cpos;
        sc->canon_chars += sep + wl;
        if (data) sc->data->len = dpos;
        sc->seen_word = 1;
        sc->gap.breaks = sc->gap.sep = sc->gap.prev_cr = 0;
        chars += wl;
        i = j;
        handled++;
        /* One plain space, then another printable ASCII word: stay here. */
        if (c == ' ' && n - i > 1 && s[i + 1] > 0x20 && s[i + 1] < 0x80) {
            if (data) data[sc->data->len++] = ' ';
            chars++;
            i++;
            continue;
        }
        break;
    bail:
        break;
    }
    *pi = i;
    *pchars = chars;
    return handled;
}
#endif

#if defined(KB_SWAR) && defined(__SSE2__)
#define KB_MASKS 1

/* Bit masks of 64 bytes at p: word bytes (printable ASCII, 0x21..0x7f), the whitespace
   a fast run may cross (space, tab, line feed), and line feeds. */
static inline void ascii_masks(const uint8_t *p, uint64_t *word, uint64_t *gap, uint64_t *lf)
{
    const __m128i space = _mm_set1_epi8(' '), tab = _mm_set1_epi8('\t');
    const __m128i nl = _mm_set1_epi8('\n'), top = _mm_set1_epi8(0x20);
    uint64_t w = 0, g = 0, l = 0;
    for (int k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        __m128i is_nl = _mm_cmpeq_epi8(x, nl);
        __m128i is_gap = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, space), _mm_cmpeq_epi8(x, tab)), is_nl);
        w |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpgt_epi8(x, top)) << (16 * k);
        g |= (uint64_t)(uint16_t)_mm_movemask_epi8(is_gap) << (16 * k);
        l |= (uint64_t)(uint16_t)_mm_movemask_epi8(is_nl) << (16 * k);
    }
    *word = w;
    *gap = g;
    *lf = l;
}

/* scan_ascii_words by bit masks of 64 bytes at a time: word ends and starts come from
   the masks, so finding the next word does not wait on the previous word's loads. At i
   a word starts (a printable ASCII byte). Handles words of printable ASCII ended by
   spaces, tabs and line feeds until anything else (a non-ASCII or control byte, a word
   of 64 bytes or more, a gap of 64 or more, the input's last 72 bytes), leaving i at a
   word start (the gap before it counted in sc->gap) or at the whitespace after the last
   word it handled. Returns how many words it handled. */
static Py_ssize_t scan_ascii_run(Scan *sc, const uint8_t *s, Py_ssize_t n, Py_ssize_t *pi,
                                 int64_t *pchars, int64_t char_base)
{
    Py_ssize_t i = *pi, handled = 0, p = -1;
    int64_t chars = *pchars;
    uint64_t wm = 0, gm = 0, lm = 0;
    uint8_t *out = (uint8_t *)sc->canon.p;
    uint8_t *data = sc->data ? (uint8_t *)sc->data->p : NULL;
    /* The scan state in locals while the loop runs: stores through the byte pointers
       above could alias it, which would make the compiler reload it at every word. */
    Py_ssize_t cpos = sc->canon.len, dpos = data ? sc->data->len : 0;
    int64_t canon_chars = sc->canon_chars;
    Word *w = (Word *)sc->words.p + sc->words.len;
    int breaks = sc->gap.breaks >= 2 || sc->gap.sep ? 2 : 0, seen = sc->seen_word;
    const int plain = sc->plain, sentences = sc->sentences && !sc->plain;
    for (;;) {
        /* The window must hold the word and the byte after it. */
        if (p < 0 || i - p > 63 || ((~wm >> (i - p)) == 0 && p != i)) {
            if (n - i < 72) break;
            p = i;
            ascii_masks(s + p, &wm, &gm, &lm);
        }
        uint64_t rest = ~wm >> (i - p);
        if (rest == 0) break; /* a word of 64 bytes or more */
        int len = __builtin_ctzll(rest);
        Py_ssize_t e = i + len;
        if (!((gm >> (e - p)) & 1)) break; /* not ended by a space, tab or line feed */
        /* The word [i, e). */
        int paragraph = breaks >= 2;
        int sep = seen ? (paragraph ? 2 : 1) : 0;
        if (sep == 2) {
            out[cpos++] = '\n';
            out[cpos++] = '\n';
        } else if (sep == 1) {
            out[cpos++] = ' ';
        }
        Py_ssize_t start = cpos;
        uint64_t h = 0;
        int64_t tokens = 0, run = 0;
        int run_cls = -1;
        for (int q = 0; q < len; q += 8) {
            uint64_t x;
            memcpy(&x, s + i + q, 8); /* i + 72 <= n: never past the input */
            memcpy(out + cpos + q, &x, 8);
            if (data) memcpy(data + dpos + q, &x, 8);
            if (!plain) ascii_step(x, len - q < 8 ? len - q : 8, q, &h, &tokens, &run, &run_cls);
        }
        cpos += len;
        w->paragraph = (uint8_t)paragraph;
        w->primary = w->backup = 0;
        w->in_start = char_base + chars;
        w->in_end = char_base + chars + len;
        w->data_start = dpos;
        w->data_end = data ? dpos + len : 0;
        w->canon_start = start;
        w->canon_end = cpos;
        w->tchar_start = canon_chars + sep;
        w->tchar_end = canon_chars + sep + len;
        w->hash = plain ? 0 : mix64(h ^ (uint64_t)len);
        w->tokens = tokens > 0 ? tokens : 1;
        w->sentence = sentences ? (uint8_t)sentence_end(out + start, len) : 0;
        w++;
        if (data) dpos += len;
        canon_chars += sep + len;
        seen = 1;
        breaks = 0;
        chars += len;
        handled++;
        i = e;
        /* The gap [e, g) to the next word, when the window shows all of it. */
        uint64_t next = wm >> (e - p);
        if (next == 0) break;
        int gap = __builtin_ctzll(next);
        uint64_t span = (1ULL << gap) - 1; /* gap < 64 - (e - p) */
        if (((~gm >> (e - p)) & span) != 0) break; /* other whitespace or control bytes */
        if (data) {
            memcpy(data + dpos, s + e, (size_t)gap);
            dpos += gap;
        }
        /* Line feeds in the gap, counted up to the two that make a paragraph mark (no
           popcount instruction in a portable build). */
        uint64_t feeds = (lm >> (e - p)) & span;
        breaks = feeds == 0 ? 0 : (feeds & (feeds - 1)) == 0 ? 1 : 2;
        chars += gap;
        i = e + gap;
    }
    if (handled) {
        sc->canon.len = cpos;
        if (data) sc->data->len = dpos;
        sc->canon_chars = canon_chars;
        sc->words.len = w - (Word *)sc->words.p;
        sc->seen_word = seen;
        /* At a word start the gap before it is pending; after a word, none is. */
        sc->gap.breaks = breaks;
        sc->gap.sep = sc->gap.prev_cr = 0;
    }
    *pi = i;
    *pchars = chars;
    return handled;
}
#endif

/* The word being read. */
typedef struct {
    Word *w;
    uint64_t h, pw;
    int64_t len, tokens, run;
    int run_cls;
} Open;

static void end_word(Scan *sc, Open *o, int64_t in_end)
{
    Word *w = o->w;
    w->tokens = o->tokens > 0 ? o->tokens : 1;
    w->hash = mix64(o->h ^ (uint64_t)o->len);
    w->in_end = in_end;
    w->data_end = sc->data ? sc->data->len : 0;
    w->canon_end = sc->canon.len;
    w->tchar_end = sc->canon_chars;
    w->sentence = sc->sentences ? (uint8_t)sentence_end((const uint8_t *)sc->canon.p + w->canon_start,
                                                        o->len)
                                : 0;
    sc->gap.breaks = 0;
    sc->gap.sep = 0;
    sc->gap.prev_cr = 0;
    o->w = NULL;
}

/* Scans n bytes of valid UTF-8. Returns 0, -1 with an exception set, -2 when a NUL is
   found, or -3 (only with check_nfc) at a code point that might not be NFC; on -2 and
   -3 the caller drops what was appended and asks the reference (or unicodedata).
   With sc->in_starts set, the input offsets of the words come from there (relative to
   char_base) instead of from the character count. */
static int scan_utf8(Scan *sc, const uint8_t *s, Py_ssize_t n, int64_t char_base)
{
    Open o = {0};
    int64_t chars = 0;
    Py_ssize_t first_word = sc->words.len;
    /* Room for the whole block at once: the canonical text is at most the block's bytes
       plus one per separator ("\n\n" may replace a one-byte separator). */
    if (n > PY_SSIZE_T_MAX / 2 - 16) {
        PyErr_NoMemory();
        return -1;
    }
    if (buf_reserve(&sc->canon, 2 * n + 2 + 8, 1) < 0) return -1; /* + 8: whole-word stores */
    /* Words are separated, so n bytes hold at most n / 2 + 1 of them. */
    if (buf_reserve(&sc->words, n / 2 + 1, sizeof(Word)) < 0) return -1;
    if (sc->data && buf_reserve(sc->data, n + 8, 1) < 0) return -1;
    uint8_t *out = (uint8_t *)sc->canon.p;
    uint8_t *data = sc->data ? (uint8_t *)sc->data->p : NULL;
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        int len = 1, cls;
        uint8_t tr = c;
        if (c < 0x80) {
            cls = ASCII_CLASS[c];
        } else {
            len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (len > n - i) {
                PyErr_SetString(PyExc_ValueError, "truncated UTF-8 sequence");
                return -1;
            }
            cls = multi_class(s + i, len, &tr);
            if (sc->check_nfc && nfc_unstable(s + i, len)) return -3;
        }
        if (cls == C_WORD) {
#ifdef KB_SWAR
            if (o.w == NULL && c > 0x20 && c < 0x80 && sc->first_paragraph < 0 && !sc->in_starts) {
#ifdef KB_MASKS
                Py_ssize_t handled = scan_ascii_run(sc, s, n, &i, &chars, char_base);
                if (handled == 0) handled = scan_ascii_words(sc, s, n, &i, &chars, char_base);
#else
                Py_ssize_t handled = scan_ascii_words(sc, s, n, &i, &chars, char_base);
#endif
                if (handled < 0) return -1;
                if (handled > 0) continue;
            }
#endif
            if (o.w == NULL) {
                Word *w = (Word *)sc->words.p + sc->words.len;
                Py_ssize_t k = sc->words.len++ - first_word;
                w->primary = w->backup = w->sentence = 0;
                if (sc->first_paragraph >= 0) {
                    w->paragraph = (uint8_t)sc->first_paragraph;
                    sc->first_paragraph = -1;
                } else {
                    w->paragraph = sc->gap.breaks >= 2 || sc->gap.sep;
                }
                if (sc->seen_word) {
                    if (w->paragraph) {
                        out[sc->canon.len++] = '\n';
                        out[sc->canon.len++] = '\n';
                        sc->canon_chars += 2;
                    } else {
                        out[sc->canon.len++] = ' ';
                        sc->canon_chars += 1;
                    }
                }
                sc->seen_word = 1;
                if (sc->in_starts) {
                    if (k >= sc->given) {
                        PyErr_SetString(PyExc_ValueError, "more words than given offsets");
                        return -1;
                    }
                    w->in_start = char_base + sc->in_starts[k];
                } else {
                    w->in_start = char_base + chars;
                }
                w->data_start = data ? sc->data->len : 0;
                w->canon_start = sc->canon.len;
                w->tchar_start = sc->canon_chars;
                o.w = w;
                o.h = 0;
                o.pw = WORD_POW[POW_TABLE - 1];
                o.len = o.tokens = o.run = 0;
                o.run_cls = -1;
            }
            /* The rest of the word in a tight loop, with the counters in locals. */
            Py_ssize_t clen = sc->canon.len, dlen = data ? sc->data->len : 0;
            uint64_t h = o.h, pwx = o.pw;
            int64_t wl = o.len, tokens = o.tokens, run = o.run, wchars = 0;
            int run_cls = o.run_cls;
            for (;;) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                /* Eight bytes at a time while they are printable ASCII: the word's end
                   is found by arithmetic, not by a branch per byte that the processor
                   cannot predict (word lengths vary). Bytes past the end are masked. */
                if (len == 1) {
                    while (wl + 8 <= POW_TABLE && n - i >= 8) {
                        uint64_t x;
                        memcpy(&x, s + i, 8);
                        uint64_t stop = (((x - 0x2121212121212121ULL) & ~x) | x) & 0x8080808080808080ULL;
                        int k = stop ? __builtin_ctzll(stop) >> 3 : 8;
                        memcpy(out + clen, &x, 8);
                        if (data) memcpy(data + dlen, &x, 8);
                        if (k == 0) break;
                        if (!sc->plain) ascii_step(x, k, wl, &h, &tokens, &run, &run_cls);
                        clen += k;
                        dlen += data ? k : 0;
                        wl += k;
                        wchars += k;
                        i += k;
                        if (k < 8) break;
                    }
                    /* s[i] now ends the word, or is a character the general path reads. */
                    if (i >= n) break;
                    c = s[i];
                    if (c < 0x80) {
                        if (ASCII_CLASS[c] != C_WORD) break;
                    } else {
                        len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
                        if (len > n - i) {
                            PyErr_SetString(PyExc_ValueError, "truncated UTF-8 sequence");
                            return -1;
                        }
                        if (sc->check_nfc && nfc_unstable(s + i, len)) return -3;
                        if (multi_class(s + i, len, &tr) != C_WORD) break;
                    }
                }
#endif
                for (int j = 0; j < len; j++) {
                    uint8_t b = s[i + j];
                    out[clen++] = b;
                    if (data) data[dlen++] = b;
                    if (wl < POW_TABLE) {
                        h += (uint64_t)b * WORD_POW[wl];
                    } else {
                        pwx *= WORD_BASE; /* long words: base^len by one multiply per byte */
                        h += (uint64_t)b * pwx;
                    }
                    wl++;
                    /* ceil(run / divisor) tokens per run of one class, counted without
                       branches: one token at every divisor-th byte of the run. */
                    int tc = TOKEN_CLASS[b];
                    int64_t phase = tc == run_cls ? run + 1 : 0;
                    phase = phase == TOKEN_DIV[tc] ? 0 : phase;
                    tokens += phase == 0;
                    run = phase;
                    run_cls = tc;
                }
                wchars++;
                i += len;
                if (i >= n) break;
                c = s[i];
                if (c < 0x80) {
                    if (ASCII_CLASS[c] != C_WORD) break;
                    len = 1;
                } else {
                    len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
                    if (len > n - i) {
                        PyErr_SetString(PyExc_ValueError, "truncated UTF-8 sequence");
                        return -1;
                    }
                    if (sc->check_nfc && nfc_unstable(s + i, len)) return -3;
                    if (multi_class(s + i, len, &tr) != C_WORD) break;
                }
            }
            sc->canon.len = clen;
            if (data) sc->data->len = dlen;
            o.h = h;
            o.pw = pwx;
            o.len = wl;
            o.tokens = tokens;
            o.run = run;
            o.run_cls = run_cls;
            chars += wchars;
            sc->canon_chars += wchars;
            continue;
        } else if (cls == C_NUL) {
            return -2;
        } else {
            if (o.w != NULL) {
                Py_ssize_t k = (o.w - (Word *)sc->words.p) - first_word;
                end_word(sc, &o, char_base + (sc->in_starts ? sc->in_ends[k] : chars));
            }
            if (cls == C_SPACE) {
                sc->gap.prev_cr = 0;
            } else if (cls == C_LINE) {
                if (!(c == '\n' && sc->gap.prev_cr)) sc->gap.breaks++;
                sc->gap.prev_cr = 0;
            } else if (cls == C_CR) {
                sc->gap.breaks++;
                sc->gap.prev_cr = 1;
            } else {
                sc->gap.sep = 1;
                sc->gap.prev_cr = 0;
            }
            if (data) data[sc->data->len++] = tr;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            /* Runs of plain spaces (indentation) eight at a time. */
            if (c == ' ') {
                Py_ssize_t run = 0;
                while (n - i - 1 - run >= 8) {
                    uint64_t x;
                    memcpy(&x, s + i + 1 + run, 8);
                    uint64_t other = x ^ 0x2020202020202020ULL;
                    if (other == 0) {
                        run += 8;
                        continue;
                    }
                    run += __builtin_ctzll(other) >> 3;
                    break;
                }
                if (run) {
                    if (data) {
                        memcpy(data + sc->data->len, s + i + 1, (size_t)run);
                        sc->data->len += run;
                    }
                    chars += run;
                    i += run;
                }
            }
#endif
        }
        chars++;
        i += len;
    }
    if (o.w != NULL) {
        Py_ssize_t k = (o.w - (Word *)sc->words.p) - first_word;
        end_word(sc, &o, char_base + (sc->in_starts ? sc->in_ends[k] : chars));
    }
    sc->chars = chars;
    if (sc->in_starts && sc->words.len - first_word != sc->given) {
        PyErr_SetString(PyExc_ValueError, "fewer words than given offsets");
        return -1;
    }
    return 0;
}

/* Rolling window fingerprint over word hashes (fingerprint.window_fingerprints):
   raw(k) = sum over the last `window` hashes of h(k - d) * WINDOW_BASE^d. */
typedef struct {
    uint64_t *ring;
    Py_ssize_t window, pos;
    uint64_t raw, top; /* top = WINDOW_BASE^window */
} Roller;

static int roller_init(Roller *r, Py_ssize_t window)
{
    r->window = window;
    r->pos = 0;
    r->raw = 0;
    r->top = 1; /* WINDOW_BASE^window by squaring: the window may be large */
    uint64_t base = WINDOW_BASE;
    for (Py_ssize_t e = window; e > 0; e >>= 1) {
        if (e & 1) r->top *= base;
        base *= base;
    }
    r->ring = PyMem_Calloc((size_t)window, sizeof(uint64_t));
    if (r->ring == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static inline uint64_t roller_push(Roller *r, uint64_t h)
{
    uint64_t old = r->ring[r->pos];
    r->ring[r->pos] = h;
    if (++r->pos == r->window) r->pos = 0;
    r->raw = r->raw * WINDOW_BASE + h - old * r->top;
    return mix64(r->raw);
}

/* ------------------------------------------------------------------ scan(): a WordScan */


/* Bytes scanned at a time: the Word records (88 bytes a word) of a whole block would
   outgrow the processor's cache before they are read back. */
#define SUB_BLOCK 16384
#define SUB_BLOCK_PROBE 4096

/* The end of the next sub-block of s[i:n]: just before an ASCII whitespace byte (never
   inside a word or a character), or n. */
static Py_ssize_t sub_block_end(const uint8_t *s, Py_ssize_t i, Py_ssize_t n)
{
    if (n - i <= SUB_BLOCK + SUB_BLOCK_PROBE) return n;
    Py_ssize_t stop = i + SUB_BLOCK + SUB_BLOCK_PROBE;
    for (Py_ssize_t j = i + SUB_BLOCK; j < stop; j++) {
        uint8_t c = s[j];
        if (c < 0x80 && ASCII_CLASS[c] != C_WORD && ASCII_CLASS[c] != C_NUL) return j;
    }
    return n;
}

static PyObject *decode_canonical(const char *p, Py_ssize_t n, int ascii)
{
    if (ascii) {
        PyObject *s = PyUnicode_New(n, 127);
        if (s == NULL) return NULL;
        memcpy(PyUnicode_DATA(s), p, (size_t)n);
        return s;
    }
    return PyUnicode_DecodeUTF8(p, n, "strict");
}

/* What scan() returns of each word, by mode: a column is a bytearray of int64 (or uint8
   for flags), filled a sub-block at a time while the records are still in cache. */
enum { SCAN_FULL, SCAN_WORDS, SCAN_CHUNKER, SCAN_COMPARE };

typedef struct {
    size_t offset; /* of the field in Word */
    int wide;      /* int64 (else uint8) */
} Column;

static const Column FULL_COLUMNS[] = {
    {offsetof(Word, data_start), 1}, {offsetof(Word, data_end), 1},
    {offsetof(Word, tchar_start), 1}, {offsetof(Word, tchar_end), 1},
    {offsetof(Word, in_start), 1}, {offsetof(Word, in_end), 1},
    {offsetof(Word, paragraph), 0}, {offsetof(Word, tokens), 1},
    {offsetof(Word, sentence), 0},
};
static const Column *const WORD_COLUMNS = FULL_COLUMNS + 4;   /* input, paragraph */
static const Column *const CHUNKER_COLUMNS = FULL_COLUMNS + 2; /* text, input, ..., sentence */
static const Column COMPARE_COLUMNS[] = {
    {offsetof(Word, tchar_start), 1}, {offsetof(Word, tchar_end), 1},
    {offsetof(Word, canon_start), 1}, {offsetof(Word, canon_end), 1},
    {offsetof(Word, in_start), 1}, {offsetof(Word, in_end), 1},
};
static const int COLUMN_COUNT[] = {9, 3, 7, 6};

PyDoc_STRVAR(scan_doc,
"scan(text, window, history, check_nfc=False, mode=0, sentences=True) -> tuple | 0 | None\n\n"
"The fused scan of one block of clean text (NFC, no NUL, no surrogate): None when it\n"
"has no words or holds a NUL, 0 (with check_nfc) when it holds a code point that might\n"
"not be NFC, else a tuple; arrays are bytearrays of int64 / uint8 / uint64. Mode 0:\n"
"(source, data, byte_starts, byte_ends, text_starts, text_ends, input_starts, input_ends,\n"
"paragraph, tokens, sentence_end, fingerprint, history, trailing_start). Mode 1 (what\n"
"normalize() needs): (source, input_starts, input_ends, paragraph, trailing_start).\n"
"Mode 2 (what the chunkers need): mode 0 without data and byte offsets. Mode 3 (what\n"
"compare() needs): (source, canonical UTF-8, text_starts, text_ends, canonical byte\n"
"starts, canonical byte ends, input_starts, input_ends, trailing_start).\n"
"With window 0 no fingerprints are made (fingerprint and history are empty); without\n"
"sentences every sentence_end flag is 0.");

static PyObject *k_scan(PyObject *self, PyObject *args)
{
    PyObject *text;
    Py_ssize_t window;
    Py_buffer hist;
    int check_nfc = 0, mode = SCAN_FULL, sentences = 1;
    if (!PyArg_ParseTuple(args, "Uny*|pip", &text, &window, &hist, &check_nfc, &mode, &sentences))
        return NULL;
    PyObject *result = NULL, *col[9] = {NULL}, *fp = NULL, *newhist = NULL;
    Buf data = {0}, encoded = {0};
    Scan sc = {0};
    Roller roll = {0};
    if (mode < SCAN_FULL || mode > SCAN_COMPARE) {
        PyErr_SetString(PyExc_ValueError, "mode must be 0, 1, 2 or 3");
        goto done;
    }
    const Column *cols = mode == SCAN_FULL      ? FULL_COLUMNS
                         : mode == SCAN_WORDS   ? WORD_COLUMNS
                         : mode == SCAN_CHUNKER ? CHUNKER_COLUMNS
                                                : COMPARE_COLUMNS;
    int ncols = COLUMN_COUNT[mode];
    sc.data = mode == SCAN_FULL ? &data : NULL;
    sc.plain = mode == SCAN_WORDS || mode == SCAN_COMPARE;
    sc.sentences = !sc.plain && sentences;
    sc.first_paragraph = -1;
    sc.check_nfc = check_nfc;
    Py_ssize_t n;
    const char *utf8 = utf8_of(text, &encoded, &n);
    if (utf8 == NULL) goto done;
    if (window < 0 || (window > 0 && hist.len != (window - 1) * 8)) {
        PyErr_SetString(PyExc_ValueError, "history must hold window - 1 uint64 hashes");
        goto done;
    }
    const uint8_t *s = (const uint8_t *)utf8;
    /* Columns sized for words of three bytes and a space, grown when the text has more
       (sizing them for the most words possible, one per two bytes, costs page faults);
       the canonical text reserved whole, so it is never copied to grow. */
    Py_ssize_t most = n / 4 + 64;
    /* Each piece's words take at most twice its bytes, plus a separator and the
       eight-byte slack of the word stores. */
    if (n > PY_SSIZE_T_MAX / 4 || buf_reserve(&sc.canon, 2 * n + 16 * (n / SUB_BLOCK + 2), 1) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    char *dst[9];
    for (int c = 0; c < ncols; c++) {
        col[c] = PyByteArray_FromStringAndSize(NULL, cols[c].wide ? most * 8 : most);
        if (col[c] == NULL) goto done;
        dst[c] = PyByteArray_AS_STRING(col[c]);
    }
    uint64_t *f = NULL;
    if ((mode == SCAN_FULL || mode == SCAN_CHUNKER) && window > 0) {
        if (roller_init(&roll, window) < 0) goto done;
        const uint64_t *old = (const uint64_t *)hist.buf;
        for (Py_ssize_t i = 0; i < window - 1; i++) roller_push(&roll, old[i]);
        fp = PyByteArray_FromStringAndSize(NULL, most * 8);
        if (fp == NULL) goto done;
        f = (uint64_t *)PyByteArray_AS_STRING(fp);
    }
    Py_ssize_t m = 0, i = 0;
    int64_t chars = 0, last_end = 0;
    while (i < n) {
        Py_ssize_t j = sub_block_end(s, i, n);
        sc.words.len = 0;
        int rc = scan_utf8(&sc, s + i, j - i, chars);
        if (rc == -1) goto done;
        if (rc == -3) {
            result = PyLong_FromLong(0);
            goto done;
        }
        if (rc == -2) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        const Word *w = (const Word *)sc.words.p;
        Py_ssize_t k = sc.words.len;
        if (m + k > most) {
            most = m + k > 2 * most ? m + k : 2 * most;
            for (int c = 0; c < ncols; c++) {
                if (PyByteArray_Resize(col[c], cols[c].wide ? most * 8 : most) < 0) goto done;
                dst[c] = PyByteArray_AS_STRING(col[c]);
            }
            if (f) {
                if (PyByteArray_Resize(fp, most * 8) < 0) goto done;
                f = (uint64_t *)PyByteArray_AS_STRING(fp);
            }
        }
        /* The columns of the two commonest modes written out; the rest from the table. */
        if (mode == SCAN_WORDS) {
            int64_t *c0 = (int64_t *)dst[0] + m, *c1 = (int64_t *)dst[1] + m;
            uint8_t *c2 = (uint8_t *)dst[2] + m;
            for (Py_ssize_t q = 0; q < k; q++) {
                c0[q] = w[q].in_start;
                c1[q] = w[q].in_end;
                c2[q] = w[q].paragraph;
            }
        } else if (mode == SCAN_CHUNKER) {
            int64_t *c0 = (int64_t *)dst[0] + m, *c1 = (int64_t *)dst[1] + m;
            int64_t *c2 = (int64_t *)dst[2] + m, *c3 = (int64_t *)dst[3] + m;
            uint8_t *c4 = (uint8_t *)dst[4] + m, *c6 = (uint8_t *)dst[6] + m;
            int64_t *c5 = (int64_t *)dst[5] + m;
            for (Py_ssize_t q = 0; q < k; q++) {
                c0[q] = w[q].tchar_start;
                c1[q] = w[q].tchar_end;
                c2[q] = w[q].in_start;
                c3[q] = w[q].in_end;
                c4[q] = w[q].paragraph;
                c5[q] = w[q].tokens;
                c6[q] = w[q].sentence;
            }
        } else {
            for (Py_ssize_t q = 0; q < k; q++) {
                const char *rec = (const char *)(w + q);
                for (int c = 0; c < ncols; c++) {
                    if (cols[c].wide) memcpy(dst[c] + 8 * (m + q), rec + cols[c].offset, 8);
                    else dst[c][m + q] = rec[cols[c].offset];
                }
            }
        }
        if (f)
            for (Py_ssize_t q = 0; q < k; q++) f[m + q] = roller_push(&roll, w[q].hash);
        if (k) last_end = w[k - 1].in_end;
        m += k;
        chars += sc.chars;
        i = j;
    }
    if (m == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (int c = 0; c < ncols; c++)
        if (PyByteArray_Resize(col[c], cols[c].wide ? m * 8 : m) < 0) goto done;
    PyObject *source = decode_canonical(sc.canon.p, sc.canon.len, PyUnicode_IS_ASCII(text));
    if (source == NULL) goto done;
    if (mode == SCAN_WORDS) {
        result = Py_BuildValue("(NNNNL)", source, col[0], col[1], col[2], (long long)last_end);
        memset(col, 0, sizeof col);
        goto done;
    }
    if (mode == SCAN_COMPARE) {
        result = Py_BuildValue("(NNNNNNNNL)", source,
                               PyBytes_FromStringAndSize(sc.canon.p, sc.canon.len), col[0],
                               col[1], col[2], col[3], col[4], col[5], (long long)last_end);
        memset(col, 0, sizeof col);
        goto done;
    }
    if (fp != NULL) {
        if (PyByteArray_Resize(fp, m * 8) < 0) {
            Py_DECREF(source);
            goto done;
        }
        newhist = PyByteArray_FromStringAndSize(NULL, (window - 1) * 8);
        if (newhist == NULL) {
            Py_DECREF(source);
            goto done;
        }
        /* The last window - 1 hashes, oldest first: the ring from pos + 1 on. */
        uint64_t *nh = (uint64_t *)PyByteArray_AS_STRING(newhist);
        for (Py_ssize_t q = 0; q < window - 1; q++) nh[q] = roll.ring[(roll.pos + 1 + q) % window];
    } else {
        fp = PyByteArray_FromStringAndSize(NULL, 0);
        newhist = PyByteArray_FromStringAndSize(NULL, 0);
        if (fp == NULL || newhist == NULL) {
            Py_DECREF(source);
            goto done;
        }
    }
    if (mode == SCAN_FULL) {
        result = Py_BuildValue("(NNNNNNNNNNNNNL)", source,
                               PyBytes_FromStringAndSize(data.p, data.len), col[0], col[1],
                               col[2], col[3], col[4], col[5], col[6], col[7], col[8], fp,
                               newhist, (long long)last_end);
    } else {
        result = Py_BuildValue("(NNNNNNNNNNL)", source, col[0], col[1], col[2], col[3], col[4],
                               col[5], col[6], fp, newhist, (long long)last_end);
    }
    memset(col, 0, sizeof col);
    fp = newhist = NULL;
done:
    for (int c = 0; c < 9; c++) Py_XDECREF(col[c]);
    Py_XDECREF(fp);
    Py_XDECREF(newhist);
    PyBuffer_Release(&hist);
    buf_free(&data);
    buf_free(&encoded);
    buf_free(&sc.words);
    buf_free(&sc.canon);
    PyMem_Free(roll.ring);
    return result;
}

/* ------------------------------------------------------------------ chunk construction */

/* What building a Chunk needs: the type, the boundary kinds, the identity prefix. */
#define MAX_KINDS 5
typedef struct {
    PyObject *chunk_type;
    /* PRIMARY, BACKUP, HARD, FINAL (or FORCED for the local strategies), maybe TAIL */
    PyObject *kinds[MAX_KINDS];
    int nkinds;
    B2b prefix;         /* BLAKE2b-256 state after the identity's fixed prefix */
    PyObject *slots[8]; /* the fields' member descriptors, when construction can use them */
} Maker;

static const char *const CHUNK_FIELDS[8] = {"index", "text", "start", "end", "token_count",
                                      "boundary", "identity", "snapped"};

/* model.Chunk is a frozen dataclass with __slots__ and no __post_init__: its __init__
   only stores each field through its member descriptor (object.__setattr__). When the
   type still looks exactly like that, the kernel stores them the same way without
   running Python code; otherwise it calls the type. */
static int find_slots(PyObject *type, const char *const *names, int count, PyObject **slots)
{
    if (!PyType_Check(type) || PyObject_HasAttrString(type, "__post_init__")) return 0;
    PyObject *match = PyObject_GetAttrString(type, "__match_args__");
    if (match == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyTuple_Check(match) && PyTuple_GET_SIZE(match) == count;
    for (int i = 0; ok && i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(match, i);
        ok = PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, names[i]) == 0;
    }
    Py_DECREF(match);
    if (!ok) return 0;
    PyObject *dict = ((PyTypeObject *)type)->tp_dict;
    PyObject *found[8];
    for (int i = 0; i < count; i++) {
        PyObject *d = PyDict_GetItemString(dict, names[i]); /* borrowed */
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return 0;
        found[i] = d;
    }
    for (int i = 0; i < count; i++) slots[i] = Py_NewRef(found[i]);
    return 1;
}

/* An instance of a slotted dataclass from its fields (borrowed), through the slots when
   find_slots found them, else by calling the type. Built through the slots it is not
   tracked by the collector: its fields (str, int, bool, enum members) never lead back
   to it, so it cannot be in a cycle (CPython untracks tuples of atoms the same way). */
static PyObject *new_record(PyObject *type, PyObject *const *slots, PyObject **fields, int count)
{
    PyObject *obj;
    if (slots[0] != NULL) {
        PyTypeObject *t = (PyTypeObject *)type;
        obj = t->tp_alloc(t, 0);
        for (int i = 0; obj != NULL && i < count; i++) {
            if (Py_TYPE(slots[i])->tp_descr_set(slots[i], obj, fields[i]) < 0) Py_CLEAR(obj);
        }
        if (obj != NULL && PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    } else {
        obj = PyObject_Vectorcall(type, fields, (size_t)count, NULL);
    }
    return obj;
}

static void maker_find_slots(Maker *mk)
{
    find_slots(mk->chunk_type, CHUNK_FIELDS, 8, mk->slots);
}

static int maker_init(Maker *mk, PyObject *chunk_type, PyObject *kinds, Py_buffer *prefix)
{
    if (!PyTuple_Check(kinds) || PyTuple_GET_SIZE(kinds) < 4 ||
        PyTuple_GET_SIZE(kinds) > MAX_KINDS) {
        PyErr_SetString(PyExc_TypeError, "kinds must be a tuple of 4 or 5 boundary kinds");
        return -1;
    }
    mk->chunk_type = Py_NewRef(chunk_type);
    mk->nkinds = (int)PyTuple_GET_SIZE(kinds);
    for (int i = 0; i < mk->nkinds; i++) mk->kinds[i] = Py_NewRef(PyTuple_GET_ITEM(kinds, i));
    b2b_init(&mk->prefix, 32);
    b2b_update(&mk->prefix, prefix->buf, (size_t)prefix->len);
    maker_find_slots(mk);
    return 0;
}

static void maker_clear(Maker *mk)
{
    Py_CLEAR(mk->chunk_type);
    for (int i = 0; i < MAX_KINDS; i++) Py_CLEAR(mk->kinds[i]);
    for (int i = 0; i < 8; i++) Py_CLEAR(mk->slots[i]);
}

/* identity.ChunkIdentity: H(prefix, "s", len as 8 bytes big-endian, text). */
static PyObject *identity_hex(const B2b *prefix, const uint8_t *p, Py_ssize_t n)
{
    static const char HEX[] = "0123456789abcdef";
    B2b ctx = *prefix;
    uint8_t head[9], dig[32];
    head[0] = 's';
    uint64_t len = (uint64_t)n;
    for (int i = 0; i < 8; i++) head[8 - i] = (uint8_t)(len >> (8 * i));
    b2b_update(&ctx, head, 9);
    b2b_update(&ctx, p, (size_t)n);
    b2b_final(&ctx, dig);
    PyObject *s = PyUnicode_New(64, 127);
    if (s == NULL) return NULL;
    Py_UCS1 *o = PyUnicode_1BYTE_DATA(s);
    for (int i = 0; i < 32; i++) {
        o[2 * i] = (Py_UCS1)HEX[dig[i] >> 4];
        o[2 * i + 1] = (Py_UCS1)HEX[dig[i] & 15];
    }
    return s;
}

/* Chunk(index, text, start, end, token_count, boundary, identity, snapped); `text` is
   stolen. */
static PyObject *make_chunk(Maker *mk, int64_t index, PyObject *text, const uint8_t *utf8,
                            Py_ssize_t nbytes, int64_t start, int64_t end, int64_t tokens, int kind,
                            int snapped)
{
    PyObject *args[8] = {NULL};
    PyObject *chunk = NULL;
    if (text == NULL) return NULL;
    args[0] = PyLong_FromLongLong(index);
    args[1] = text;
    args[2] = PyLong_FromLongLong(start);
    args[3] = PyLong_FromLongLong(end);
    args[4] = PyLong_FromLongLong(tokens);
    args[5] = Py_NewRef(mk->kinds[kind]);
    args[6] = identity_hex(&mk->prefix, utf8, nbytes);
    args[7] = Py_NewRef(snapped ? Py_True : Py_False);
    for (int i = 0; i < 8; i++)
        if (args[i] == NULL) goto done;
    chunk = new_record(mk->chunk_type, mk->slots, args, 8);
done:
    for (int i = 0; i < 8; i++) Py_XDECREF(args[i]);
    return chunk;
}

/* ------------------------------------------------------------------ the TTTD cutter */

enum { K_PRIMARY, K_BACKUP, K_HARD, K_FINAL };

typedef struct {
    PyObject_HEAD
    Maker mk;
    int64_t min_tokens, max_tokens;
    uint64_t primary_mask, backup_mask;
    int snap;
    int64_t snap_window;
    Roller roll;
    Scan sc;           /* pending words (tokens hold running sums) and canonical text */
    Buf encoded;       /* the UTF-8 of the block being fed */
    int64_t char_base; /* characters of input before the next block */
    int64_t index;     /* index of the next chunk */
    int ascii;         /* every byte of the pending canonical text is ASCII */
    int finished;
    /* The strictly local strategies (LocalCutter): 0 for TTTD, else CUT_LOCAL or CUT_SENTENCES. */
    int local;
    int64_t radius, span, margin; /* local.stream_cuts: r, the forced span, 2 * reach */
    int first;                    /* the pending words start with the input's first */
    Py_ssize_t start;             /* the first pending word no chunk holds yet */
    int64_t tail_above, tail_min, tail_max; /* sentences: tails cut off (0: off) */
} Cutter;

enum { CUT_LOCAL = 1, CUT_SENTENCES = 2 };

static int local_cut(Cutter *c, int ended, PyObject *out);

static void cutter_dealloc(Cutter *c)
{
    maker_clear(&c->mk);
    PyMem_Free(c->roll.ring);
    buf_free(&c->sc.words);
    buf_free(&c->sc.canon);
    buf_free(&c->encoded);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* What every cutter starts with: its chunk maker and window roller, once; sentence ends
   scanned when `sentences`. Returns -1 with an exception set. */
static int cutter_setup(Cutter *c, Py_ssize_t window, PyObject *chunk_type, PyObject *kinds,
                        Py_buffer *prefix, int sentences)
{
    if (c->mk.chunk_type != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a cutter is initialized once");
        return -1;
    }
    if (maker_init(&c->mk, chunk_type, kinds, prefix) < 0) return -1;
    if (roller_init(&c->roll, window) < 0) return -1;
    c->sc.first_paragraph = -1;
    c->sc.sentences = sentences;
    c->ascii = 1;
    return 0;
}

static int cutter_init(Cutter *c, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"window_words", "min_tokens", "max_tokens", "primary_bits", "backup_bits",
                            "snap", "snap_window_words", "chunk_type", "kinds", "prefix", NULL};
    Py_ssize_t window;
    long long mn, mx;
    int pbits, bbits, snap;
    long long snap_window;
    PyObject *chunk_type, *kinds;
    Py_buffer prefix;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nLLiipLOOy*", names, &window, &mn, &mx, &pbits,
                                     &bbits, &snap, &snap_window, &chunk_type, &kinds, &prefix))
        return -1;
    int rc = -1;
    if (window <= 0 || mn <= 0 || mx < mn || pbits <= 0 || pbits > 64 || bbits <= 0 || bbits > 64 ||
        snap_window < 0) {
        PyErr_SetString(PyExc_ValueError, "invalid TTTD parameters");
        goto done;
    }
    /* Only snapping reads sentence ends. */
    if (cutter_setup(c, window, chunk_type, kinds, &prefix, snap) < 0) goto done;
    c->min_tokens = mn;
    c->max_tokens = mx;
    c->primary_mask = pbits == 64 ? ~0ULL : ((1ULL << pbits) - 1);
    c->backup_mask = bbits == 64 ? ~0ULL : ((1ULL << bbits) - 1);
    c->snap = snap;
    c->snap_window = snap_window;
    rc = 0;
done:
    PyBuffer_Release(&prefix);
    return rc;
}

/* Marks the words appended since `from`: fingerprints, candidates, running token sums. */
static void cutter_settle(Cutter *c, Py_ssize_t from)
{
    Word *w = (Word *)c->sc.words.p;
    int64_t cum = from > 0 ? w[from - 1].tokens : 0;
    for (Py_ssize_t i = from; i < c->sc.words.len; i++) {
        uint64_t f = roller_push(&c->roll, w[i].hash);
        w[i].hash = f;
        w[i].primary = (f & c->primary_mask) == 0;
        w[i].backup = (f & c->backup_mask) == 0;
        cum += w[i].tokens;
        w[i].tokens = cum;
    }
}

/* tttd._Snapper.snap over the pending words. */
static Py_ssize_t snap_cut(Cutter *c, Py_ssize_t cut, Py_ssize_t start, int64_t lo, int64_t hi)
{
    const Word *w = (const Word *)c->sc.words.p;
    Py_ssize_t m = c->sc.words.len;
    Py_ssize_t window = c->snap_window < m ? (Py_ssize_t)c->snap_window : m; /* no overflow */
    Py_ssize_t first = cut - window > start ? cut - window : start;
    Py_ssize_t last = cut + window < m - 2 ? cut + window : m - 2;
    for (int pass = 0; pass < 2; pass++) {
        Py_ssize_t best = -1;
        for (Py_ssize_t q = first; q <= last; q++) {
            int is_break = pass == 0 ? w[q + 1].paragraph : w[q].sentence;
            if (!is_break || w[q].tokens < lo || w[q].tokens > hi) continue;
            Py_ssize_t dq = q > cut ? q - cut : cut - q;
            Py_ssize_t db = best > cut ? best - cut : cut - best;
            if (best < 0 || dq <= db) best = q;
        }
        if (best >= 0) return best;
    }
    return cut;
}

/* Appends the chunk of pending words s..cut (kind, snapped) to `out`; -1 on error. */
static int cutter_emit(Cutter *c, Py_ssize_t s, Py_ssize_t cut, int kind, int snapped,
                       PyObject *out)
{
    const Word *w = (const Word *)c->sc.words.p;
    int64_t t0 = s > 0 ? w[s - 1].tokens : 0;
    const char *p = c->sc.canon.p + w[s].canon_start;
    Py_ssize_t nb = (Py_ssize_t)(w[cut].canon_end - w[s].canon_start);
    PyObject *text = decode_canonical(p, nb, c->ascii);
    PyObject *chunk = make_chunk(&c->mk, c->index, text, (const uint8_t *)p, nb, w[s].in_start,
                                 w[cut].in_end, w[cut].tokens - t0, kind, snapped);
    if (chunk == NULL) return -1;
    int rc = PyList_Append(out, chunk);
    Py_DECREF(chunk);
    if (rc < 0) return -1;
    c->index++;
    return 0;
}

/* Drops the first `count` pending words (0 < count < their number): the rest and their
   text move to the front, their running token sums restart. */
static void cutter_drop(Cutter *c, Py_ssize_t count)
{
    Word *w = (Word *)c->sc.words.p;
    Py_ssize_t m = c->sc.words.len;
    int64_t shift = w[count].canon_start, dropped = w[count - 1].tokens;
    memmove(w, w + count, (size_t)(m - count) * sizeof(Word));
    c->sc.words.len = m - count;
    for (Py_ssize_t i = 0; i < m - count; i++) {
        w[i].canon_start -= shift;
        w[i].canon_end -= shift;
        w[i].tokens -= dropped;
    }
    memmove(c->sc.canon.p, c->sc.canon.p + shift, (size_t)(c->sc.canon.len - shift));
    c->sc.canon.len -= shift;
}

/* tttd._cut: emits every chunk that no later input can change into `out`. */
static int cutter_cut(Cutter *c, int ended, PyObject *out)
{
    if (c->local) return local_cut(c, ended, out);
    Word *w = (Word *)c->sc.words.p;
    Py_ssize_t m = c->sc.words.len;
    if (m == 0) return 0;
    int64_t total = w[m - 1].tokens;
    Py_ssize_t s = 0;
    int64_t t0 = 0;
    while (s < m) {
        int64_t lo = t0 + c->min_tokens, hi = t0 + c->max_tokens;
        Py_ssize_t k = s;
        while (k < m && w[k].tokens < lo) k++;
        Py_ssize_t e = k; /* first word past the maximum */
        Py_ssize_t cut = -1;
        int kind = K_PRIMARY;
        while (e < m && w[e].tokens <= hi) {
            if (cut < 0 && w[e].primary) cut = e;
            e++;
        }
        if (cut < 0) {
            if (total <= hi) {
                if (!ended) break; /* a primary or the end may still come within the maximum */
                cut = m - 1;
                kind = K_FINAL;
            } else {
                for (Py_ssize_t j = e - 1; j >= k; j--) {
                    if (w[j].backup) {
                        cut = j;
                        kind = K_BACKUP;
                        break;
                    }
                }
                if (cut < 0) {
                    cut = e - 1 > s ? e - 1 : s;
                    kind = K_HARD;
                }
            }
        }
        int snapped = 0;
        if (c->snap && kind != K_FINAL) {
            if (!ended && (c->snap_window >= m || cut + c->snap_window + 1 >= m)) break;
            Py_ssize_t target = snap_cut(c, cut, s, lo, hi);
            snapped = target != cut;
            cut = target;
        }
        if (cutter_emit(c, s, cut, kind, snapped, out) < 0) return -1;
        s = cut + 1;
        t0 = w[cut].tokens;
    }
    /* Drop the emitted words: shift the rest and their text to the front. */
    if (s >= m) {
        c->sc.words.len = 0;
        c->sc.canon.len = 0;
        c->sc.seen_word = 0;
        c->ascii = 1;
    } else if (s > 0) {
        cutter_drop(c, s);
    }
    return 0;
}

static int check_open(Cutter *c)
{
    if (c->mk.chunk_type == NULL || c->finished) {
        PyErr_SetString(PyExc_RuntimeError, "the cutter is not initialized or already finished");
        return -1;
    }
    return 0;
}

/* Whether valid UTF-8 holds a code point that might not be NFC (ASCII skipped 8 bytes at
   a time). */
static int any_nfc_unstable(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t x;
            memcpy(&x, s + i, 8);
            if ((x & 0x8080808080808080ULL) == 0) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (len > n - i) return 0; /* the scan reports the truncation */
        if (nfc_unstable(s + i, len)) return 1;
        i += len;
    }
    return 0;
}

/* Appends a scanned block and cuts; restores the pending words when the scan declines.
   A block read in sub-blocks (no input offsets given) is cut after each of them: the
   chunks are the same, as TTTD's cuts do not depend on where the input was split. */
static PyObject *cutter_feed_bytes(Cutter *c, const uint8_t *s, Py_ssize_t n, int ascii,
                                   Py_ssize_t block_chars, int first_paragraph, int check_nfc)
{
    Py_ssize_t before = c->sc.words.len, canon_before = c->sc.canon.len;
    int64_t chars_before = c->sc.canon_chars;
    Gap gap_before = c->sc.gap;
    int seen_before = c->sc.seen_word;
    int split = c->sc.in_starts == NULL && n > SUB_BLOCK + SUB_BLOCK_PROBE;
    if (split && check_nfc && !ascii) {
        if (any_nfc_unstable(s, n)) return PyLong_FromLong(0);
        check_nfc = 0;
    }
    c->sc.seen_word = before > 0;
    c->sc.first_paragraph = first_paragraph;
    c->sc.check_nfc = check_nfc;
    PyObject *out = NULL;
    if (split) {
        out = PyList_New(0);
        if (out == NULL) return NULL;
    }
    int64_t base = c->char_base;
    Py_ssize_t i = 0;
    int rc = 0;
    do {
        Py_ssize_t j = split ? sub_block_end(s, i, n) : n;
        Py_ssize_t from = c->sc.words.len;
        rc = scan_utf8(&c->sc, s + i, j - i, base);
        if (rc < 0) break;
        base += c->sc.chars;
        i = j;
        if (i < n) {
            cutter_settle(c, from);
            if (!ascii) c->ascii = 0;
            /* The local strategies cut once per block, as local.stream_cuts does. */
            if (!c->local && cutter_cut(c, 0, out) < 0) {
                rc = -1;
                break;
            }
        } else {
            before = from;
        }
    } while (i < n);
    c->sc.first_paragraph = -1;
    c->sc.check_nfc = 0;
    c->sc.in_starts = c->sc.in_ends = NULL;
    if (rc < 0) {
        if (split) {
            /* Chunks may have been emitted from this block already: no way back. */
            Py_DECREF(out);
            c->finished = 1;
            if (rc == -1) return NULL;
            PyErr_SetString(PyExc_ValueError, "a block declined after it was cut");
            return NULL;
        }
        c->sc.words.len = before;
        c->sc.canon.len = canon_before;
        c->sc.canon_chars = chars_before;
        c->sc.gap = gap_before;
        c->sc.seen_word = seen_before;
        if (rc == -2) Py_RETURN_NONE;
        if (rc == -3) return PyLong_FromLong(0);
        return NULL;
    }
    if (!ascii) c->ascii = 0;
    c->char_base += block_chars;
    cutter_settle(c, before);
    if (out == NULL) {
        out = PyList_New(0);
        if (out == NULL) return NULL;
    }
    if (cutter_cut(c, 0, out) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

PyDoc_STRVAR(feed_doc,
"feed(text, first_paragraph=-1, check_nfc=False) -> list[Chunk] | 0 | None\n\n"
"Scan one block of clean text (a block of normalize.iter_blocks) and return the chunks\n"
"that became final; with nothing changed, None when the block holds a NUL or a\n"
"surrogate, and 0 (with check_nfc) when it holds a code point that might not be NFC.\n"
"first_paragraph (0 or 1) overrides the paragraph mark of the block's first word.");

static PyObject *cutter_feed(Cutter *c, PyObject *args)
{
    PyObject *text;
    int first_paragraph = -1, check_nfc = 0;
    if (!PyArg_ParseTuple(args, "U|ip", &text, &first_paragraph, &check_nfc)) return NULL;
    if (check_open(c) < 0) return NULL;
    Py_ssize_t n;
    const char *utf8 = utf8_of(text, &c->encoded, &n);
    if (utf8 == NULL) {
        /* A surrogate: the reference path cleans it. */
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        return NULL;
    }
    if (memchr(utf8, 0, (size_t)n) != NULL) Py_RETURN_NONE;
    return cutter_feed_bytes(c, (const uint8_t *)utf8, n, PyUnicode_IS_ASCII(text),
                             PyUnicode_GET_LENGTH(text), first_paragraph, check_nfc);
}

PyDoc_STRVAR(feed_scanned_doc,
"feed_scanned(source, input_starts, input_ends, first_paragraph, block_chars) -> list[Chunk]\n\n"
"A block the reference cleaned word by word: its canonical source, each word's input\n"
"offsets within the block (int64 buffers) and the block's length in characters.");

static PyObject *cutter_feed_scanned(Cutter *c, PyObject *args)
{
    PyObject *source;
    Py_buffer starts, ends;
    int first_paragraph;
    Py_ssize_t block_chars;
    if (!PyArg_ParseTuple(args, "Uy*y*pn", &source, &starts, &ends, &first_paragraph, &block_chars))
        return NULL;
    PyObject *result = NULL;
    if (check_open(c) < 0) goto done;
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(source, &n);
    if (utf8 == NULL) goto done;
    Py_ssize_t given = starts.len / 8;
    if (starts.len != ends.len || starts.len % 8) {
        PyErr_SetString(PyExc_ValueError, "input offsets must be two int64 buffers of one length");
        goto done;
    }
    c->sc.in_starts = starts.buf;
    c->sc.in_ends = ends.buf;
    c->sc.given = given;
    result = cutter_feed_bytes(c, (const uint8_t *)utf8, n, PyUnicode_IS_ASCII(source), block_chars,
                               given ? first_paragraph : -1, 0);
    if (result == NULL || result == Py_None) {
        if (result == Py_None) {
            Py_CLEAR(result);
            PyErr_SetString(PyExc_ValueError, "a canonical source holds no NUL");
        }
        goto done;
    }
done:
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

PyDoc_STRVAR(finish_doc, "finish() -> list[Chunk]\n\nThe chunks of what remains (the input ended).");

static PyObject *cutter_finish(Cutter *c, PyObject *Py_UNUSED(ignored))
{
    if (check_open(c) < 0) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    if (cutter_cut(c, 1, out) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    c->finished = 1;
    return out;
}

static PyMethodDef cutter_methods[] = {
    {"feed", (PyCFunction)cutter_feed, METH_VARARGS, feed_doc},
    {"feed_scanned", (PyCFunction)cutter_feed_scanned, METH_VARARGS, feed_scanned_doc},
    {"finish", (PyCFunction)cutter_finish, METH_NOARGS, finish_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CutterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kbsync._kernel.TTTDCutter",
    .tp_basicsize = sizeof(Cutter),
    .tp_dealloc = (destructor)cutter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("TTTDCutter(window_words, min_tokens, max_tokens, primary_bits, backup_bits, "
                        "snap, snap_window_words, chunk_type, kinds, prefix)\n\n"
                        "Streaming TTTD (chunking/tttd.py) from text blocks to Chunk objects."),
    .tp_methods = cutter_methods,
    .tp_init = (initproc)cutter_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------ chunks from cut positions */

/* The byte offset in UTF-8 u (n bytes) of character `target`, walking on from character
   *wc at byte *wb (target >= *wc); ASCII eight bytes at a time. */
static Py_ssize_t utf8_walk(const char *u, Py_ssize_t n, Py_ssize_t *wc, Py_ssize_t *wb,
                            Py_ssize_t target)
{
    Py_ssize_t c = *wc, b = *wb;
    while (c < target && b < n) {
        if (target - c >= 8 && n - b >= 8) {
            uint64_t x;
            memcpy(&x, u + b, 8);
            if ((x & 0x8080808080808080ULL) == 0) {
                c += 8;
                b += 8;
                continue;
            }
        }
        uint8_t lead = (uint8_t)u[b];
        b += lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        c++;
    }
    *wc = c;
    *wb = b < n ? b : n;
    return *wb;
}

PyDoc_STRVAR(build_chunks_doc,
"build_chunks(source, text_starts, text_ends, input_starts, input_ends, cum, cuts, kinds,\n"
"             kind_objects, chunk_type, prefix, start=0, index=0) -> list[Chunk]\n\n"
"The chunks between consecutive cuts (local.local_chunks), the first from word start,\n"
"numbered from index: arrays are int64 buffers, kinds a uint8 buffer indexing\n"
"kind_objects; text offsets are characters of source, cum running token sums.");

static PyObject *k_build_chunks(PyObject *self, PyObject *args)
{
    PyObject *source, *kind_objects, *chunk_type;
    Py_buffer b[8];
    Py_buffer prefix;
    Py_ssize_t first_word = 0;
    long long first_index = 0;
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "Uy*y*y*y*y*y*y*OOy*|nL", &source, &b[0], &b[1], &b[2], &b[3],
                          &b[4], &b[5], &b[6], &kind_objects, &chunk_type, &prefix, &first_word,
                          &first_index))
        return NULL;
    PyObject *out = NULL;
    Maker mk = {0};
    Buf encoded = {0};
    Py_ssize_t words = b[0].len / 8, ncuts = b[5].len / 8;
    const int64_t *ts = b[0].buf, *te = b[1].buf, *is = b[2].buf, *ie = b[3].buf, *cum = b[4].buf;
    const int64_t *cuts = b[5].buf;
    const uint8_t *kinds = b[6].buf;
    for (int i = 0; i < 5; i++) {
        if (b[i].len != words * 8 || b[i].len % 8) {
            PyErr_SetString(PyExc_ValueError, "word arrays must be int64 of one length");
            goto done;
        }
    }
    if (b[5].len % 8 || b[6].len != ncuts) {
        PyErr_SetString(PyExc_ValueError, "cuts (int64) and kinds (uint8) must have one length");
        goto done;
    }
    if (maker_init(&mk, chunk_type, kind_objects, &prefix) < 0) goto done;
    Py_ssize_t length = PyUnicode_GET_LENGTH(source);
    int ascii = PyUnicode_IS_ASCII(source);
    Py_ssize_t slen = 0, wc = 0, wb = 0; /* the walk: characters and bytes of source read */
    const char *su = ascii ? NULL : utf8_of(source, &encoded, &slen);
    if (!ascii && su == NULL) goto done;
    out = PyList_New(0);
    if (out == NULL) goto done;
    if (first_word < 0 || (first_word > 0 && first_word > words)) {
        PyErr_SetString(PyExc_ValueError, "start outside the words");
        Py_CLEAR(out);
        goto done;
    }
    Py_ssize_t start = first_word;
    int64_t t0 = first_word > 0 ? cum[first_word - 1] : 0;
    for (Py_ssize_t j = 0; j < ncuts; j++) {
        int64_t cut = cuts[j];
        if (cut < start || cut >= words || kinds[j] >= mk.nkinds || ts[start] < 0 ||
            te[cut] > length ||
            ts[start] > te[cut]) {
            PyErr_SetString(PyExc_ValueError, "cut positions out of order or out of range");
            Py_CLEAR(out);
            goto done;
        }
        PyObject *text = PyUnicode_Substring(source, ts[start], te[cut]);
        if (text == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        const char *p;
        Py_ssize_t nb;
        if (ascii) {
            p = PyUnicode_DATA(text);
            nb = PyUnicode_GET_LENGTH(text);
        } else {
            /* The chunk's UTF-8 is a slice of the source's: walk on to its bytes (the
               chunks come in order) rather than encode every chunk again. */
            Py_ssize_t from = utf8_walk(su, slen, &wc, &wb, ts[start]);
            Py_ssize_t to = utf8_walk(su, slen, &wc, &wb, te[cut]);
            p = su + from;
            nb = to - from;
        }
        PyObject *chunk = make_chunk(&mk, first_index + j, text, (const uint8_t *)p, nb, is[start],
                                     ie[cut], cum[cut] - t0, kinds[j], 0);
        if (chunk == NULL || PyList_Append(out, chunk) < 0) {
            Py_XDECREF(chunk);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(chunk);
        t0 = cum[cut];
        start = (Py_ssize_t)cut + 1;
    }
done:
    maker_clear(&mk);
    buf_free(&encoded);
    for (int i = 0; i < 7; i++) PyBuffer_Release(&b[i]);
    PyBuffer_Release(&prefix);
    return out;
}

/* ------------------------------------------------------------------ strictly local cuts */

#define SECOND_HASH 0xD6E8FEB86659FD93ULL
#define RANK_BITS 3

/* Which of the m positions (values v, running token sums cum) are strictly below every
   other position within radius - 1 tokens (local.strict_local_minima): a sliding minimum
   from each side, by a deque of positions with increasing values. */
static void strict_minima(const uint64_t *v, const int64_t *cum, Py_ssize_t m, int64_t radius,
                          Py_ssize_t *dq, uint8_t *out)
{
    Py_ssize_t head = 0, tail = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        while (head < tail && cum[k] - cum[dq[head]] >= radius) head++;
        out[k] = head == tail || v[k] < v[dq[head]];
        while (head < tail && v[dq[tail - 1]] >= v[k]) tail--;
        dq[tail++] = k;
    }
    head = tail = 0;
    for (Py_ssize_t k = m - 1; k >= 0; k--) {
        while (head < tail && cum[dq[head]] - cum[k] >= radius) head++;
        if (head < tail && v[k] >= v[dq[head]]) out[k] = 0;
        while (head < tail && v[dq[tail - 1]] >= v[k]) tail--;
        dq[tail++] = k;
    }
}

/* local._ranked: rank first, then the top 61 bits of the value. */
static inline uint64_t ranked(uint8_t rank, uint64_t value)
{
    return ((uint64_t)rank << (64 - RANK_BITS)) | (value >> RANK_BITS);
}

enum { L_PRIMARY = 1, L_HARD = 2, L_FORCED = 4, L_FINAL = 8 };

PyDoc_STRVAR(local_cuts_doc,
"local_cuts(fingerprint, tokens, radius, span, ranks, eligible_below, first, last)\n"
"    -> (cuts, kinds)\n\n"
"local.select_cuts: the cut positions (int64) and their kinds (uint8: 0 primary, 1 hard,\n"
"2 forced, 3 final) of a buffer of words; fingerprint is uint64, tokens int64, ranks\n"
"uint8 (empty for the plain local rules).");

/* local.select_cut_codes over n words (fingerprints fp, tokens per word, ranks or NULL):
   the flags (L_PRIMARY, L_HARD, L_FORCED, L_FINAL; 0 for no cut) of every position, into
   flags (n bytes). Returns -1 with an exception set. */
static int local_flags(const uint64_t *fp, const int64_t *tokens, Py_ssize_t n, int64_t radius,
                       int64_t span, const uint8_t *ranks, int eligible_below, int first,
                       int last, uint8_t *flags)
{
    int rc = -1;
    size_t un = (size_t)(n > 0 ? n : 1);
    int64_t *cum = PyMem_Malloc(un * sizeof *cum), *sub = NULL;
    uint64_t *f2 = PyMem_Malloc(un * sizeof *f2), *keys = PyMem_Malloc(un * sizeof *keys);
    Py_ssize_t *dq = PyMem_Malloc(un * sizeof *dq), *pos = PyMem_Malloc(un * sizeof *pos);
    uint8_t *won = PyMem_Malloc(un);
    if (!cum || !f2 || !keys || !dq || !pos || !won) {
        PyErr_NoMemory();
        goto done;
    }
    memset(flags, 0, (size_t)n);
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (tokens[k] <= 0) {
            PyErr_SetString(PyExc_ValueError, "every word has at least one token");
            goto done;
        }
        total += tokens[k];
        cum[k] = total;
        uint64_t g = mix64(fp[k] ^ SECOND_HASH);
        f2[k] = ranks ? ranked(ranks[k], g) : g;
    }
    /* Primaries: strict minima of f1 (or, with ranks, of the ranked f1 among the
       eligible positions only). */
    if (ranks == NULL) {
        strict_minima(fp, cum, n, radius, dq, won);
        for (Py_ssize_t k = 0; k < n; k++) flags[k] = won[k] ? L_PRIMARY : 0;
    } else {
        Py_ssize_t m = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (ranks[k] >= eligible_below) continue;
            if (first && cum[k] < radius) continue;
            if (last && total - cum[k] < radius) continue;
            pos[m] = k;
            keys[m] = ranked(ranks[k], fp[k]);
            m++;
        }
        /* The eligible positions' token sums. */
        sub = PyMem_Malloc((size_t)(m > 0 ? m : 1) * sizeof *sub);
        if (sub == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t e = 0; e < m; e++) sub[e] = cum[pos[e]];
        strict_minima(keys, sub, m, radius, dq, won);
        for (Py_ssize_t e = 0; e < m; e++)
            if (won[e]) flags[pos[e]] = L_PRIMARY;
    }
    /* Hard cuts on both sides of an over-long word; a final cut unless the last
       position is already an anchor. */
    for (Py_ssize_t k = 0; k < n; k++) {
        int giant = tokens[k] > span || (k + 1 < n && tokens[k + 1] > span);
        if (giant && !(flags[k] & L_PRIMARY)) flags[k] |= L_HARD;
    }
    if (n > 0 && !flags[n - 1]) flags[n - 1] = L_FINAL;
    /* Forced picks: every window W(m) of span tokens between two anchors that holds
       neither gets its f2 minimum (the latest on ties), by a sliding minimum. */
    if (span > 0) {
        Py_ssize_t prev = -1;
        for (Py_ssize_t a = 0; a < n; a++) {
            if (!(flags[a] & (L_PRIMARY | L_HARD | L_FINAL))) continue;
            int64_t t_prev = prev >= 0 ? cum[prev] : 0;
            if (cum[a] - t_prev > span) {
                Py_ssize_t head = 0, tail = 0, next = prev + 1, end = prev; /* next to push */
                for (Py_ssize_t m = prev + 1; m < a; m++) {
                    int64_t base = m > 0 ? cum[m - 1] : 0;
                    if (cum[a] - base <= span) break; /* this and later windows hold a */
                    while (end + 1 < n && cum[end + 1] <= base + span) end++;
                    if (end < m) continue;
                    while (next <= end) {
                        while (head < tail && f2[dq[tail - 1]] >= f2[next]) tail--;
                        dq[tail++] = next++;
                    }
                    while (dq[head] < m) head++;
                    flags[dq[head]] |= L_FORCED;
                }
            }
            prev = a;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (flags[k] & (L_PRIMARY | L_HARD | L_FINAL)) flags[k] &= (uint8_t)~L_FORCED;
    rc = 0;
done:
    PyMem_Free(cum);
    PyMem_Free(sub);
    PyMem_Free(f2);
    PyMem_Free(keys);
    PyMem_Free(dq);
    PyMem_Free(pos);
    PyMem_Free(won);
    return rc;
}

/* The kind code (local.KINDS: 0 primary, 1 hard, 2 forced, 3 final) of a cut's flags. */
static inline uint8_t local_kind(uint8_t f)
{
    return f & L_PRIMARY ? 0 : f & L_HARD ? 1 : f & L_FORCED ? 2 : 3;
}

static PyObject *k_local_cuts(PyObject *self, PyObject *args)
{
    Py_buffer fb, tb, rb;
    long long radius, span;
    int eligible_below, first, last;
    if (!PyArg_ParseTuple(args, "y*y*LLy*ipp", &fb, &tb, &radius, &span, &rb, &eligible_below,
                          &first, &last))
        return NULL;
    PyObject *result = NULL, *cuts_out = NULL, *kinds_out = NULL;
    uint8_t *flags = NULL;
    Py_ssize_t n = tb.len / 8;
    const uint8_t *ranks = rb.len ? rb.buf : NULL;
    if (tb.len % 8 || fb.len != tb.len || (ranks && rb.len != n) || radius <= 0) {
        PyErr_SetString(PyExc_ValueError, "fingerprint (uint64), tokens (int64) and ranks "
                                          "(uint8) must have one length; radius positive");
        goto done;
    }
    flags = PyMem_Malloc((size_t)(n > 0 ? n : 1));
    if (flags == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (local_flags(fb.buf, tb.buf, n, radius, span, ranks, eligible_below, first, last,
                    flags) < 0)
        goto done;
    Py_ssize_t count = 0;
    for (Py_ssize_t k = 0; k < n; k++) count += flags[k] != 0;
    cuts_out = PyByteArray_FromStringAndSize(NULL, count * 8);
    kinds_out = PyByteArray_FromStringAndSize(NULL, count);
    if (cuts_out == NULL || kinds_out == NULL) goto done;
    int64_t *co = (int64_t *)PyByteArray_AS_STRING(cuts_out);
    uint8_t *ko = (uint8_t *)PyByteArray_AS_STRING(kinds_out);
    Py_ssize_t c = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (!flags[k]) continue;
        co[c] = k;
        ko[c] = local_kind(flags[k]);
        c++;
    }
    result = PyTuple_Pack(2, cuts_out, kinds_out);
done:
    Py_XDECREF(cuts_out);
    Py_XDECREF(kinds_out);
    PyMem_Free(flags);
    PyBuffer_Release(&fb);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&rb);
    return result;
}

/* ------------------------------------------------------------------ the local cutters */

/* sentences.ranks: the rank of the position after each pending word. */
enum { R_HEADING_BREAK, R_PARAGRAPH_END, R_BARE_PARAGRAPH_END, R_SENTENCE_END, R_WORD };

static int heading_mark(const Cutter *c, const Word *w)
{
    int64_t len = w->canon_end - w->canon_start;
    if (len < 1 || len > 6) return 0;
    const char *p = c->sc.canon.p + w->canon_start;
    for (int64_t i = 0; i < len; i++)
        if (p[i] != '#') return 0;
    return 1;
}

static void sentence_ranks(const Cutter *c, const Word *w, Py_ssize_t m, uint8_t *out)
{
    for (Py_ssize_t k = 0; k < m; k++) {
        uint8_t r = w[k].sentence ? R_SENTENCE_END : R_WORD;
        if (k + 1 < m && w[k + 1].paragraph) {
            r = heading_mark(c, &w[k + 1]) ? R_HEADING_BREAK
                : w[k].sentence           ? R_PARAGRAPH_END
                                          : R_BARE_PARAGRAPH_END;
        }
        out[k] = r;
    }
}

/* sentences._tail_cut: the last word before the tail of the chunk of words s to cut, when
   it is long and ends a paragraph; else -1. */
enum { KIND_TAIL = 4 };

static Py_ssize_t tail_cut(const Cutter *c, const Word *w, Py_ssize_t m, Py_ssize_t s,
                           Py_ssize_t cut, int ended)
{
    int64_t before = s > 0 ? w[s - 1].tokens : 0, end = w[cut].tokens;
    if (end - before <= c->tail_above) return -1;
    if (!(cut + 1 < m ? w[cut + 1].paragraph : ended)) return -1;
    for (Py_ssize_t k = cut - 1; k >= s; k--) {
        if (end - w[k].tokens < c->tail_min || !(w[k].sentence || w[k + 1].paragraph)) continue;
        if (end - w[k].tokens > c->tail_max || w[k].tokens - before < c->radius) return -1;
        return k;
    }
    return -1;
}

/* local.stream_cuts on the pending words: emits every chunk no later word can move into
   `out`, then drops the words no later decision reads (w[i].tokens are running sums). */
static int local_cut(Cutter *c, int ended, PyObject *out)
{
    Word *w = (Word *)c->sc.words.p;
    Py_ssize_t m = c->sc.words.len;
    if (m == 0 || (!ended && m < 3)) return 0;
    int64_t limit = ended ? 0 : w[m - 3].tokens - c->margin;
    if (!ended && limit <= 0) return 0;
    int rc = -1;
    size_t um = (size_t)m;
    uint64_t *fp = PyMem_Malloc(um * sizeof *fp);
    int64_t *tokens = PyMem_Malloc(um * sizeof *tokens);
    uint8_t *ranks = c->local == CUT_SENTENCES ? PyMem_Malloc(um) : NULL, *flags = PyMem_Malloc(um);
    if (!fp || !tokens || !flags || (c->local == CUT_SENTENCES && !ranks)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < m; k++) {
        fp[k] = w[k].hash;
        tokens[k] = w[k].tokens - (k > 0 ? w[k - 1].tokens : 0);
    }
    if (ranks) sentence_ranks(c, w, m, ranks);
    if (local_flags(fp, tokens, m, c->radius, c->span, ranks, R_WORD, c->first, ended,
                    flags) < 0)
        goto done;
    Py_ssize_t s = c->start;
    for (Py_ssize_t cut = s; cut < m; cut++) {
        if (!flags[cut]) continue;
        if (!ended && w[cut].tokens >= limit) break;
        Py_ssize_t tail = c->tail_above ? tail_cut(c, w, m, s, cut, ended) : -1;
        if (tail >= 0) {
            if (cutter_emit(c, s, tail, KIND_TAIL, 0, out) < 0) goto done;
            s = tail + 1;
        }
        if (cutter_emit(c, s, cut, local_kind(flags[cut]), 0, out) < 0) goto done;
        s = cut + 1;
    }
    c->start = s;
    if (!ended) {
        /* Keep the words whose start lies less than the margin before the first
           undecided word, and the one before them (searchsorted, side="right", - 1). */
        int64_t floor = (s > 0 ? w[s - 1].tokens : 0) - c->margin;
        Py_ssize_t keep = 0;
        while (keep < m && (keep > 0 ? w[keep - 1].tokens : 0) <= floor) keep++;
        keep--;
        if (keep > 0) {
            cutter_drop(c, keep);
            c->start -= keep;
            c->first = 0;
        }
    }
    rc = 0;
done:
    PyMem_Free(fp);
    PyMem_Free(tokens);
    PyMem_Free(ranks);
    PyMem_Free(flags);
    return rc;
}

static int local_init(Cutter *c, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"window_words", "radius", "span", "reach", "sentences", "chunk_type",
                            "kinds", "prefix", "tail_above", "tail_min", "tail_max", NULL};
    Py_ssize_t window;
    long long radius, span, reach, tail_above = 0, tail_min = 0, tail_max = 0;
    int sentences;
    PyObject *chunk_type, *kinds;
    Py_buffer prefix;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nLLLpOOy*|LLL", names, &window, &radius, &span,
                                     &reach, &sentences, &chunk_type, &kinds, &prefix,
                                     &tail_above, &tail_min, &tail_max))
        return -1;
    int rc = -1;
    if (window <= 0 || radius <= 0 || span < 0 || reach <= 0 || reach > INT64_MAX / 4 ||
        tail_above < 0 || (tail_above && (!sentences || tail_min <= 0 || tail_max < tail_min ||
                                          !PyTuple_Check(kinds) ||
                                          PyTuple_GET_SIZE(kinds) <= KIND_TAIL))) {
        PyErr_SetString(PyExc_ValueError, "invalid local chunking parameters");
        goto done;
    }
    if (cutter_setup(c, window, chunk_type, kinds, &prefix, sentences) < 0) goto done;
    c->local = sentences ? CUT_SENTENCES : CUT_LOCAL;
    c->radius = radius;
    c->span = span;
    c->margin = 2 * reach;
    c->first = 1;
    c->start = 0;
    c->tail_above = tail_above;
    c->tail_min = tail_min;
    c->tail_max = tail_max;
    rc = 0;
done:
    PyBuffer_Release(&prefix);
    return rc;
}

static PyTypeObject LocalCutterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kbsync._kernel.LocalCutter",
    .tp_basicsize = sizeof(Cutter),
    .tp_dealloc = (destructor)cutter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("LocalCutter(window_words, radius, span, reach, sentences, chunk_type, "
                        "kinds, prefix, tail_above=0, tail_min=0, tail_max=0)\n\n"
                        "Streaming strictly local chunking (chunking/local.py, and with sentences\n"
                        "chunking/sentences.py) from text blocks to Chunk objects; the methods\n"
                        "of TTTDCutter."),
    .tp_methods = cutter_methods,
    .tp_init = (initproc)local_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------ byte CDC */

/* bytecdc.rolling_hashes: H[i] = sum(data[i - k] * 257^k, k < window) mod 2^61 - 1.
   Rolled one byte at a time without 128-bit integers (so any C compiler builds it):
   H * 257 is split so every partial product stays below 2^63. */
#define MOD61 ((1ULL << 61) - 1)

static inline uint64_t fold61(uint64_t x)
{
    x = (x & MOD61) + (x >> 61);
    return x >= MOD61 ? x - MOD61 : x;
}

static inline uint64_t times257(uint64_t h)
{
    uint64_t a = h >> 53, b = h & ((1ULL << 53) - 1);
    uint64_t c = a * 257; /* < 2^17; c * 2^53 = (c >> 8) * 2^61 + (c & 255) * 2^53 */
    return fold61(b * 257 + (c >> 8) + ((c & 255) << 53));
}

/* a * b mod 2^61 - 1 for a, b < 2^61, in 64-bit halves (2^64 = 8 and 2^61 = 1 mod p). */
static uint64_t mulmod61(uint64_t a, uint64_t b)
{
    uint64_t ah = a >> 32, al = a & 0xFFFFFFFFULL, bh = b >> 32, bl = b & 0xFFFFFFFFULL;
    uint64_t high = fold61((ah * bh) << 3);              /* ah * bh < 2^58 */
    uint64_t mid = ah * bl + al * bh;                     /* < 2^62 */
    uint64_t mid_mod = fold61((mid >> 29) + ((mid & ((1ULL << 29) - 1)) << 32));
    uint64_t low = fold61(al * bl);                       /* al * bl < 2^64 */
    return fold61(fold61(high + mid_mod) + low);
}

typedef struct {
    uint64_t out_of_window[256]; /* byte * 257^window mod p */
} Roll61;

static void roll61_init(Roll61 *r, Py_ssize_t window)
{
    uint64_t top = 1, base = 257; /* 257^window by squaring: the window may be large */
    for (Py_ssize_t e = window; e > 0; e >>= 1) {
        if (e & 1) top = mulmod61(top, base);
        base = mulmod61(base, base);
    }
    r->out_of_window[0] = 0;
    for (int b = 1; b < 256; b++) r->out_of_window[b] = fold61(r->out_of_window[b - 1] + top);
}

static inline uint64_t roll61(const Roll61 *r, uint64_t h, uint8_t in, int out)
{
    /* h * 257 + in - out * 257^window, kept in [0, p). */
    uint64_t x = times257(h) + in + (MOD61 - r->out_of_window[out]);
    return fold61(x);
}

PyDoc_STRVAR(rolling_hashes_doc,
"rolling_hashes(data, window) -> bytearray\n\n"
"bytecdc.rolling_hashes as int64 values (one per byte).");

static PyObject *k_rolling_hashes(PyObject *self, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t window;
    if (!PyArg_ParseTuple(args, "y*n", &data, &window)) return NULL;
    PyObject *out = NULL;
    if (window <= 0 || data.len > PY_SSIZE_T_MAX / 8) {
        PyErr_SetString(PyExc_ValueError, "window must be positive");
        goto done;
    }
    out = PyByteArray_FromStringAndSize(NULL, data.len * 8);
    if (out == NULL) goto done;
    Roll61 r;
    roll61_init(&r, window);
    const uint8_t *d = data.buf;
    int64_t *o = (int64_t *)PyByteArray_AS_STRING(out);
    uint64_t h = 0;
    for (Py_ssize_t i = 0; i < data.len; i++) {
        h = roll61(&r, h, d[i], i >= window ? d[i - window] : 0);
        o[i] = (int64_t)h;
    }
done:
    PyBuffer_Release(&data);
    return out;
}

/* Candidate chunk ends of data[lead:]: e = i + 1 - lead for every i >= lead with
   (H[i] & mask) == 0, never inside a multi-byte character with utf8. H[i] depends on the
   window before i only, so four stretches of the input are rolled side by side (each
   starting `window` bytes early): four independent chains of multiplications instead of
   one long one. Appends to `ends` in increasing order. */
#define CHAINS 4 /* the fast loop below is written out for four */

/* roll61 with lazy reduction: h and the result are below 2^61 + 4, congruent to the hash
   but not always reduced. h * 257 = h * 2^8 + h, and h * 2^8 = (h >> 53) * 2^61 + the
   low bits shifted, with 2^61 = 1 (mod p): shifts and adds, every sum below 2^63. */
static inline uint64_t roll61_lazy(const Roll61 *r, uint64_t h, uint8_t in, int out)
{
    uint64_t x = ((h << 8) & MOD61) + (h >> 53) + h + in + (MOD61 - r->out_of_window[out]);
    return (x & MOD61) + (x >> 61);
}
#define ROLL61_STEP roll61_lazy
#define REDUCED61(h) ((h) >= MOD61 ? (h) - MOD61 : (h))

static int find_candidates(const uint8_t *d, Py_ssize_t total, Py_ssize_t lead, Py_ssize_t window,
                           uint64_t mask, int utf8, Buf *ends)
{
    Roll61 r;
    roll61_init(&r, window);
    Py_ssize_t n = total - lead;
    Py_ssize_t span = (total + CHAINS - 1) / CHAINS;
    Py_ssize_t start[CHAINS], stop[CHAINS], from[CHAINS];
    uint64_t h[CHAINS];
    Buf part[CHAINS];
    memset(part, 0, sizeof part);
    Py_ssize_t common = span; /* steps every chain takes */
    for (int c = 0; c < CHAINS; c++) {
        start[c] = c * span < total ? c * span : total;
        stop[c] = start[c] + span < total ? start[c] + span : total;
        from[c] = start[c] - window > 0 ? start[c] - window : 0;
        if (stop[c] - start[c] < common) common = stop[c] - start[c];
        h[c] = 0;
        for (Py_ssize_t i = from[c]; i < start[c]; i++)
            h[c] = ROLL61_STEP(&r, h[c], d[i], i - window >= from[c] ? d[i - window] : 0);
    }
    int rc = -1;
#define CANDIDATE(c, i)                                                      \
    do {                                                                     \
        if ((REDUCED61(h[c]) & mask) == 0 && (i) >= lead) {                  \
            Py_ssize_t e = (i) + 1 - lead;                                   \
            if (!(utf8 && e < n && (d[lead + e] & 0xC0) == 0x80)) {          \
                if (buf_reserve(&part[c], 1, 8) < 0) goto done;              \
                ((int64_t *)part[c].p)[part[c].len++] = e;                   \
            }                                                                \
        }                                                                    \
    } while (0)
    /* The first window bytes of the input have zeros before them; after that every
       chain reads the byte leaving its window directly. */
    Py_ssize_t t = 0, head = window < span ? window : span;
    for (; t < head; t++) {
        for (int c = 0; c < CHAINS; c++) {
            Py_ssize_t i = start[c] + t;
            if (i >= stop[c]) continue;
            h[c] = ROLL61_STEP(&r, h[c], d[i], i - window >= from[c] ? d[i - window] : 0);
            CANDIDATE(c, i);
        }
    }
    /* The four chains in locals (an array would go through memory at every step). */
    uint64_t h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3];
    const uint8_t *d0 = d + start[0], *d1 = d + start[1], *d2 = d + start[2], *d3 = d + start[3];
    for (; t < common; t++) {
        h0 = ROLL61_STEP(&r, h0, d0[t], d0[t - window]);
        h1 = ROLL61_STEP(&r, h1, d1[t], d1[t - window]);
        h2 = ROLL61_STEP(&r, h2, d2[t], d2[t - window]);
        h3 = ROLL61_STEP(&r, h3, d3[t], d3[t - window]);
        if (((REDUCED61(h0) & mask) == 0) | ((REDUCED61(h1) & mask) == 0) |
            ((REDUCED61(h2) & mask) == 0) | ((REDUCED61(h3) & mask) == 0)) {
            h[0] = h0, h[1] = h1, h[2] = h2, h[3] = h3;
            for (int c = 0; c < CHAINS; c++) CANDIDATE(c, start[c] + t);
        }
    }
    h[0] = h0, h[1] = h1, h[2] = h2, h[3] = h3;
    for (; t < span; t++) {
        for (int c = 0; c < CHAINS; c++) {
            Py_ssize_t i = start[c] + t;
            if (i >= stop[c]) continue;
            h[c] = ROLL61_STEP(&r, h[c], d[i], i - window >= from[c] ? d[i - window] : 0);
            CANDIDATE(c, i);
        }
    }
#undef CANDIDATE
    for (int c = 0; c < CHAINS; c++) {
        if (buf_reserve(ends, part[c].len, 8) < 0) goto done;
        memcpy(ends->p + ends->len * 8, part[c].p, (size_t)part[c].len * 8);
        ends->len += part[c].len;
    }
    rc = 0;
done:
    for (int c = 0; c < CHAINS; c++) buf_free(&part[c]);
    return rc;
}

PyDoc_STRVAR(byte_candidates_doc,
"byte_candidates(data, lead, window, mask, utf8) -> bytearray\n\n"
"Candidate chunk ends of data[lead:] (bytecdc._cuts): every e = i + 1 - lead, i >= lead,\n"
"with (H[i] & mask) == 0, as int64; with utf8, never inside a multi-byte character.");

static PyObject *k_byte_candidates(PyObject *self, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t lead, window;
    unsigned long long mask;
    int utf8;
    if (!PyArg_ParseTuple(args, "y*nnKp", &data, &lead, &window, &mask, &utf8)) return NULL;
    PyObject *out = NULL;
    Buf ends = {0};
    if (window <= 0 || lead < 0 || lead > data.len) {
        PyErr_SetString(PyExc_ValueError, "window must be positive and lead within the data");
        goto done;
    }
    if (find_candidates(data.buf, data.len, lead, window, mask, utf8, &ends) < 0) goto done;
    out = PyByteArray_FromStringAndSize(ends.p, ends.len * 8);
done:
    buf_free(&ends);
    PyBuffer_Release(&data);
    return out;
}

PyDoc_STRVAR(byte_spans_doc,
"byte_spans(data, lead, window, mask, min_size, max_size, utf8, ended) -> bytearray\n\n"
"bytecdc._cuts: the final spans of data[lead:] as int64 triples (start, end, kind), kind\n"
"0 primary, 1 hard, 2 final; an unfinished tail is left for more input.");

/* bytecdc._cuts over d[lead:total]: (start, end, kind) triples appended to spans. */
static int cdc_spans(const uint8_t *d, Py_ssize_t total, Py_ssize_t lead, Py_ssize_t window,
                     uint64_t mask, Py_ssize_t min_size, Py_ssize_t max_size, int utf8, int ended,
                     Buf *spans)
{
    Buf ends = {0};
    int rc = -1;
    if (find_candidates(d, total, lead, window, mask, utf8, &ends) < 0) goto done;
    const uint8_t *b = d + lead;
    const int64_t *cand = (const int64_t *)ends.p;
    Py_ssize_t n = total - lead, nc = ends.len, ci = 0, s = 0;
    while (s < n) {
        while (ci < nc && cand[ci] < s + min_size) ci++;
        Py_ssize_t e;
        int64_t kind;
        if (ci < nc && cand[ci] - s <= max_size) {
            e = cand[ci];
            kind = 0;
        } else if (n - s > max_size) {
            e = s + max_size;
            kind = 1;
            if (utf8)
                while (e > s + 1 && (b[e] & 0xC0) == 0x80) e--;
        } else if (ended) {
            e = n;
            kind = 2;
        } else {
            break;
        }
        if (buf_reserve(spans, 3, 8) < 0) goto done;
        int64_t *o = (int64_t *)spans->p + spans->len;
        o[0] = s;
        o[1] = e;
        o[2] = kind;
        spans->len += 3;
        s = e;
    }
    rc = 0;
done:
    buf_free(&ends);
    return rc;
}

static int cdc_check(Py_ssize_t len, Py_ssize_t lead, Py_ssize_t window, Py_ssize_t min_size,
                     Py_ssize_t max_size)
{
    if (window <= 0 || lead < 0 || lead > len || min_size <= 0 || max_size < min_size) {
        PyErr_SetString(PyExc_ValueError, "invalid byte CDC parameters");
        return -1;
    }
    return 0;
}

static PyObject *k_byte_spans(PyObject *self, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t lead, window, min_size, max_size;
    unsigned long long mask;
    int utf8, ended;
    if (!PyArg_ParseTuple(args, "y*nnKnnpp", &data, &lead, &window, &mask, &min_size, &max_size,
                          &utf8, &ended))
        return NULL;
    PyObject *out = NULL;
    Buf spans = {0};
    if (cdc_check(data.len, lead, window, min_size, max_size) < 0) goto done;
    if (cdc_spans(data.buf, data.len, lead, window, mask, min_size, max_size, utf8, ended,
                  &spans) < 0)
        goto done;
    out = PyByteArray_FromStringAndSize(spans.p, spans.len * 8);
done:
    buf_free(&spans);
    PyBuffer_Release(&data);
    return out;
}

static const char *const BYTE_CHUNK_FIELDS[4] = {"index", "offset", "length", "digest"};

/* The BLAKE2b-128 hex digest of n bytes (bytecdc._digest). */
static PyObject *digest16_hex(const uint8_t *p, Py_ssize_t n)
{
    static const char HEX[] = "0123456789abcdef";
    B2b ctx;
    uint8_t dig[16];
    b2b_init(&ctx, 16);
    b2b_update(&ctx, p, (size_t)n);
    b2b_final(&ctx, dig);
    PyObject *s = PyUnicode_New(32, 127);
    if (s == NULL) return NULL;
    Py_UCS1 *o = PyUnicode_1BYTE_DATA(s);
    for (int i = 0; i < 16; i++) {
        o[2 * i] = (Py_UCS1)HEX[dig[i] >> 4];
        o[2 * i + 1] = (Py_UCS1)HEX[dig[i] & 15];
    }
    return s;
}

PyDoc_STRVAR(byte_chunks_doc,
"byte_chunks(data, lead, window, mask, min_size, max_size, ended, chunk_type, offset, index)\n"
"    -> (list[ByteChunk], consumed)\n\n"
"bytecdc.iter_byte_chunks over one block: the final chunks of data[lead:] as chunk_type\n"
"(index, offset, length, digest) values, numbered from index, their offsets counted from\n"
"offset, and how many bytes of data[lead:] they cover.");

static PyObject *k_byte_chunks(PyObject *self, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t lead, window, min_size, max_size;
    unsigned long long mask;
    int ended;
    PyObject *chunk_type;
    long long offset, index;
    if (!PyArg_ParseTuple(args, "y*nnKnnpOLL", &data, &lead, &window, &mask, &min_size,
                          &max_size, &ended, &chunk_type, &offset, &index))
        return NULL;
    PyObject *result = NULL, *list = NULL, *slots[4] = {NULL};
    Buf spans = {0};
    if (cdc_check(data.len, lead, window, min_size, max_size) < 0) goto done;
    if (cdc_spans(data.buf, data.len, lead, window, mask, min_size, max_size, 0, ended,
                  &spans) < 0)
        goto done;
    find_slots(chunk_type, BYTE_CHUNK_FIELDS, 4, slots);
    Py_ssize_t count = spans.len / 3;
    list = PyList_New(count);
    if (list == NULL) goto done;
    const int64_t *sp = (const int64_t *)spans.p;
    const uint8_t *b = (const uint8_t *)data.buf + lead;
    for (Py_ssize_t k = 0; k < count; k++) {
        int64_t s = sp[3 * k], e = sp[3 * k + 1];
        PyObject *fields[4] = {PyLong_FromLongLong(index + k), PyLong_FromLongLong(offset + s),
                               PyLong_FromLongLong(e - s), digest16_hex(b + s, e - s)};
        PyObject *chunk = NULL;
        if (fields[0] && fields[1] && fields[2] && fields[3])
            chunk = new_record(chunk_type, slots, fields, 4);
        for (int i = 0; i < 4; i++) Py_XDECREF(fields[i]);
        if (chunk == NULL) {
            Py_CLEAR(list);
            goto done;
        }
        PyList_SET_ITEM(list, k, chunk);
    }
    result = Py_BuildValue("(Nn)", list, count ? (Py_ssize_t)sp[3 * count - 2] : 0);
    list = NULL;
done:
    Py_XDECREF(list);
    for (int i = 0; i < 4; i++) Py_XDECREF(slots[i]);
    buf_free(&spans);
    PyBuffer_Release(&data);
    return result;
}

/* ------------------------------------------------------------------ hashing embedder terms */

/* The terms of kbsync.embed.hashing for ASCII texts: what its Python path computes word by
 * word (lower-case \w+ words, stop words dropped, a suffix stripped, CRC-32 of each stem
 * and of each pair of neighbouring stems), as keys (row << 32 | code) in any order. */

static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

/* zlib.crc32(data, prev): the CRC-32 of data, continued from prev. */
static uint32_t crc_continue(uint32_t prev, const unsigned char *p, Py_ssize_t n)
{
    uint32_t c = ~prev;
    while (n-- > 0) c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

#define STOP_SLOTS 1024 /* a power of two, over twice the stop words */

typedef struct {
    const char *word[STOP_SLOTS];
    Py_ssize_t len[STOP_SLOTS];
} StopSet;

static uint32_t stop_hash(const char *p, Py_ssize_t n)
{
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

static int stop_add(StopSet *set, const char *p, Py_ssize_t n, Py_ssize_t *count)
{
    if (++*count > STOP_SLOTS / 2) {
        PyErr_SetString(PyExc_ValueError, "too many stop words");
        return -1;
    }
    uint32_t i = stop_hash(p, n) & (STOP_SLOTS - 1);
    while (set->word[i] != NULL) i = (i + 1) & (STOP_SLOTS - 1);
    set->word[i] = p;
    set->len[i] = n;
    return 0;
}

static int stop_has(const StopSet *set, const char *p, Py_ssize_t n)
{
    uint32_t i = stop_hash(p, n) & (STOP_SLOTS - 1);
    while (set->word[i] != NULL) {
        if (set->len[i] == n && memcmp(set->word[i], p, (size_t)n) == 0) return 1;
        i = (i + 1) & (STOP_SLOTS - 1);
    }
    return 0;
}

/* The stem's length in bytes: the word's ``n`` UTF-8 bytes less the first of the suffixes
 * it ends in, if 3 of its ``chars`` characters stay. */
static Py_ssize_t stem_length(const char *w, Py_ssize_t n, Py_ssize_t chars)
{
    static const char *const suffixes[] = {"ying", "ies", "ied", "ing", "ed", "es", "s", "y"};
    for (size_t k = 0; k < sizeof suffixes / sizeof *suffixes; k++) {
        Py_ssize_t m = (Py_ssize_t)strlen(suffixes[k]);
        if (chars - m >= 3 && memcmp(w + n - m, suffixes[k], (size_t)m) == 0) return n - m;
    }
    return n;
}

typedef struct {
    uint64_t *out;
    uint64_t high;
    int have_previous;
    uint32_t previous_space;
} Terms;

/* One word of a text: its stem's key, and its pair's with the word before, unless a stop word. */
static void add_word(Terms *terms, const StopSet *set, const char *w, Py_ssize_t n,
                     Py_ssize_t chars)
{
    if (stop_has(set, w, n)) return;
    Py_ssize_t stem = stem_length(w, n, chars);
    uint32_t code = crc_continue(0, (const unsigned char *)w, stem);
    *terms->out++ = terms->high | code;
    if (terms->have_previous)
        *terms->out++ = terms->high | crc_continue(terms->previous_space,
                                                   (const unsigned char *)w, stem);
    terms->previous_space = crc_continue(code, (const unsigned char *)" ", 1);
    terms->have_previous = 1;
}

static int is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

PyDoc_STRVAR(hashing_keys_doc,
"hashing_keys(texts, stopwords, /) -> (bytes, list[int])\n\n"
"The (row << 32 | code) keys of the hashing embedder's terms, as native uint64s, of each\n"
"ASCII text and of each list of words (a text's lower-case words, as the caller found\n"
"them); and the rows of the texts that are not ASCII, which the caller is to split into\n"
"words and hand back as lists.");

/* The terms of one lower-cased ASCII text (``lower`` holds n bytes) into ``terms``. */
static void ascii_terms(Terms *terms, const StopSet *set, const char *lower, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (!is_word_byte((unsigned char)lower[i])) {
            i++;
            continue;
        }
        Py_ssize_t start = i;
        while (i < n && is_word_byte((unsigned char)lower[i])) i++;
        add_word(terms, set, lower + start, i - start, i - start);
    }
}

static PyObject *k_hashing_keys(PyObject *self, PyObject *args)
{
    PyObject *texts, *stopwords;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &texts, &stopwords)) return NULL;
    PyObject *result = NULL, *words = NULL, *others = NULL;
    StopSet *set = PyMem_Calloc(1, sizeof(StopSet));
    Buf keys = {0}, lower = {0}, ascii = {0};
    if (set == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    words = PySequence_Tuple(stopwords); /* keeps the stop words' bytes alive */
    if (words == NULL) goto done;
    Py_ssize_t stop_words = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(words); i++) {
        PyObject *w = PyTuple_GET_ITEM(words, i);
        if (!PyUnicode_Check(w) || !PyUnicode_IS_ASCII(w)) {
            PyErr_SetString(PyExc_TypeError, "stop words must be ASCII str");
            goto done;
        }
        if (stop_add(set, (const char *)PyUnicode_1BYTE_DATA(w), PyUnicode_GET_LENGTH(w),
                     &stop_words) < 0)
            goto done;
    }
    others = PyList_New(0);
    if (others == NULL) goto done;
    /* First the words handed over and the texts that are not ASCII (Python objects: the
       GIL held), noting the ASCII texts; then those, scanned with the GIL released, so
       that an embedding thread does not hold up the sync's other thread. The list of
       texts is the caller's own and keeps every text alive meanwhile. */
    Py_ssize_t ascii_rows = 0, ascii_bytes = 0, longest = 0;
    for (Py_ssize_t row = 0; row < PyList_GET_SIZE(texts); row++) {
        PyObject *text = PyList_GET_ITEM(texts, row);
        Terms terms = {.high = (uint64_t)row << 32};
        if (PyList_Check(text)) { /* the words of a text that is not ASCII */
            Py_ssize_t text_words = PyList_GET_SIZE(text);
            if (buf_reserve(&keys, 2 * text_words, sizeof(uint64_t)) < 0) goto done;
            terms.out = (uint64_t *)keys.p + keys.len;
            for (Py_ssize_t k = 0; k < text_words; k++) {
                PyObject *word = PyList_GET_ITEM(text, k);
                Py_ssize_t n;
                const char *w = PyUnicode_Check(word) ? PyUnicode_AsUTF8AndSize(word, &n) : NULL;
                if (w == NULL) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "words must be str");
                    goto done;
                }
                add_word(&terms, set, w, n, PyUnicode_GET_LENGTH(word));
            }
            keys.len = terms.out - (uint64_t *)keys.p;
            continue;
        }
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "texts must be str or lists of words");
            goto done;
        }
        if (!PyUnicode_IS_ASCII(text)) {
            PyObject *r = PyLong_FromSsize_t(row);
            int failed = r == NULL || PyList_Append(others, r) < 0;
            Py_XDECREF(r);
            if (failed) goto done;
            continue;
        }
        if (buf_reserve(&ascii, 1, sizeof(Py_ssize_t)) < 0) goto done;
        ((Py_ssize_t *)ascii.p)[ascii.len++] = row;
        Py_ssize_t n = PyUnicode_GET_LENGTH(text);
        ascii_rows++;
        /* Each text adds at most one unigram and one bigram per two of its bytes. */
        ascii_bytes += n + 1;
        if (n > longest) longest = n;
    }
    if (buf_reserve(&keys, ascii_bytes, sizeof(uint64_t)) < 0 || buf_reserve(&lower, longest, 1) < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < ascii_rows; k++) {
        Py_ssize_t row = ((Py_ssize_t *)ascii.p)[k];
        PyObject *text = PyList_GET_ITEM(texts, row);
        const char *t = (const char *)PyUnicode_1BYTE_DATA(text);
        Py_ssize_t n = PyUnicode_GET_LENGTH(text);
        for (Py_ssize_t i = 0; i < n; i++) {
            char c = t[i];
            lower.p[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
        }
        Terms terms = {.high = (uint64_t)row << 32, .out = (uint64_t *)keys.p + keys.len};
        ascii_terms(&terms, set, lower.p, n);
        keys.len = terms.out - (uint64_t *)keys.p;
    }
    Py_END_ALLOW_THREADS
    PyObject *data = PyBytes_FromStringAndSize(keys.p, keys.len * (Py_ssize_t)sizeof(uint64_t));
    if (data == NULL) goto done;
    result = Py_BuildValue("(NO)", data, others);
done:
    Py_XDECREF(words);
    Py_XDECREF(others);
    PyMem_Free(set);
    buf_free(&keys);
    buf_free(&lower);
    buf_free(&ascii);
    return result;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef kernel_methods[] = {
    {"scan", k_scan, METH_VARARGS, scan_doc},
    {"build_chunks", k_build_chunks, METH_VARARGS, build_chunks_doc},
    {"local_cuts", k_local_cuts, METH_VARARGS, local_cuts_doc},
    {"rolling_hashes", k_rolling_hashes, METH_VARARGS, rolling_hashes_doc},
    {"byte_candidates", k_byte_candidates, METH_VARARGS, byte_candidates_doc},
    {"byte_spans", k_byte_spans, METH_VARARGS, byte_spans_doc},
    {"byte_chunks", k_byte_chunks, METH_VARARGS, byte_chunks_doc},
    {"hashing_keys", k_hashing_keys, METH_VARARGS, hashing_keys_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kbsync._kernel",
    .m_doc = "The compiled hot path of kbsync's normalizer and chunkers (see kbsync.native).",
    .m_size = -1,
    .m_methods = kernel_methods,
};

PyMODINIT_FUNC PyInit__kernel(void)
{
    init_tables();
    crc_init();
    if (PyType_Ready(&CutterType) < 0 || PyType_Ready(&LocalCutterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&kernel_module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "TTTDCutter", (PyObject *)&CutterType) < 0 ||
        PyModule_AddObjectRef(m, "LocalCutter", (PyObject *)&LocalCutterType) < 0 ||
        PyModule_AddIntConstant(m, "ABI", 1) < 0 ||
        PyModule_AddStringConstant(m, "NFC_UNIDATA_VERSION", NFC_UNIDATA_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
