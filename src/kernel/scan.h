/* The general UTF-8 scan of normalize.py and the rolling window fingerprint of chunking/fingerprint.py.
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_SCAN_H
#define KBSYNC_KERNEL_SCAN_H

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

#endif /* KBSYNC_KERNEL_SCAN_H */
