/* Strictly local cuts (chunking/local.py).
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_LOCAL_H
#define KBSYNC_KERNEL_LOCAL_H

/* ------------------------------------------------------------------ strictly local cuts */

#define SECOND_HASH 0xD6E8FEB86659FD93ULL
#define RANK_BITS 3

/* Which of the m positions (values v, running token sums cum) are strictly below every
   other position within radius - 1 tokens (local.strict_local_minima): a sliding minimum
   from each side, by a deque of positions with increasing values. */
static void strict_minima(const uint64_t *v, const int64_t *cum, Py_ssize_t m, int64_t radius,
                          Py_ssize_t *dq, uint8_t *out)
{
    Py_ssize_t head = 0, tail = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        while (head < tail && cum[k] - cum[dq[head]] >= radius) head++;
        out[k] = head == tail || v[k] < v[dq[head]];
        while (head < tail && v[dq[tail - 1]] >= v[k]) tail--;
        dq[tail++] = k;
    }
    head = tail = 0;
    for (Py_ssize_t k = m - 1; k >= 0; k--) {
        while (head < tail && cum[dq[head]] - cum[k] >= radius) head++;
        if (head < tail && v[k] >= v[dq[head]]) out[k] = 0;
        while (head < tail && v[dq[tail - 1]] >= v[k]) tail--;
        dq[tail++] = k;
    }
}

/* local._ranked: rank first, then the top 61 bits of the value. */
static inline uint64_t ranked(uint8_t rank, uint64_t value)
{
    return ((uint64_t)rank << (64 - RANK_BITS)) | (value >> RANK_BITS);
}

enum { L_PRIMARY = 1, L_HARD = 2, L_FORCED = 4, L_FINAL = 8 };

PyDoc_STRVAR(local_cuts_doc,
"local_cuts(fingerprint, tokens, radius, span, ranks, eligible_below, first, last)\n"
"    -> (cuts, kinds)\n\n"
"local.select_cuts: the cut positions (int64) and their kinds (uint8: 0 primary, 1 hard,\n"
"2 forced, 3 final) of a buffer of words; fingerprint is uint64, tokens int64, ranks\n"
"uint8 (empty for the plain local rules).");

/* local.select_cut_codes over n words (fingerprints fp, tokens per word, ranks or NULL):
   the flags (L_PRIMARY, L_HARD, L_FORCED, L_FINAL; 0 for no cut) of every position, into
   flags (n bytes). Returns -1 with an exception set. */
