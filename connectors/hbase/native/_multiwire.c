/* The compiled forms of the native client's per-row work on the Multi path: the encoder of batches of
 * plain puts (``encode``), the grouping of a batch's rows by region (``group``) and the reading of an
 * all-successful MultiResponse (``decode_ok``). Each has a pure-Python reference it is tested against.
 *
 * Contract: ``encode(groups, mutations, nonce_group, put_kind)`` returns ``(param, cellblock)``, two
 * ``bytes`` equal to ``build_multi(groups', encode_batch(mutations, nonces), nonce_group)`` of the
 * pure-Python forms (the reference; a property test checks it), where ``groups`` is a sequence of
 * ``(region name: bytes, positions: sequence of int)`` and each position indexes ``mutations``. It
 * returns None, and the caller takes the Python path, unless every mutation at those positions is a
 * plain put: ``kind is put_kind``, ``ttl`` None, ``timestamp`` an int in [0, 2**63), ``row`` bytes of
 * 1..32767, ``cells`` a non-empty dict of bytes (a ``family:qualifier`` column whose family is
 * 1..127 bytes) to bytes. A position outside ``mutations`` raises IndexError. No global state; the GIL
 * is held throughout.
 *
 * Layout (protobuf; v = varint; every length-delimited field is tag . v(length) . bytes):
 *
 *   MultiRequest  = (0a RegionAction)* [. 10 v(nonce_group)]
 *   RegionAction  = 0a (08 01 12 v(len name) name) . (1a Action)*
 *   Action        = 08 v(position + 1) . 12 MutationProto
 *   MutationProto = 0a v(len row) row . 10 02 . 20 v(timestamp) . 40 v(n cells)
 *   cellblock     = per action in order, per cell in dict order: a KeyValue
 *   KeyValue      = u32 kv_len . u32 key_len . u32 val_len . u16 row_len . row . u8 fam_len . family
 *                   . qualifier . u64 timestamp . u8 4 (Put) . value        (all big endian)
 *   key_len = 12 + row + family + qualifier; kv_len = 8 + key_len + val_len
 *
 * Contract: ``group(starts, ends, mutations, pending)`` returns ``(found, holes)`` equal to
 * ``connectors.hbase.native.regions.group_python``'s: ``starts`` and ``ends`` are one table's cached
 * regions' keys (lists of bytes, sorted by start; ``b""`` an open end), and each position of ``pending``
 * (a sequence of int indexing ``mutations``) goes to ``found[k]`` (a dict in first-seen order of region
 * index ``k`` -> list of positions in pending order), ``k`` the region whose ``[start, end)`` holds
 * ``mutations[i].row`` (``bisect_right(starts, row) - 1``), or to ``holes``. None when a row, start or
 * end is not ``bytes`` (the caller takes the Python path); a position outside ``mutations`` raises
 * IndexError.
 *
 * Contract: ``decode_ok(buf)`` returns, for a MultiResponse whose every action succeeded, the indexes
 * of each RegionActionResult's ResultOrExceptions (a list per RegionActionResult, in wire order): what
 * ``[r.ok for r in decode_multi_response(buf)]`` gives when it raises nothing and has no failure. It
 * returns None whenever it is not sure (an exception field, a field layout the fast reader does not
 * take, bad bytes): the caller then reads ``buf`` with the Python reader, which words any error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "" /* set by the build (hatch_build.py): the SHA-256 of this file */
#endif

#define MAX_ROW 32767
#define MAX_FAMILY 127

static PyObject *s_row, *s_cells, *s_timestamp, *s_kind, *s_ttl;

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

/* one put, its attributes held (new references) until the end */
typedef struct {
    PyObject *row;
    PyObject *cells;
    uint64_t ts;
    Py_ssize_t n;  /* cells, as counted in pass 1 */
    Py_ssize_t proto_len;
    Py_ssize_t action_len;
} Put;

static int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) {
        return 0;
    }
    Py_ssize_t cap = b->cap * 2;
    if (cap < b->len + more) {
        cap = b->len + more;
    }
    char *grown = PyMem_Realloc(b->data, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = grown;
    b->cap = cap;
    return 0;
}

