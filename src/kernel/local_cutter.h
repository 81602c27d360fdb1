/* The local cutters of chunking/local.py and sentences.py (LocalCutter).
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_LOCAL_CUTTER_H
#define KBSYNC_KERNEL_LOCAL_CUTTER_H

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

#endif /* KBSYNC_KERNEL_LOCAL_CUTTER_H */
