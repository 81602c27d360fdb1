/* The TTTD cutter of chunking/tttd.py (TTTDCutter).
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_TTTD_H
#define KBSYNC_KERNEL_TTTD_H

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

#endif /* KBSYNC_KERNEL_TTTD_H */
