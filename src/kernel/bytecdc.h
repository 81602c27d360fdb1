/* The byte CDC of chunking/bytecdc.py.
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_BYTECDC_H
#define KBSYNC_KERNEL_BYTECDC_H

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

#endif /* KBSYNC_KERNEL_BYTECDC_H */
