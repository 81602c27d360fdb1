/* scan(): one block of text as a WordScan (the columns normalize.py and the chunkers read).
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_SCAN_BLOCK_H
#define KBSYNC_KERNEL_SCAN_BLOCK_H

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

#endif /* KBSYNC_KERNEL_SCAN_BLOCK_H */
