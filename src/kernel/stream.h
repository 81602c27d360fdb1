/* Chunks from cut positions (chunking/stream.py).
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_STREAM_H
#define KBSYNC_KERNEL_STREAM_H

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

#endif /* KBSYNC_KERNEL_STREAM_H */
