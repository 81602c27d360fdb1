/* Growable buffers and the UTF-8 of a str.
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_BUFFERS_H
#define KBSYNC_KERNEL_BUFFERS_H

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

#endif /* KBSYNC_KERNEL_BUFFERS_H */