static int local_flags(const uint64_t *fp, const int64_t *tokens, Py_ssize_t n, int64_t radius,
                       int64_t span, const uint8_t *ranks, int eligible_below, int first,
                       int last, uint8_t *flags)
{
    int rc = -1;
    size_t un = (size_t)(n > 0 ? n : 1);
    int64_t *cum = PyMem_Malloc(un * sizeof *cum), *sub = NULL;
    uint64_t *f2 = PyMem_Malloc(un * sizeof *f2), *keys = PyMem_Malloc(un * sizeof *keys);
    Py_ssize_t *dq = PyMem_Malloc(un * sizeof *dq), *pos = PyMem_Malloc(un * sizeof *pos);
    uint8_t *won = PyMem_Malloc(un);
    if (!cum || !f2 || !keys || !dq || !pos || !won) {
        PyErr_NoMemory();
        goto done;
    }
    memset(flags, 0, (size_t)n);
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (tokens[k] <= 0) {
            PyErr_SetString(PyExc_ValueError, "every word has at least one token");
            goto done;
        }
        total += tokens[k];
        cum[k] = total;
        uint64_t g = mix64(fp[k] ^ SECOND_HASH);
        f2[k] = ranks ? ranked(ranks[k], g) : g;
    }
    /* Primaries: strict minima of f1 (or, with ranks, of the ranked f1 among the
       eligible positions only). */
    if (ranks == NULL) {
        strict_minima(fp, cum, n, radius, dq, won);
        for (Py_ssize_t k = 0; k < n; k++) flags[k] = won[k] ? L_PRIMARY : 0;
    } else {
        Py_ssize_t m = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (ranks[k] >= eligible_below) continue;
            if (first && cum[k] < radius) continue;
            if (last && total - cum[k] < radius) continue;
            pos[m] = k;
            keys[m] = ranked(ranks[k], fp[k]);
            m++;
        }
        /* The eligible positions' token sums. */
        sub = PyMem_Malloc((size_t)(m > 0 ? m : 1) * sizeof *sub);
        if (sub == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t e = 0; e < m; e++) sub[e] = cum[pos[e]];
        strict_minima(keys, sub, m, radius, dq, won);
        for (Py_ssize_t e = 0; e < m; e++)
            if (won[e]) flags[pos[e]] = L_PRIMARY;
    }
    /* Hard cuts on both sides of an over-long word; a final cut unless the last
       position is already an anchor. */
    for (Py_ssize_t k = 0; k < n; k++) {
        int giant = tokens[k] > span || (k + 1 < n && tokens[k + 1] > span);
        if (giant && !(flags[k] & L_PRIMARY)) flags[k] |= L_HARD;
    }
    if (n > 0 && !flags[n - 1]) flags[n - 1] = L_FINAL;
    /* Forced picks: every window W(m) of span tokens between two anchors that holds
       neither gets its f2 minimum (the latest on ties), by a sliding minimum. */
    if (span > 0) {
        Py_ssize_t prev = -1;
        for (Py_ssize_t a = 0; a < n; a++) {
            if (!(flags[a] & (L_PRIMARY | L_HARD | L_FINAL))) continue;
            int64_t t_prev = prev >= 0 ? cum[prev] : 0;
            if (cum[a] - t_prev > span) {
                Py_ssize_t head = 0, tail = 0, next = prev + 1, end = prev; /* next to push */
                for (Py_ssize_t m = prev + 1; m < a; m++) {
                    int64_t base = m > 0 ? cum[m - 1] : 0;
                    if (cum[a] - base <= span) break; /* this and later windows hold a */
                    while (end + 1 < n && cum[end + 1] <= base + span) end++;
                    if (end < m) continue;
                    while (next <= end) {
                        while (head < tail && f2[dq[tail - 1]] >= f2[next]) tail--;
                        dq[tail++] = next++;
                    }
                    while (dq[head] < m) head++;
                    flags[dq[head]] |= L_FORCED;
                }
            }
            prev = a;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (flags[k] & (L_PRIMARY | L_HARD | L_FINAL)) flags[k] &= (uint8_t)~L_FORCED;
    rc = 0;
done:
    PyMem_Free(cum);
    PyMem_Free(sub);
    PyMem_Free(f2);
    PyMem_Free(keys);
    PyMem_Free(dq);
    PyMem_Free(pos);
    PyMem_Free(won);
    return rc;
}

/* The kind code (local.KINDS: 0 primary, 1 hard, 2 forced, 3 final) of a cut's flags. */
static inline uint8_t local_kind(uint8_t f)
{
    return f & L_PRIMARY ? 0 : f & L_HARD ? 1 : f & L_FORCED ? 2 : 3;
}

static PyObject *k_local_cuts(PyObject *self, PyObject *args)
{
    Py_buffer fb, tb, rb;
    long long radius, span;
    int eligible_below, first, last;
    if (!PyArg_ParseTuple(args, "y*y*LLy*ipp", &fb, &tb, &radius, &span, &rb, &eligible_below,
                          &first, &last))
        return NULL;
    PyObject *result = NULL, *cuts_out = NULL, *kinds_out = NULL;
    uint8_t *flags = NULL;
    Py_ssize_t n = tb.len / 8;
    const uint8_t *ranks = rb.len ? rb.buf : NULL;
    if (tb.len % 8 || fb.len != tb.len || (ranks && rb.len != n) || radius <= 0) {
        PyErr_SetString(PyExc_ValueError, "fingerprint (uint64), tokens (int64) and ranks "
                                          "(uint8) must have one length; radius positive");
        goto done;
    }
    flags = PyMem_Malloc((size_t)(n > 0 ? n : 1));
    if (flags == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (local_flags(fb.buf, tb.buf, n, radius, span, ranks, eligible_below, first, last,
                    flags) < 0)
        goto done;
    Py_ssize_t count = 0;
    for (Py_ssize_t k = 0; k < n; k++) count += flags[k] != 0;
    cuts_out = PyByteArray_FromStringAndSize(NULL, count * 8);
    kinds_out = PyByteArray_FromStringAndSize(NULL, count);
    if (cuts_out == NULL || kinds_out == NULL) goto done;
    int64_t *co = (int64_t *)PyByteArray_AS_STRING(cuts_out);
    uint8_t *ko = (uint8_t *)PyByteArray_AS_STRING(kinds_out);
    Py_ssize_t c = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (!flags[k]) continue;
        co[c] = k;
        ko[c] = local_kind(flags[k]);
        c++;
    }
    result = PyTuple_Pack(2, cuts_out, kinds_out);
done:
    Py_XDECREF(cuts_out);
    Py_XDECREF(kinds_out);
    PyMem_Free(flags);
    PyBuffer_Release(&fb);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&rb);
    return result;
}

#endif /* KBSYNC_KERNEL_LOCAL_H */
