/* Chunk construction: model.Chunk objects built in C, with their identities.
 *
 * A part of the kbsync._kernel module (src/kbsync/_kernel.c), which includes the parts
 * in order as one translation unit: each part uses only the parts before it. */
#ifndef KBSYNC_KERNEL_CHUNKS_H
#define KBSYNC_KERNEL_CHUNKS_H

/* ------------------------------------------------------------------ chunk construction */

/* What building a Chunk needs: the type, the boundary kinds, the identity prefix. */
#define MAX_KINDS 5
typedef struct {
    PyObject *chunk_type;
    /* PRIMARY, BACKUP, HARD, FINAL (or FORCED for the local strategies), maybe TAIL */
    PyObject *kinds[MAX_KINDS];
    int nkinds;
    B2b prefix;         /* BLAKE2b-256 state after the identity's fixed prefix */
    PyObject *slots[8]; /* the fields' member descriptors, when construction can use them */
} Maker;

static const char *const CHUNK_FIELDS[8] = {"index", "text", "start", "end", "token_count",
                                      "boundary", "identity", "snapped"};

/* model.Chunk is a frozen dataclass with __slots__ and no __post_init__: its __init__
   only stores each field through its member descriptor (object.__setattr__). When the
   type still looks exactly like that, the kernel stores them the same way without
   running Python code; otherwise it calls the type. */
static int find_slots(PyObject *type, const char *const *names, int count, PyObject **slots)
{
    if (!PyType_Check(type) || PyObject_HasAttrString(type, "__post_init__")) return 0;
    PyObject *match = PyObject_GetAttrString(type, "__match_args__");
    if (match == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyTuple_Check(match) && PyTuple_GET_SIZE(match) == count;
    for (int i = 0; ok && i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(match, i);
        ok = PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, names[i]) == 0;
    }
    Py_DECREF(match);
    if (!ok) return 0;
    PyObject *dict = ((PyTypeObject *)type)->tp_dict;
    PyObject *found[8];
    for (int i = 0; i < count; i++) {
        PyObject *d = PyDict_GetItemString(dict, names[i]); /* borrowed */
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return 0;
        found[i] = d;
    }
    for (int i = 0; i < count; i++) slots[i] = Py_NewRef(found[i]);
    return 1;
}

/* An instance of a slotted dataclass from its fields (borrowed), through the slots when
   find_slots found them, else by calling the type. Built through the slots it is not
   tracked by the collector: its fields (str, int, bool, enum members) never lead back
   to it, so it cannot be in a cycle (CPython untracks tuples of atoms the same way). */
static PyObject *new_record(PyObject *type, PyObject *const *slots, PyObject **fields, int count)
{
    PyObject *obj;
    if (slots[0] != NULL) {
        PyTypeObject *t = (PyTypeObject *)type;
        obj = t->tp_alloc(t, 0);
        for (int i = 0; obj != NULL && i < count; i++) {
            if (Py_TYPE(slots[i])->tp_descr_set(slots[i], obj, fields[i]) < 0) Py_CLEAR(obj);
        }
        if (obj != NULL && PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    } else {
        obj = PyObject_Vectorcall(type, fields, (size_t)count, NULL);
    }
    return obj;
}

static void maker_find_slots(Maker *mk)
{
    find_slots(mk->chunk_type, CHUNK_FIELDS, 8, mk->slots);
}

static int maker_init(Maker *mk, PyObject *chunk_type, PyObject *kinds, Py_buffer *prefix)
{
    if (!PyTuple_Check(kinds) || PyTuple_GET_SIZE(kinds) < 4 ||
        PyTuple_GET_SIZE(kinds) > MAX_KINDS) {
        PyErr_SetString(PyExc_TypeError, "kinds must be a tuple of 4 or 5 boundary kinds");
        return -1;
    }
    mk->chunk_type = Py_NewRef(chunk_type);
    mk->nkinds = (int)PyTuple_GET_SIZE(kinds);
    for (int i = 0; i < mk->nkinds; i++) mk->kinds[i] = Py_NewRef(PyTuple_GET_ITEM(kinds, i));
    b2b_init(&mk->prefix, 32);
    b2b_update(&mk->prefix, prefix->buf, (size_t)prefix->len);
    maker_find_slots(mk);
    return 0;
}

static void maker_clear(Maker *mk)
{
    Py_CLEAR(mk->chunk_type);
    for (int i = 0; i < MAX_KINDS; i++) Py_CLEAR(mk->kinds[i]);
    for (int i = 0; i < 8; i++) Py_CLEAR(mk->slots[i]);
}

/* identity.ChunkIdentity: H(prefix, "s", len as 8 bytes big-endian, text). */
static PyObject *identity_hex(const B2b *prefix, const uint8_t *p, Py_ssize_t n)
{
    static const char HEX[] = "0123456789abcdef";
    B2b ctx = *prefix;
    uint8_t head[9], dig[32];
    head[0] = 's';
    uint64_t len = (uint64_t)n;
    for (int i = 0; i < 8; i++) head[8 - i] = (uint8_t)(len >> (8 * i));
    b2b_update(&ctx, head, 9);
    b2b_update(&ctx, p, (size_t)n);
    b2b_final(&ctx, dig);
    PyObject *s = PyUnicode_New(64, 127);
    if (s == NULL) return NULL;
    Py_UCS1 *o = PyUnicode_1BYTE_DATA(s);
    for (int i = 0; i < 32; i++) {
        o[2 * i] = (Py_UCS1)HEX[dig[i] >> 4];
        o[2 * i + 1] = (Py_UCS1)HEX[dig[i] & 15];
    }
    return s;
}

/* Chunk(index, text, start, end, token_count, boundary, identity, snapped); `text` is
   stolen. */
static PyObject *make_chunk(Maker *mk, int64_t index, PyObject *text, const uint8_t *utf8,
                            Py_ssize_t nbytes, int64_t start, int64_t end, int64_t tokens, int kind,
                            int snapped)
{
    PyObject *args[8] = {NULL};
    PyObject *chunk = NULL;
    if (text == NULL) return NULL;
    args[0] = PyLong_FromLongLong(index);
    args[1] = text;
    args[2] = PyLong_FromLongLong(start);
    args[3] = PyLong_FromLongLong(end);
    args[4] = PyLong_FromLongLong(tokens);
    args[5] = Py_NewRef(mk->kinds[kind]);
    args[6] = identity_hex(&mk->prefix, utf8, nbytes);
    args[7] = Py_NewRef(snapped ? Py_True : Py_False);
    for (int i = 0; i < 8; i++)
        if (args[i] == NULL) goto done;
    chunk = new_record(mk->chunk_type, mk->slots, args, 8);
done:
    for (int i = 0; i < 8; i++) Py_XDECREF(args[i]);
    return chunk;
}

#endif /* KBSYNC_KERNEL_CHUNKS_H */
