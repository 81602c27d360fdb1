/*
 * kbsync._kernel: the compiled hot path of normalization and chunking.
 *
 * One pass over the UTF-8 bytes of a block finds words, whitespace runs (and whether
 * each is a paragraph mark), character offsets, the canonical text, the per-word
 * 64-bit hash, the estimated token count and the sentence-end flag; the window
 * fingerprints roll over the word hashes as words complete. The TTTD cutter keeps
 * its pending words in C and builds Chunk objects directly (BLAKE2b included), so
 * no Python runs between the bytes and the chunks.
 *
 * Every function here mirrors a NumPy reference in the pure package
 * (normalize.py, chunking/fingerprint.py, tokens.py, stream.py, tttd.py,
 * bytecdc.py); tests/unit/test_kernel_equivalence.py requires identical output.
 * Input text must already be NFC without NUL or surrogates (the Python side checks;
 * a NUL makes these functions decline, a surrogate fails the UTF-8 conversion).
 * The GIL is held throughout: the work per call is one block, and the objects
 * built at the end need it anyway.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_nfc_table.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The parts, in order (src/kernel/): each uses only the parts before it. */
#include "identity.h"
#include "buffers.h"
#include "words.h"
#include "ascii.h"
#include "scan.h"
#include "scan_block.h"
#include "chunks.h"
#include "tttd.h"
#include "stream.h"
#include "local.h"
#include "local_cutter.h"
#include "bytecdc.h"
#include "hashing.h"

/* ------------------------------------------------------------------ module */

static PyMethodDef kernel_methods[] = {
    {"scan", k_scan, METH_VARARGS, scan_doc},
    {"build_chunks", k_build_chunks, METH_VARARGS, build_chunks_doc},
    {"local_cuts", k_local_cuts, METH_VARARGS, local_cuts_doc},
    {"rolling_hashes", k_rolling_hashes, METH_VARARGS, rolling_hashes_doc},
    {"byte_candidates", k_byte_candidates, METH_VARARGS, byte_candidates_doc},
    {"byte_spans", k_byte_spans, METH_VARARGS, byte_spans_doc},
    {"byte_chunks", k_byte_chunks, METH_VARARGS, byte_chunks_doc},
    {"hashing_keys", k_hashing_keys, METH_VARARGS, hashing_keys_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kbsync._kernel",
    .m_doc = "The compiled hot path of kbsync's normalizer and chunkers (see kbsync.core.native).",
    .m_size = -1,
    .m_methods = kernel_methods,
};

PyMODINIT_FUNC PyInit__kernel(void)
{
    init_tables();
    crc_init();
    if (PyType_Ready(&CutterType) < 0 || PyType_Ready(&LocalCutterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&kernel_module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "TTTDCutter", (PyObject *)&CutterType) < 0 ||
        PyModule_AddObjectRef(m, "LocalCutter", (PyObject *)&LocalCutterType) < 0 ||
        PyModule_AddIntConstant(m, "ABI", 1) < 0 ||
        PyModule_AddStringConstant(m, "NFC_UNIDATA_VERSION", NFC_UNIDATA_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
