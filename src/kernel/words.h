/* The words of normalize.py: character classes, token-estimate classes (tokens.py), word hashes and the records of a scan.
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_WORDS_H
#define KBSYNC_KERNEL_WORDS_H

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

#endif /* KBSYNC_KERNEL_WORDS_H */