static inline Py_ssize_t vlen(uint64_t v) {
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline void put_v(Buf *b, uint64_t v) {
    unsigned char *p = (unsigned char *)b->data + b->len;
    while (v >= 0x80) {
        *p++ = (unsigned char)((v & 0x7f) | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    b->len = (Py_ssize_t)((char *)p - b->data);
}

static inline void put_byte(Buf *b, unsigned char c) {
    b->data[b->len++] = (char)c;
}

static inline void put_raw(Buf *b, const char *p, Py_ssize_t n) {
    memcpy(b->data + b->len, p, (size_t)n);
    b->len += n;
}

static inline void put_be(Buf *b, uint64_t v, int width) {
    unsigned char *p = (unsigned char *)b->data + b->len;
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
    b->len += width;
}

static void release(Put *puts, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(puts[i].row);
        Py_XDECREF(puts[i].cells);
    }
    PyMem_Free(puts);
}

/* 1: a plain put, read into *p; 0: not one (the Python path takes the batch); -1: an error raised */
static int read_put(PyObject *m, PyObject *put_kind, Put *p) {
    p->row = NULL;
    p->cells = NULL;
    PyObject *kind = PyObject_GetAttr(m, s_kind);
    if (kind == NULL) {
        return -1;
    }
    Py_DECREF(kind); /* compared by identity only: the enum member outlives the call */
    if (kind != put_kind) {
        return 0;
    }
    PyObject *ttl = PyObject_GetAttr(m, s_ttl);
    if (ttl == NULL) {
        return -1;
    }
    Py_DECREF(ttl);
    if (ttl != Py_None) {
        return 0;
    }
    PyObject *stamp = PyObject_GetAttr(m, s_timestamp);
    if (stamp == NULL) {
        return -1;
    }
    if (!PyLong_CheckExact(stamp)) {
        Py_DECREF(stamp);
        return 0;
    }
    int overflow = 0;
    long long ts = PyLong_AsLongLongAndOverflow(stamp, &overflow);
    Py_DECREF(stamp);
    if (ts == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || ts < 0) {
        return 0;
    }
    p->ts = (uint64_t)ts;
    p->row = PyObject_GetAttr(m, s_row);
    if (p->row == NULL) {
        return -1;
    }
    Py_ssize_t rl = PyBytes_Check(p->row) ? PyBytes_GET_SIZE(p->row) : 0;
    if (rl < 1 || rl > MAX_ROW) {
        return 0;
    }
    p->cells = PyObject_GetAttr(m, s_cells);
    if (p->cells == NULL) {
        return -1;
    }
    if (!PyDict_CheckExact(p->cells) || PyDict_GET_SIZE(p->cells) == 0) {
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *column, *value;
    while (PyDict_Next(p->cells, &pos, &column, &value)) {
        if (!PyBytes_Check(column) || !PyBytes_Check(value)) {
            return 0;
        }
        const char *col = PyBytes_AS_STRING(column);
        Py_ssize_t ncol = PyBytes_GET_SIZE(column);
        const char *colon = memchr(col, ':', (size_t)ncol);
        Py_ssize_t nfam = colon ? (Py_ssize_t)(colon - col) : ncol;
        if (nfam < 1 || nfam > MAX_FAMILY) {
            return 0;
        }
    }
    p->n = PyDict_GET_SIZE(p->cells);
    p->proto_len = 1 + vlen((uint64_t)rl) + rl + 2 + 1 + vlen(p->ts) + 1 + vlen((uint64_t)p->n);
    return 1;
}

/* the put's cells as KeyValues; a dict changed since pass 1 (code run by a later put's attributes)
 * raises RuntimeError rather than send what pass 1 did not see */
static int write_cells(Buf *cb, const Put *p) {
    const char *row = PyBytes_AS_STRING(p->row);
    Py_ssize_t rl = PyBytes_GET_SIZE(p->row);
    Py_ssize_t pos = 0;
    PyObject *column, *value;
    if (PyDict_GET_SIZE(p->cells) != p->n) {
        PyErr_SetString(PyExc_RuntimeError, "a mutation's cells changed while the batch was encoded");
        return -1;
    }
    while (PyDict_Next(p->cells, &pos, &column, &value)) {
        if (!PyBytes_Check(column) || !PyBytes_Check(value)) {
            PyErr_SetString(PyExc_RuntimeError, "a mutation's cells changed while the batch was encoded");
            return -1;
        }
        const char *col = PyBytes_AS_STRING(column);
        Py_ssize_t ncol = PyBytes_GET_SIZE(column);
        const char *colon = memchr(col, ':', (size_t)ncol);
        Py_ssize_t nfam = colon ? (Py_ssize_t)(colon - col) : ncol;
        const char *qual = colon ? colon + 1 : col + ncol;
        Py_ssize_t nqual = colon ? ncol - nfam - 1 : 0;
        Py_ssize_t nval = PyBytes_GET_SIZE(value);
        Py_ssize_t key_len = 12 + rl + nfam + nqual;
        if (nfam < 1 || nfam > MAX_FAMILY) {
            PyErr_SetString(PyExc_RuntimeError, "a mutation's cells changed while the batch was encoded");
            return -1;
        }
        if (buf_reserve(cb, 14 + key_len + nval) < 0) {
            return -1;
        }
        put_be(cb, (uint64_t)(8 + key_len + nval), 4);
        put_be(cb, (uint64_t)key_len, 4);
        put_be(cb, (uint64_t)nval, 4);
        put_be(cb, (uint64_t)rl, 2);
        put_raw(cb, row, rl);
        put_byte(cb, (unsigned char)nfam);
        put_raw(cb, col, nfam);
        put_raw(cb, qual, nqual);
        put_be(cb, p->ts, 8);
        put_byte(cb, 4);
        put_raw(cb, PyBytes_AS_STRING(value), nval);
    }
    return 0;
}

static PyObject *encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "encode(groups, mutations, nonce_group, put_kind) takes 4 arguments");
        return NULL;
    }
    PyObject *put_kind = args[3];
    uint64_t nonce_group = 0;
    int has_group = args[2] != Py_None;
    if (has_group) {
        nonce_group = PyLong_AsUnsignedLongLong(args[2]);
        if (nonce_group == (uint64_t)-1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    /* tuples: reading a mutation's attributes may run Python code, which must not be able to change
     * what is being iterated */
    PyObject *groups = PySequence_Tuple(args[0]);
    if (groups == NULL) {
        return NULL;
    }
    PyObject *mutations = PySequence_Tuple(args[1]);
    if (mutations == NULL) {
        Py_DECREF(groups);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t ngroups = PyTuple_GET_SIZE(groups), nmut = PyTuple_GET_SIZE(mutations);
    PyObject **names = PyMem_Calloc((size_t)(ngroups ? ngroups : 1), sizeof(PyObject *));
    PyObject **positions = PyMem_Calloc((size_t)(ngroups ? ngroups : 1), sizeof(PyObject *));
    Py_ssize_t *ra_len = PyMem_Calloc((size_t)(ngroups ? ngroups : 1), sizeof(Py_ssize_t));
    Put *puts = NULL;
    Py_ssize_t nputs = 0, total = 0;
    Buf param = {NULL, 0, 0}, cb = {NULL, 0, 0};
    if (names == NULL || positions == NULL || ra_len == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* pass 1: the groups, their positions, and every put read and sized */
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        PyObject *pair = PyTuple_GET_ITEM(groups, g);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(pair, 0))) {
            PyErr_SetString(PyExc_TypeError, "a group must be a (region name: bytes, positions) pair");
            goto done;
        }
        names[g] = PyTuple_GET_ITEM(pair, 0);
        positions[g] = PySequence_Tuple(PyTuple_GET_ITEM(pair, 1));
        if (positions[g] == NULL) {
            goto done;
        }
        total += PyTuple_GET_SIZE(positions[g]);
    }
    puts = PyMem_Calloc((size_t)(total ? total : 1), sizeof(Put));
    if (puts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        Py_ssize_t nname = PyBytes_GET_SIZE(names[g]);
        Py_ssize_t spec = 3 + vlen((uint64_t)nname) + nname; /* 08 01 12 v(len) name */
        ra_len[g] = 1 + vlen((uint64_t)spec) + spec;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(positions[g]); k++) {
            Py_ssize_t i = PyNumber_AsSsize_t(PyTuple_GET_ITEM(positions[g], k), PyExc_IndexError);
            if (i == -1 && PyErr_Occurred()) {
                goto done;
            }
            if (i < 0 || i >= nmut) {
                PyErr_Format(PyExc_IndexError, "position %zd is outside the %zd mutations", i, nmut);
                goto done;
            }
            Put *p = &puts[nputs++];
            int plain = read_put(PyTuple_GET_ITEM(mutations, i), put_kind, p);
            if (plain < 0) {
                goto done;
            }
            if (plain == 0) {
                result = Py_None;
                Py_INCREF(result);
                goto done;
            }
            p->action_len = 1 + vlen((uint64_t)i + 1) + 1 + vlen((uint64_t)p->proto_len) + p->proto_len;
            ra_len[g] += 1 + vlen((uint64_t)p->action_len) + p->action_len;
        }
    }
    /* pass 2: the bytes */
    Py_ssize_t size = 11;
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        size += 1 + vlen((uint64_t)ra_len[g]) + ra_len[g];
    }
    if (buf_reserve(&param, size) < 0 || buf_reserve(&cb, 64 + total * 64) < 0) {
        goto done;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        Py_ssize_t nname = PyBytes_GET_SIZE(names[g]);
        put_byte(&param, 0x0a);
        put_v(&param, (uint64_t)ra_len[g]);
        put_byte(&param, 0x0a);
        put_v(&param, (uint64_t)(3 + vlen((uint64_t)nname) + nname));
        put_byte(&param, 0x08);
        put_byte(&param, 0x01);
        put_byte(&param, 0x12);
        put_v(&param, (uint64_t)nname);
        put_raw(&param, PyBytes_AS_STRING(names[g]), nname);
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(positions[g]); k++, at++) {
            const Put *p = &puts[at];
            Py_ssize_t i = PyNumber_AsSsize_t(PyTuple_GET_ITEM(positions[g], k), PyExc_IndexError);
            Py_ssize_t rl = PyBytes_GET_SIZE(p->row);
            put_byte(&param, 0x1a);
            put_v(&param, (uint64_t)p->action_len);
            put_byte(&param, 0x08);
            put_v(&param, (uint64_t)i + 1);
            put_byte(&param, 0x12);
            put_v(&param, (uint64_t)p->proto_len);
            put_byte(&param, 0x0a);
            put_v(&param, (uint64_t)rl);
            put_raw(&param, PyBytes_AS_STRING(p->row), rl);
            put_byte(&param, 0x10);
            put_byte(&param, 0x02);
            put_byte(&param, 0x20);
            put_v(&param, p->ts);
            put_byte(&param, 0x40);
            put_v(&param, (uint64_t)p->n);
            if (write_cells(&cb, p) < 0) {
                goto done;
            }
        }
    }
    if (has_group) {
        put_byte(&param, 0x10);
        put_v(&param, nonce_group);
    }
    result = Py_BuildValue("(y#y#)", param.data ? param.data : "", param.len, cb.data ? cb.data : "", cb.len);
