/* Fast paths over printable ASCII: eight bytes, then 64 bytes, at a time.
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_ASCII_H
#define KBSYNC_KERNEL_ASCII_H

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

#endif /* KBSYNC_KERNEL_ASCII_H */
