/* The terms of the hashing embedder (embed/hashing.py).
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_HASHING_H
#define KBSYNC_KERNEL_HASHING_H

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

#endif /* KBSYNC_KERNEL_HASHING_H */