done:
    if (puts != NULL) {
        release(puts, nputs);
    }
    if (positions != NULL) {
        for (Py_ssize_t g = 0; g < ngroups; g++) {
            Py_XDECREF(positions[g]);
        }
    }
    PyMem_Free(positions);
    PyMem_Free(names);
    PyMem_Free(ra_len);
    PyMem_Free(param.data);
    PyMem_Free(cb.data);
    Py_DECREF(mutations);
    Py_DECREF(groups);
    return result;
}

/* -- group ------------------------------------------------------------------------------------------ */

/* <0, 0, >0 as bytes a sorts before, equal to, after b (lexicographic, unsigned) */
static inline int bytes_cmp(PyObject *a, PyObject *b) {
    Py_ssize_t la = PyBytes_GET_SIZE(a), lb = PyBytes_GET_SIZE(b);
    int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), (size_t)(la < lb ? la : lb));
    if (c != 0) {
        return c;
    }
    return la < lb ? -1 : (la > lb ? 1 : 0);
}

static PyObject *group(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "group(starts, ends, mutations, pending) takes 4 arguments");
        return NULL;
    }
    PyObject *starts = args[0], *ends = args[1];
    if (!PyList_CheckExact(starts) || !PyList_CheckExact(ends) || PyList_GET_SIZE(starts) != PyList_GET_SIZE(ends)) {
        PyErr_SetString(PyExc_TypeError, "group: starts and ends must be lists of the same length");
        return NULL;
    }
    Py_ssize_t n_regions = PyList_GET_SIZE(starts);
    for (Py_ssize_t k = 0; k < n_regions; k++) {
        if (!PyBytes_CheckExact(PyList_GET_ITEM(starts, k)) || !PyBytes_CheckExact(PyList_GET_ITEM(ends, k))) {
            Py_RETURN_NONE;
        }
    }
    PyObject *mutations = PySequence_Fast(args[2], "group: mutations must be a sequence");
    if (mutations == NULL) {
        return NULL;
    }
    PyObject *pending = PySequence_Fast(args[3], "group: pending must be a sequence");
    if (pending == NULL) {
        Py_DECREF(mutations);
        return NULL;
    }
    Py_ssize_t n_mut = PySequence_Fast_GET_SIZE(mutations), n_pending = PySequence_Fast_GET_SIZE(pending);
    PyObject **muts = PySequence_Fast_ITEMS(mutations), **positions = PySequence_Fast_ITEMS(pending);
    PyObject *result = NULL, *holes = NULL, *found = NULL;
    /* per region: its list of positions (NULL until seen); seen: region indexes in first-seen order */
    PyObject **lists = PyMem_Calloc((size_t)(n_regions ? n_regions : 1), sizeof(PyObject *));
    Py_ssize_t *seen = PyMem_Malloc((size_t)(n_regions ? n_regions : 1) * sizeof(Py_ssize_t));
    Py_ssize_t n_seen = 0;
    int not_bytes = 0;
    if (lists == NULL || seen == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    holes = PyList_New(0);
    if (holes == NULL) {
        goto done;
    }
    for (Py_ssize_t j = 0; j < n_pending; j++) {
        PyObject *pos = positions[j];
        Py_ssize_t i = PyLong_AsSsize_t(pos);
        if (i == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (i < 0 || i >= n_mut) {
            PyErr_Format(PyExc_IndexError, "position %zd is outside the %zd mutations", i, n_mut);
            goto done;
        }
        PyObject *row = PyObject_GetAttr(muts[i], s_row);
        if (row == NULL) {
            goto done;
        }
        if (!PyBytes_CheckExact(row)) {
            Py_DECREF(row);
            not_bytes = 1;
            goto done;
        }
        Py_ssize_t lo = 0, hi = n_regions;
        while (lo < hi) {  /* bisect_right(starts, row) */
            Py_ssize_t mid = (lo + hi) / 2;
            if (bytes_cmp(row, PyList_GET_ITEM(starts, mid)) < 0) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Py_ssize_t k = lo - 1;
        int held = k >= 0;
        if (held) {
            PyObject *end = PyList_GET_ITEM(ends, k);
            held = PyBytes_GET_SIZE(end) == 0 || bytes_cmp(row, end) < 0;
        }
        Py_DECREF(row);
        PyObject *into = held ? lists[k] : holes;
        if (into == NULL) {
            into = lists[k] = PyList_New(0);
            if (into == NULL) {
                goto done;
            }
            seen[n_seen++] = k;
        }
        if (PyList_Append(into, pos) < 0) {
            goto done;
        }
    }
    found = PyDict_New();
    if (found == NULL) {
        goto done;
    }
    for (Py_ssize_t s = 0; s < n_seen; s++) {
        PyObject *key = PyLong_FromSsize_t(seen[s]);
        if (key == NULL || PyDict_SetItem(found, key, lists[seen[s]]) < 0) {
            Py_XDECREF(key);
            goto done;
        }
        Py_DECREF(key);
    }
    result = PyTuple_Pack(2, found, holes);
done:
    if (lists != NULL) {
        for (Py_ssize_t s = 0; s < n_seen; s++) {
            Py_XDECREF(lists[seen[s]]);
        }
    }
    PyMem_Free(lists);
    PyMem_Free(seen);
    Py_XDECREF(found);
    Py_XDECREF(holes);
    Py_DECREF(mutations);
    Py_DECREF(pending);
    if (not_bytes && result == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return result;
}

/* -- decode_ok -------------------------------------------------------------------------------------- */

/* the varint at p[*pos..end) into *out, advancing *pos: 0, or -1 when truncated or wider than 64 bits */
static inline int read_v(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
        if (*pos >= end) {
            return -1;
        }
        unsigned char b = p[(*pos)++];
        if (shift == 63 && b > 1) {
            return -1;
        }
        v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* One RegionActionResult's ok indexes appended to a new list; NULL with no error set: not sure (the
 * caller returns None); NULL with an error: raised */
static PyObject *region_ok(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, int *unsure) {
    PyObject *ok = PyList_New(0);
    if (ok == NULL) {
        return NULL;
    }
    while (pos < end) {
        unsigned char key = p[pos++];
        uint64_t size;
        if (key >= 0x80 || ((key & 7) != 0 && (key & 7) != 2) || read_v(p, &pos, end, &size) < 0) {
            goto unsure;
        }
        if ((key & 7) == 0) {
            continue;  /* a varint field: nothing to read */
        }
        if (size > (uint64_t)(end - pos) || key == 0x12) {  /* past the end, or the whole region failed */
            goto unsure;
        }
        Py_ssize_t stop = pos + (Py_ssize_t)size;
        if (key == 0x0a) {  /* ResultOrException{index 1, result 2, exception 3, ...} */
            int has_index = 0;
            uint64_t index = 0;
            while (pos < stop) {
                unsigned char k = p[pos++];
                uint64_t n;
                if (k >= 0x80 || ((k & 7) != 0 && (k & 7) != 2) || read_v(p, &pos, stop, &n) < 0) {
                    goto unsure;
                }
                if ((k & 7) == 0) {
                    if (k == 0x08) {
                        index = n;
                        has_index = 1;
                    }
                    continue;
                }
                if (n > (uint64_t)(stop - pos) || k == 0x1a) {  /* past its end, or an exception */
                    goto unsure;
                }
                pos += (Py_ssize_t)n;
            }
            if (has_index) {
                PyObject *i = PyLong_FromUnsignedLongLong(index);
                if (i == NULL || PyList_Append(ok, i) < 0) {
                    Py_XDECREF(i);
                    Py_DECREF(ok);
                    return NULL;
                }
                Py_DECREF(i);
            }
        }
        pos = stop;
    }
    return ok;
unsure:
    Py_DECREF(ok);
    *unsure = 1;
    return NULL;
}

static PyObject *decode_ok(PyObject *module, PyObject *arg) {
    (void)module;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "decode_ok: buf must be bytes");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t pos = 0, end = PyBytes_GET_SIZE(arg);
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    while (pos < end) {
        uint64_t key, size;
        if (read_v(p, &pos, end, &key) < 0) {
            goto unsure;
        }
        switch (key & 7) {
        case 0:
            if (read_v(p, &pos, end, &size) < 0) {
                goto unsure;
            }
            break;
        case 1:
        case 5: {
            Py_ssize_t width = (key & 7) == 1 ? 8 : 4;
            if (end - pos < width) {
                goto unsure;
            }
            pos += width;
            break;
        }
        case 2: {
            if (read_v(p, &pos, end, &size) < 0 || size > (uint64_t)(end - pos)) {
                goto unsure;
            }
            if (key >> 3 == 1) {
                int unsure = 0;
                PyObject *ok = region_ok(p, pos, pos + (Py_ssize_t)size, &unsure);
                if (ok == NULL) {
                    if (unsure) {
                        goto unsure;
                    }
                    Py_DECREF(out);
                    return NULL;
                }
                int failed = PyList_Append(out, ok);
                Py_DECREF(ok);
                if (failed < 0) {
                    Py_DECREF(out);
                    return NULL;
                }
            }
            pos += (Py_ssize_t)size;
            break;
        }
        default:
            goto unsure;
        }
    }
    return out;
unsure:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(groups, mutations, nonce_group, put_kind) -> (param, cellblock) | None (see the module's source)."},
    {"group", (PyCFunction)(void (*)(void))group, METH_FASTCALL,
     "group(starts, ends, mutations, pending) -> (found, holes) | None (see the module's source)."},
    {"decode_ok", (PyCFunction)decode_ok, METH_O,
     "decode_ok(buf) -> list of lists of indexes | None (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_multiwire", "The compiled forms of the native client's Multi path (see the module's source).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__multiwire(void) {
    s_row = PyUnicode_InternFromString("row");
    s_cells = PyUnicode_InternFromString("cells");
    s_timestamp = PyUnicode_InternFromString("timestamp");
    s_kind = PyUnicode_InternFromString("kind");
    s_ttl = PyUnicode_InternFromString("ttl");
    if (s_row == NULL || s_cells == NULL || s_timestamp == NULL || s_kind == NULL || s_ttl == NULL) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
