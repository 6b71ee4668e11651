/* The compiled loop of pipeline.core.routes.router's plain path: a run of Kafka records of one JSON topic
 * to the mutations of the topic's routes, in one call.
 *
 * Contract: ``route_run(records, start, stop, tp, routes, env)`` returns ``(stop, mutations)`` equal
 * to ``Router.route_run``'s pure-Python loop (``_route_plain``) for the same records: the same stop
 * (the first record the routes' fast forms do not take, which the caller hands to the reference) and
 * the same mutations (same class, attributes and weights) in the same order, or the same exception
 * raised. A property test checks it, and another checks both against the reference.
 *
 * Per record, the fast path covers what most records are: a ``bytes`` value that orjson parses to a
 * dict that is not a Kafka Connect envelope (exactly the keys ``schema`` and ``payload``) and holds
 * no run of 20 digits or minus signs (such a value may hold an integer beyond 64 bits, which
 * ``pipeline.core.records.decode.loads`` re-reads exactly). When every route of the run is a plan with a key
 * plan, a value is first read by this module's scanner into a *sparse event* (the declared fields
 * only; see "the sparse event" below), and by orjson only when the scanner or a plan refuses it. Any
 * other record goes through ``env.one(rec, tp)`` (the Python loop's own steps for one record: it
 * returns the record's mutations, or None when the fast forms do not take it: the run stops there).
 * For each route the record feeds, a *plan* (a route whose columns all use the ``text`` encoding)
 * builds the put here; a route without a plan is called (its fast form ``mutation(event, origin)``,
 * which returns a Mutation or None). A plan's guards only choose: anything they do not take (a
 * missing or null field, a type other than str, int or float for a column, a timestamp outside
 * ``[0, 2**63 - 1]``, a key or cell over its limit, no cell at all, an exception) ends in the route's
 * fast form, and a None from it stops the run at that record. The key is built here by a *key plan*
 * when the route's key is made of text, literal, murmur3 salt and reverse-timestamp segments
 * (``planned_key``), else by the route's generated ``build(event)``.
 *
 * A plan (built by pipeline.core.routes.router): ``(mutation, build or key plan, table, ts_path | None,
 * columns, max_key, max_cell)`` with ``columns`` a tuple of ``(name: bytes, path: tuple[str, ...], required)``.
 * ``env``: ``(loads, one, origin_type, mutation_type, put_kind)`` where ``loads`` is
 * ``orjson.loads``. Objects of ``origin_type`` and ``mutation_type`` (``__slots__`` classes) are
 * made without running their ``__init__``: their slots are set as their ``__init__`` sets them
 * (checked when the module prepares an ``env``: every slot must be a plain member). The GIL is held
 * throughout.
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "" /* set by the build (hatch_build.py): the SHA-256 of this file */
#endif

/* -- slot access ---------------------------------------------------------------------------------- */

static Py_ssize_t slot_offset(PyTypeObject *type, const char *name) {
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name); /* borrowed */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a plain slot", type->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a writable object slot", type->tp_name, name);
        return -1;
    }
    return member->offset;
}

static inline void set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value) {
    PyObject **at = (PyObject **)((char *)obj + offset);
    PyObject *old = *at;
    Py_INCREF(value);
    *at = value;
    Py_XDECREF(old);
}

/* The slots of Origin (tp, offset) and Mutation (table, row, kind, cells, timestamp, origin, amount,
 * weight), found once per env and cached by the env's identity. */
typedef struct {
    PyObject *env; /* the env tuple these offsets belong to (a strong reference) */
    PyTypeObject *origin_type, *mutation_type;
    Py_ssize_t o_tp, o_offset;
    Py_ssize_t m_table, m_row, m_kind, m_cells, m_timestamp, m_origin, m_amount, m_weight;
} Slots;

static Slots slots_cache = {NULL};
static PyObject *zero, *ts_max;

static int prepare_slots(PyObject *env, PyObject *origin_type, PyObject *mutation_type) {
    if (slots_cache.env == env) {
        return 0;
    }
    if (!PyType_Check(origin_type) || !PyType_Check(mutation_type)) {
        PyErr_SetString(PyExc_TypeError, "env: the origin and mutation types must be classes");
        return -1;
    }
    Slots s;
    s.origin_type = (PyTypeObject *)origin_type;
    s.mutation_type = (PyTypeObject *)mutation_type;
    if ((s.o_tp = slot_offset(s.origin_type, "tp")) < 0 || (s.o_offset = slot_offset(s.origin_type, "offset")) < 0 ||
        (s.m_table = slot_offset(s.mutation_type, "table")) < 0 || (s.m_row = slot_offset(s.mutation_type, "row")) < 0 ||
        (s.m_kind = slot_offset(s.mutation_type, "kind")) < 0 ||
        (s.m_cells = slot_offset(s.mutation_type, "cells")) < 0 ||
        (s.m_timestamp = slot_offset(s.mutation_type, "timestamp")) < 0 ||
        (s.m_origin = slot_offset(s.mutation_type, "origin")) < 0 ||
        (s.m_amount = slot_offset(s.mutation_type, "amount")) < 0 ||
        (s.m_weight = slot_offset(s.mutation_type, "weight")) < 0) {
        return -1;
    }
    Py_INCREF(env);
    Py_INCREF(origin_type);
    Py_INCREF(mutation_type);
    Py_XDECREF(slots_cache.env);
    Py_XDECREF((PyObject *)slots_cache.origin_type);
    Py_XDECREF((PyObject *)slots_cache.mutation_type);
    s.env = env;
    slots_cache = s;
    return 0;
}

static PyObject *new_origin(PyObject *tp, PyObject *offset) {
    PyTypeObject *type = slots_cache.origin_type;
    PyObject *o = type->tp_alloc(type, 0);
    if (o == NULL) {
        return NULL;
    }
    set_slot(o, slots_cache.o_tp, tp);
    set_slot(o, slots_cache.o_offset, offset);
    return o;
}

/* -- the big-integer check: a run of 20 bytes from [0-9-] (pipeline.core.records.decode.loads) -------------- */

static int has_long_run(const char *p, Py_ssize_t n) {
    Py_ssize_t run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if ((c >= '0' && c <= '9') || c == '-') {
            if (++run >= 20) {
                return 1;
            }
        } else {
            run = 0;
        }
    }
    return 0;
}

/* -- one planned put ------------------------------------------------------------------------------ */

/* event[path[0]][path[1]]...: a new reference; NULL without an error set when a key is missing or a
 * parent is not a dict (*parent_ok tells whether the last step failed only by its key's absence) */
static PyObject *lookup(PyObject *event, PyObject *path, int *parent_ok) {
    PyObject *cur = event;
    Py_ssize_t n = PyTuple_GET_SIZE(path);
    *parent_ok = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyDict_CheckExact(cur)) {
            return NULL;
        }
        PyObject *next = PyDict_GetItemWithError(cur, PyTuple_GET_ITEM(path, i)); /* borrowed */
        if (next == NULL) {
            if (PyErr_Occurred()) {
                PyErr_Clear();
                return NULL;
            }
            *parent_ok = i == n - 1;
            return NULL;
        }
        cur = next;
    }
    Py_INCREF(cur);
    return cur;
}

/* A non-integer number at a declared path whose JSON text is the text Python's repr gives its float
 * (the text encoding of a float column): the text itself, with no float made and none printed. */
#define FLOAT_TEXT_MAX 40

typedef struct {
    PyObject_HEAD
    Py_ssize_t len;
    char text[FLOAT_TEXT_MAX];
} FloatText;

static PyTypeObject FloatTextType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pipeline.core.routes._routerun.FloatText",
    .tp_basicsize = sizeof(FloatText),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A float of a sparse event, as its JSON text (which is its repr).",
};

/* the text encoding of a str, int or float (exact classes; a sparse event's FloatText is a float): a new
 * bytes object; NULL without an error set for anything else (the route's own path decides) */
static PyObject *text_of(PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &FloatTextType) { /* a float of a sparse event: its repr, as its JSON text */
        return PyBytes_FromStringAndSize(((FloatText *)v)->text, ((FloatText *)v)->len);
    }
    if (t == &PyUnicode_Type) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (s == NULL) {
            PyErr_Clear();
            return NULL;
        }
        return PyBytes_FromStringAndSize(s, n);
    }
    if (t == &PyLong_Type || t == &PyFloat_Type) {
        PyObject *str = PyObject_Str(v);
        if (str == NULL) {
            PyErr_Clear();
            return NULL;
        }
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(str, &n);
        PyObject *out = s == NULL ? NULL : PyBytes_FromStringAndSize(s, n);
        Py_DECREF(str);
        if (out == NULL) {
            PyErr_Clear();
        }
        return out;
    }
    return NULL;
}

/* -- a key plan: the rowkey of the common segments, built here ----------------------------------- */

/* MurmurHash3 x86_32 (Austin Appleby's public-domain design), as mmh3.hash(data, 0, signed=False) */
static uint32_t murmur3_32(const unsigned char *data, Py_ssize_t len, uint32_t seed) {
    const uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
    uint32_t h = seed;
    Py_ssize_t nblocks = len / 4;
    for (Py_ssize_t i = 0; i < nblocks; i++) {
        const unsigned char *b = data + i * 4;
        uint32_t k = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
        k *= c1;
        k = (k << 15) | (k >> 17);
        k *= c2;
        h ^= k;
        h = (h << 13) | (h >> 19);
        h = h * 5 + 0xe6546b64u;
    }
    const unsigned char *tail = data + nblocks * 4;
    uint32_t k = 0;
    switch (len & 3) {
    case 3:
        k ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        k ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = (k << 15) | (k >> 17);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    char local[256];
} KeyBuf;

static int kb_add(KeyBuf *k, const char *p, Py_ssize_t n) {
    if (k->len + n > k->cap) {
        Py_ssize_t cap = (k->len + n) * 2;
        char *grown = PyMem_Malloc((size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(grown, k->data, (size_t)k->len);
        if (k->data != k->local) {
            PyMem_Free(k->data);
        }
        k->data = grown;
        k->cap = cap;
    }
    memcpy(k->data + k->len, p, (size_t)n);
    k->len += n;
    return 0;
}

static void kb_free(KeyBuf *k) {
    if (k->data != k->local) {
        PyMem_Free(k->data);
    }
}

/* a key field's text (str: UTF-8; an exact int: decimal), appended; 1 when the field is missing or of
 * another type (the key's own builder decides), -1 on error. ``term`` (or NULL): a delimiter the text
 * must not contain. */
static int key_text(KeyBuf *k, PyObject *event, PyObject *path, PyObject *term) {
    int parent_ok;
    PyObject *v = lookup(event, path, &parent_ok);
    if (v == NULL) {
        return 1;
    }
    PyObject *digits = NULL;
    const char *s = NULL;
    Py_ssize_t n = 0;
    if (PyUnicode_CheckExact(v)) {
        s = PyUnicode_AsUTF8AndSize(v, &n);
    } else if (PyLong_CheckExact(v)) {
        digits = PyObject_Str(v);
        s = digits == NULL ? NULL : PyUnicode_AsUTF8AndSize(digits, &n);
    }
    int rc = 1;
    if (s != NULL) {
        if (term != Py_None &&
            memmem(s, (size_t)n, PyBytes_AS_STRING(term), (size_t)PyBytes_GET_SIZE(term)) != NULL) {
            rc = 1;
        } else {
            rc = kb_add(k, s, n);
        }
    } else {
        PyErr_Clear();
    }
    Py_XDECREF(digits);
    Py_DECREF(v);
    return rc;
}

#define JAVA_LONG_MAX 9223372036854775807LL

/* The key of ``event`` by the plan's ops: a new bytes object; NULL without an error set when an op
 * refuses (the route's own path decides); NULL with an error set on failure. Ops (tuples):
 * (0, path, term | None) text; (1, data) literal; (2, paths, n) murmur3 salt over the texts joined
 * by a zero byte; (3, path, as_text) reverse timestamp; (4, n) first: the murmur3 salt of the rest. */
static PyObject *planned_key(PyObject *ops, PyObject *event) {
    KeyBuf k;
    k.data = k.local;
    k.len = 0;
    k.cap = (Py_ssize_t)sizeof(k.local);
    Py_ssize_t nops = PyTuple_GET_SIZE(ops);
    long key_salt = 0;
    for (Py_ssize_t i = 0; i < nops; i++) {
        PyObject *op = PyTuple_GET_ITEM(ops, i);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(op, 0));
        int rc = 0;
        switch (kind) {
        case 0:
            rc = key_text(&k, event, PyTuple_GET_ITEM(op, 1), PyTuple_GET_ITEM(op, 2));
            break;
        case 1: {
            PyObject *data = PyTuple_GET_ITEM(op, 1);
            rc = kb_add(&k, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
            break;
        }
        case 2: {
            PyObject *paths = PyTuple_GET_ITEM(op, 1);
            long n = PyLong_AsLong(PyTuple_GET_ITEM(op, 2));
            KeyBuf in;
            in.data = in.local;
            in.len = 0;
            in.cap = (Py_ssize_t)sizeof(in.local);
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(paths) && rc == 0; j++) {
                if (j > 0) {
                    rc = kb_add(&in, "\0", 1);
                }
                if (rc == 0) {
                    rc = key_text(&in, event, PyTuple_GET_ITEM(paths, j), Py_None);
                }
            }
            if (rc == 0) {
                char salt = (char)(murmur3_32((const unsigned char *)in.data, in.len, 0) % (uint32_t)n);
                rc = kb_add(&k, &salt, 1);
            }
            kb_free(&in);
            break;
        }
        case 3: {
            int parent_ok;
            PyObject *v = lookup(event, PyTuple_GET_ITEM(op, 1), &parent_ok);
            int overflow = 0;
            long long t = -1;
            if (v != NULL && PyLong_CheckExact(v)) {
                t = PyLong_AsLongLongAndOverflow(v, &overflow);
            }
            Py_XDECREF(v);
            if (t < 0 || overflow) {
                PyErr_Clear();
                rc = 1;
                break;
            }
            unsigned long long r = (unsigned long long)(JAVA_LONG_MAX - t);
            if (PyTuple_GET_ITEM(op, 2) == Py_True) {
                char text[32];
                int len = snprintf(text, sizeof(text), "%019llu", r);
                rc = kb_add(&k, text, len);
            } else {
                char be[8];
                for (int b = 7; b >= 0; b--) {
                    be[b] = (char)(r & 0xff);
                    r >>= 8;
                }
                rc = kb_add(&k, be, 8);
            }
            break;
        }
        case 4:
            key_salt = PyLong_AsLong(PyTuple_GET_ITEM(op, 1));
            break;
        default:
            PyErr_Format(PyExc_ValueError, "unknown key op %ld", kind);
            rc = -1;
        }
        if (rc != 0) {
            kb_free(&k);
            return NULL; /* rc 1: no error set, the key's own builder decides */
        }
    }
    PyObject *key;
    if (key_salt > 0) {
        char salt = (char)(murmur3_32((const unsigned char *)k.data, k.len, 0) % (uint32_t)key_salt);
        key = PyBytes_FromStringAndSize(NULL, k.len + 1);
        if (key != NULL) {
            PyBytes_AS_STRING(key)[0] = salt;
            memcpy(PyBytes_AS_STRING(key) + 1, k.data, (size_t)k.len);
        }
    } else if (k.len == 0) {
        key = NULL; /* an empty key: the builder's reference raises empty_key */
    } else {
        key = PyBytes_FromStringAndSize(k.data, k.len);
    }
    kb_free(&k);
    return key;
}

/* The planned put of ``event``: a new Mutation, or NULL without an error set when a guard refuses
 * (the caller then calls the route's own mutation), or NULL with an error set (propagated). */
static PyObject *planned_put(PyObject *plan, PyObject *event, PyObject *origin, PyObject *put_kind) {
    PyObject *build = PyTuple_GET_ITEM(plan, 1);
    PyObject *table = PyTuple_GET_ITEM(plan, 2);
    PyObject *ts_path = PyTuple_GET_ITEM(plan, 3);
    PyObject *columns = PyTuple_GET_ITEM(plan, 4);
    Py_ssize_t max_key = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, 5));
    Py_ssize_t max_cell = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, 6));
    PyObject *row = NULL, *ts = NULL, *cells = NULL, *m = NULL, *weight = NULL;
    int parent_ok;

    if (PyTuple_CheckExact(build)) { /* a key plan */
        row = planned_key(build, event);
        if (row == NULL) {
            return NULL; /* refused (no error set) or failed */
        }
    } else {
        row = PyObject_CallOneArg(build, event);
        if (row == NULL) {
            PyErr_Clear(); /* the route's own path raises the precise error */
            return NULL;
        }
    }
    if (!PyBytes_CheckExact(row) || PyBytes_GET_SIZE(row) > max_key) {
        goto refuse;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(row) + 16;
    if (ts_path != Py_None) {
        ts = lookup(event, ts_path, &parent_ok);
        if (ts == NULL || !PyLong_CheckExact(ts)) {
            goto refuse;
        }
        /* HBase's cells: 0 <= ts <= 2**63 - 1 */
        if (PyObject_RichCompareBool(ts, zero, Py_LT) != 0 || PyObject_RichCompareBool(ts, ts_max, Py_GT) != 0) {
            goto refuse;
        }
    } else {
        ts = Py_NewRef(Py_None);
    }
    cells = PyDict_New();
    if (cells == NULL) {
        goto fail;
    }
    Py_ssize_t ncols = PyTuple_GET_SIZE(columns);
    for (Py_ssize_t i = 0; i < ncols; i++) {
        PyObject *col = PyTuple_GET_ITEM(columns, i);
        PyObject *name = PyTuple_GET_ITEM(col, 0);
        int required = PyTuple_GET_ITEM(col, 2) == Py_True;
        PyObject *v = lookup(event, PyTuple_GET_ITEM(col, 1), &parent_ok);
        if (v == NULL || v == Py_None) {
            Py_XDECREF(v);
            if (!required && (v != NULL || parent_ok)) {
                continue; /* an optional column absent or null: no cell */
            }
            goto refuse;
        }
        PyObject *raw = text_of(v);
        Py_DECREF(v);
        if (raw == NULL) {
            goto refuse;
        }
        Py_ssize_t n = PyBytes_GET_SIZE(raw);
        if (n > max_cell) {
            Py_DECREF(raw);
            goto refuse;
        }
        int rc = PyDict_SetItem(cells, name, raw);
        Py_DECREF(raw);
        if (rc < 0) {
            goto fail;
        }
        size += PyBytes_GET_SIZE(name) + 8 + n;
    }
    if (PyDict_GET_SIZE(cells) == 0) {
        goto refuse; /* no cell: no put */
    }
    weight = PyLong_FromSsize_t(size);
    if (weight == NULL) {
        goto fail;
    }
    PyTypeObject *type = slots_cache.mutation_type;
    m = type->tp_alloc(type, 0);
    if (m == NULL) {
        goto fail;
    }
    set_slot(m, slots_cache.m_table, table);
    set_slot(m, slots_cache.m_row, row);
    set_slot(m, slots_cache.m_kind, put_kind);
    set_slot(m, slots_cache.m_cells, cells);
    set_slot(m, slots_cache.m_timestamp, ts);
    set_slot(m, slots_cache.m_origin, origin);
    set_slot(m, slots_cache.m_amount, zero);
    set_slot(m, slots_cache.m_weight, weight);
    Py_DECREF(weight);
    Py_DECREF(cells);
    Py_DECREF(ts);
    Py_DECREF(row);
    return m;
refuse:
    PyErr_Clear();
fail:
    Py_XDECREF(weight);
    Py_XDECREF(cells);
    Py_XDECREF(ts);
    Py_XDECREF(row);
    return NULL;
}

/* -- the sparse event: a plan's declared fields read straight from the JSON text ------------------ */

/* When every route of a run is a plan with a key plan, a record's value is first read by this
 * scanner instead of orjson. It validates the whole document and builds a *sparse event*: a dict of
 * the declared paths only (the plans' key, timestamp and column paths), with the values orjson gives
 * at those paths. It accepts a subset of what orjson accepts and refuses the rest (a return of 1,
 * no error set), which orjson then reads as before:
 *
 * - the document is one JSON object (RFC 8259) with only JSON whitespace around it, nested at most
 *   SCAN_DEPTH_MAX deep, in strict UTF-8 (no overlong forms, no surrogates);
 * - a ``\u`` escape of a surrogate (paired or not) is refused, as is a key with an escape where a
 *   declared key could be;
 * - a number has at most 18 integer digits, 18 fraction digits and two exponent digits (so no
 *   accepted number overflows a double or a 64-bit integer); at a declared path a non-integer has at
 *   most 17 significant digits, read by Python's correctly rounded strtod (orjson's reading is
 *   correctly rounded too: the same double).
 *
 * At a declared path, an object with declared children becomes a sparse dict of them; an array, or
 * an object with none, becomes Ellipsis (a plan refuses both, as it refuses a list or a dict); a key
 * given twice keeps its last value, as orjson does. A plan that refuses a sparse event makes the
 * caller read the record again with orjson, whole, so that a sparse event only ever yields what every
 * plan takes, and that is what the whole event yields. */

#define TRIE_MAX 64
#define SCAN_DEPTH_MAX 64

typedef struct {
    int n;
    int parent[TRIE_MAX]; /* -1: a top-level key */
    int children[TRIE_MAX + 1]; /* children[i + 1]: how many nodes have parent i; children[0]: the root's */
    PyObject *name[TRIE_MAX]; /* borrowed from the plans' path tuples (alive for the run) */
    const char *utf8[TRIE_MAX];
    Py_ssize_t len[TRIE_MAX];
} Trie;

/* the node under ``parent`` named by ``len`` bytes at ``p``; -1 when none */
static int trie_child(const Trie *t, int parent, const char *p, Py_ssize_t len) {
    for (int i = 0; i < t->n; i++) {
        if (t->parent[i] == parent && t->len[i] == len && memcmp(t->utf8[i], p, (size_t)len) == 0) {
            return i;
        }
    }
    return -1;
}

/* 0 added; 1 when the path cannot be declared here (not a tuple of str, empty, or the trie is full) */
static int trie_add(Trie *t, PyObject *path) {
    if (!PyTuple_CheckExact(path) || PyTuple_GET_SIZE(path) == 0) {
        return 1;
    }
    int at = -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(path); i++) {
        PyObject *name = PyTuple_GET_ITEM(path, i);
        if (!PyUnicode_CheckExact(name)) {
            return 1;
        }
        Py_ssize_t len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(name, &len);
        if (utf8 == NULL) {
            PyErr_Clear();
            return 1;
        }
        int child = trie_child(t, at, utf8, len);
        if (child < 0) {
            if (t->n == TRIE_MAX) {
                return 1;
            }
            child = t->n++;
            t->parent[child] = at;
            t->name[child] = name;
            t->utf8[child] = utf8;
            t->len[child] = len;
            t->children[child + 1] = 0;
            t->children[at + 1]++;
        }
        at = child;
    }
    return 0;
}

/* The trie of every path the routes' plans read; t->n == 0 when some route is not a plan with a key
 * plan (its code may read any field: the run reads whole events). */
static void trie_of(Trie *t, PyObject *routes) {
    t->n = 0;
    t->children[0] = 0;
    Py_ssize_t nroutes = PyTuple_GET_SIZE(routes);
    int ok = nroutes > 0;
    for (Py_ssize_t r = 0; r < nroutes && ok; r++) {
        PyObject *plan = PyTuple_GET_ITEM(routes, r);
        if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 7 || !PyTuple_CheckExact(PyTuple_GET_ITEM(plan, 1))) {
            ok = 0;
            break;
        }
        PyObject *ops = PyTuple_GET_ITEM(plan, 1);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ops) && ok; i++) {
            PyObject *op = PyTuple_GET_ITEM(ops, i);
            long kind = PyLong_AsLong(PyTuple_GET_ITEM(op, 0));
            if (kind == 0 || kind == 3) {
                ok = trie_add(t, PyTuple_GET_ITEM(op, 1)) == 0;
            } else if (kind == 2) {
                PyObject *paths = PyTuple_GET_ITEM(op, 1);
                for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(paths) && ok; j++) {
                    ok = trie_add(t, PyTuple_GET_ITEM(paths, j)) == 0;
                }
            } else if (kind != 1 && kind != 4) {
                ok = 0;
            }
        }
        PyObject *ts_path = PyTuple_GET_ITEM(plan, 3);
        if (ok && ts_path != Py_None) {
            ok = trie_add(t, ts_path) == 0;
        }
        PyObject *columns = PyTuple_GET_ITEM(plan, 4);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(columns) && ok; i++) {
            ok = trie_add(t, PyTuple_GET_ITEM(PyTuple_GET_ITEM(columns, i), 1)) == 0;
        }
    }
    if (!ok) {
        PyErr_Clear();
        t->n = 0;
    }
}

/* The tries of the last few ``routes`` tuples seen, by identity: a Router passes the same tuple for a
 * topic on every call, so a run of a few records (a worker below saturation) does not rebuild it. An
 * entry holds a reference to its tuple, whose path tuples own the names the trie borrows. */
#define TRIE_CACHE 8

static struct {
    PyObject *routes;
    Trie trie;
} trie_cache[TRIE_CACHE];
static int trie_cache_next = 0;

static const Trie *cached_trie(PyObject *routes) {
    for (int i = 0; i < TRIE_CACHE; i++) {
        if (trie_cache[i].routes == routes) {
            return &trie_cache[i].trie;
        }
    }
    int slot = trie_cache_next;
    trie_cache_next = (trie_cache_next + 1) % TRIE_CACHE;
    Py_XDECREF(trie_cache[slot].routes);
    Py_INCREF(routes);
    trie_cache[slot].routes = routes;
    trie_of(&trie_cache[slot].trie, routes);
    return &trie_cache[slot].trie;
}

typedef struct {
    const unsigned char *p, *end;
    int depth;
    const Trie *trie;
} Scan;

static inline void scan_ws(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) {
        s->p++;
    }
}

static inline int is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}

static int hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v |= (unsigned)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            v |= (unsigned)(c - 'A' + 10);
        } else {
            return 1;
        }
    }
    *out = v;
    return 0;
}

/* the length of the strict UTF-8 sequence at p (2 to 4), or 0 when it is not one */
static int utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) {
            lo = 0xA0;
        } else if (c == 0xED) {
            hi = 0x9F; /* no surrogates */
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) {
            lo = 0x90;
        } else if (c == 0xF4) {
            hi = 0x8F;
        }
    } else {
        return 0;
    }
    if (end - p < n || p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (int i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) {
            return 0;
        }
    }
    return n;
}

/* A string at s->p (its opening quote): 0 with s->p past its closing quote, *raw and *len its bytes
 * between the quotes, *escaped and *ascii set; 1 when refused. */
static int scan_string(Scan *s, const unsigned char **raw, Py_ssize_t *len, int *escaped, int *ascii) {
    const unsigned char *p = s->p + 1, *end = s->end;
    int esc = 0, asc = 1;
    *raw = p;
    while (p < end) {
        unsigned char c = *p;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            p++;
        } else if (c == '"') {
            *len = p - *raw;
            *escaped = esc;
            *ascii = asc;
            s->p = p + 1;
            return 0;
        } else if (c == '\\') {
            esc = 1;
            if (end - p < 2) {
                return 1;
            }
            unsigned char e = p[1];
            if (e == 'u') {
                unsigned cp;
                if (end - p < 6 || hex4(p + 2, &cp) || (cp >= 0xD800 && cp <= 0xDFFF)) {
                    return 1;
                }
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
            } else {
                return 1;
            }
        } else if (c >= 0x80) {
            int n = utf8_seq(p, end);
            if (n == 0) {
                return 1;
            }
            asc = 0;
            p += n;
        } else {
            return 1; /* a control character */
        }
    }
    return 1;
}

/* Whether repr(float(text)) == text for a JSON number -?I.F with at most 15 significant digits and no
 * exponent (I: int_digits at int_start; F: frac_start to frac_end). With at most 15 significant digits
 * (DBL_DIG) the shortest text that reads back as the same double has the same digits, trailing zeros
 * of the fraction dropped, so repr gives this text exactly when: the fraction has no trailing zero
 * (except a fraction of one 0), and repr's fixed notation applies (1e-4 <= |x| < 1e16, or x == 0):
 * for an integer part of 0, at most three zeros before the fraction's first other digit. (The caller
 * counts an integer part's trailing zeros as significant, so the integer part has at most 15 digits
 * and |x| < 1e16 holds.) */
static int float_text_is_repr(const unsigned char *int_start, Py_ssize_t int_digits, const unsigned char *frac_start,
                              const unsigned char *frac_end) {
    Py_ssize_t frac = frac_end - frac_start;
    if (frac == 0) {
        return 0;
    }
    if (frac_end[-1] == '0' && frac != 1) {
        return 0;
    }
    if (int_digits == 1 && int_start[0] == '0') {
        Py_ssize_t zeros = 0;
        while (zeros < frac && frac_start[zeros] == '0') {
            zeros++;
        }
        return zeros == frac || zeros <= 3; /* 0.0 (zeros == frac == 1, as the trailing-zero rule left it) */
    }
    return 1;
}

/* The text of a string's ``len`` bytes at ``raw`` with its escapes decoded (scan_string has checked
 * that every escape is well formed and that no ``\u`` escape is a surrogate): a new str; NULL with an
 * error set when it is not valid UTF-8 (not expected) or on failure. */
static PyObject *unescaped(const unsigned char *raw, Py_ssize_t len) {
    char local[256];
    local[0] = '\0'; /* (len >= 2 here: an escape) */
    char *buf = len <= (Py_ssize_t)sizeof(local) ? local : PyMem_Malloc((size_t)len); /* never longer */
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < len;) {
        unsigned char c = raw[i];
        if (c != '\\') {
            buf[n++] = (char)c;
            i++;
            continue;
        }
        unsigned char e = raw[i + 1];
        i += 2;
        switch (e) {
        case 'b':
            buf[n++] = '\b';
            break;
        case 'f':
            buf[n++] = '\f';
            break;
        case 'n':
            buf[n++] = '\n';
            break;
        case 'r':
            buf[n++] = '\r';
            break;
        case 't':
            buf[n++] = '\t';
            break;
        case 'u': {
            unsigned cp = 0;
            (void)hex4(raw + i, &cp);
            i += 4;
            if (cp < 0x80) {
                buf[n++] = (char)cp;
            } else if (cp < 0x800) {
                buf[n++] = (char)(0xC0 | (cp >> 6));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[n++] = (char)(0xE0 | (cp >> 12));
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: /* " \ / */
            buf[n++] = (char)e;
        }
    }
    PyObject *str = PyUnicode_DecodeUTF8(buf, n, NULL);
    if (buf != local) {
        PyMem_Free(buf);
    }
    return str;
}

/* A number at s->p: 0 with s->p past it and, when ``out`` is not NULL, *out the int or float orjson
 * gives (a new reference); 1 when refused; -1 on error. */
static int scan_number(Scan *s, PyObject **out) {
    const unsigned char *p = s->p, *end = s->end, *start = p;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end) {
        return 1;
    }
    const unsigned char *int_start = p;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && is_digit(*p)) {
            p++;
        }
    } else {
        return 1;
    }
    Py_ssize_t int_digits = p - int_start;
    int is_float = 0, has_exp = 0;
    const unsigned char *frac_start = p;
    if (p < end && *p == '.') {
        is_float = 1;
        frac_start = ++p;
        while (p < end && is_digit(*p)) {
            p++;
        }
        if (p == frac_start) {
            return 1;
        }
    }
    const unsigned char *frac_end = p;
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_float = has_exp = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        const unsigned char *exp_start = p;
        while (p < end && is_digit(*p)) {
            p++;
        }
        if (p == exp_start || p - exp_start > 2) {
            return 1;
        }
    }
    if (int_digits > 18 || frac_end - frac_start > 18) {
        return 1; /* orjson may refuse it, or give a big integer: the caller's whole-event path decides */
    }
    s->p = p;
    if (out == NULL) {
        return 0;
    }
    if (!is_float) {
        long long v = 0;
        for (const unsigned char *d = int_start; d < int_start + int_digits; d++) {
            v = v * 10 + (*d - '0');
        }
        *out = PyLong_FromLongLong(neg ? -v : v);
        return *out == NULL ? -1 : 0;
    }
    int significant = 0, leading = 1;
    for (const unsigned char *d = int_start; d < frac_end; d++) {
        if (*d == '.') {
            continue;
        }
        if (leading && *d == '0') {
            continue;
        }
        leading = 0;
        significant++;
    }
    if (significant > 17) {
        return 1;
    }
    if (!has_exp && significant <= 15 && float_text_is_repr(int_start, int_digits, frac_start, frac_end) &&
        p - start <= FLOAT_TEXT_MAX) {
        FloatText *ft = PyObject_New(FloatText, &FloatTextType);
        if (ft == NULL) {
            return -1;
        }
        ft->len = p - start;
        memcpy(ft->text, start, (size_t)ft->len);
        *out = (PyObject *)ft;
        return 0;
    }
    char text[64];
    if (p - start >= (Py_ssize_t)sizeof(text)) {
        return 1;
    }
    memcpy(text, start, (size_t)(p - start));
    text[p - start] = '\0';
    char *stop;
    double d = PyOS_string_to_double(text, &stop, NULL);
    if ((d == -1.0 && PyErr_Occurred()) || stop != text + (p - start)) {
        PyErr_Clear();
        return 1;
    }
    *out = PyFloat_FromDouble(d);
    return *out == NULL ? -1 : 0;
}

/* Past a container's opening bracket and the whitespace after it: 1 when ``close`` follows at once (an
 * empty container, passed too), else 0. */
static int scan_open(Scan *s, unsigned char close) {
    s->p++;
    scan_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 1;
    }
    return 0;
}

/* After a member or an element: 0 past a comma (and the whitespace after it), 1 past ``close`` (the
 * container's end), 2 on anything else (refused). */
static int scan_next(Scan *s, unsigned char close) {
    scan_ws(s);
    if (s->p < s->end && *s->p == ',') {
        s->p++;
        scan_ws(s);
        return 0;
    }
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 1;
    }
    return 2;
}

static int scan_value(Scan *s, int node, PyObject **out);

/* an object at s->p; ``build``: *out gets the sparse dict of ``node``'s declared children */
static int scan_object(Scan *s, int node, int build, PyObject **out) {
    if (++s->depth > SCAN_DEPTH_MAX) {
        return 1;
    }
    PyObject *dict = NULL;
    if (build) {
        dict = PyDict_New();
        if (dict == NULL) {
            return -1;
        }
    }
    int rc = 1;
    /* at the root: which of the keys "schema" (1) and "payload" (2) it has, and 4 when it has another:
     * exactly the two make a Kafka Connect envelope, which the reference unwraps (refused here) */
    int root_keys = 0;
    if (scan_open(s, '}')) {
        rc = 0;
        goto done;
    }
    for (;;) {
        if (s->p >= s->end || *s->p != '"') {
            goto done;
        }
        const unsigned char *key;
        Py_ssize_t len;
        int escaped, ascii;
        if (scan_string(s, &key, &len, &escaped, &ascii)) {
            goto done;
        }
        scan_ws(s);
        if (s->p >= s->end || *s->p != ':') {
            goto done;
        }
        s->p++;
        scan_ws(s);
        int child = -1;
        if (build) {
            if (escaped) {
                goto done; /* it might name a declared key */
            }
            child = trie_child(s->trie, node, (const char *)key, len);
            if (node == -1) {
                root_keys |= len == 6 && memcmp(key, "schema", 6) == 0    ? 1
                             : len == 7 && memcmp(key, "payload", 7) == 0 ? 2
                                                                          : 4;
            }
        }
        PyObject *v = NULL;
        int vrc = scan_value(s, child, child >= 0 ? &v : NULL);
        if (vrc != 0) {
            rc = vrc;
            goto done;
        }
        if (v != NULL) {
            int set = PyDict_SetItem(dict, s->trie->name[child], v);
            Py_DECREF(v);
            if (set < 0) {
                rc = -1;
                goto done;
            }
        }
        int next = scan_next(s, '}');
        if (next != 0) {
            rc = next == 1 ? 0 : 1;
            goto done;
        }
    }
done:
    s->depth--;
    if (rc == 0 && root_keys == 3) {
        rc = 1;
    }
    if (rc == 0 && build) {
        *out = dict;
    } else {
        Py_XDECREF(dict);
    }
    return rc;
}

static int scan_array(Scan *s) {
    if (++s->depth > SCAN_DEPTH_MAX) {
        return 1;
    }
    int rc = 0;
    if (scan_open(s, ']')) {
        goto done;
    }
    for (;;) {
        rc = scan_value(s, -1, NULL);
        if (rc != 0) {
            goto done;
        }
        int next = scan_next(s, ']');
        if (next != 0) {
            rc = next == 1 ? 0 : 1;
            goto done;
        }
    }
done:
    s->depth--;
    return rc;
}

static int scan_word(Scan *s, const char *word, Py_ssize_t n, PyObject *value, PyObject **out) {
    if (s->end - s->p < n || memcmp(s->p, word, (size_t)n) != 0) {
        return 1;
    }
    s->p += n;
    if (out != NULL) {
        *out = Py_NewRef(value);
    }
    return 0;
}

/* A value at s->p (after whitespace). ``node``: the declared path it is at, or -1 for none; ``out``
 * (not NULL exactly when node >= 0) gets what the sparse event holds there. */
static int scan_value(Scan *s, int node, PyObject **out) {
    if (s->p >= s->end) {
        return 1;
    }
    unsigned char c = *s->p;
    if (c == '{') {
        int build = out != NULL && s->trie->children[node + 1] > 0;
        int rc = scan_object(s, node, build, out);
        if (rc == 0 && out != NULL && !build) {
            *out = Py_NewRef(Py_Ellipsis);
        }
        return rc;
    }
    if (c == '[') {
        int rc = scan_array(s);
        if (rc == 0 && out != NULL) {
            *out = Py_NewRef(Py_Ellipsis);
        }
        return rc;
    }
    if (c == '"') {
        const unsigned char *raw;
        Py_ssize_t len;
        int escaped, ascii;
        if (scan_string(s, &raw, &len, &escaped, &ascii)) {
            return 1;
        }
        if (out == NULL) {
            return 0;
        }
        PyObject *str;
        if (escaped) {
            str = unescaped(raw, len);
        } else if (ascii) {
            str = PyUnicode_New(len, 127);
            if (str != NULL) {
                memcpy(PyUnicode_DATA(str), raw, (size_t)len);
            }
        } else {
            str = PyUnicode_DecodeUTF8((const char *)raw, len, NULL);
        }
        if (str == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { /* not expected after scan_string */
                PyErr_Clear();
                return 1;
            }
            return -1;
        }
        *out = str;
        return 0;
    }
    if (c == '-' || is_digit(c)) {
        return scan_number(s, out);
    }
    if (c == 't') {
        return scan_word(s, "true", 4, Py_True, out);
    }
    if (c == 'f') {
        return scan_word(s, "false", 5, Py_False, out);
    }
    if (c == 'n') {
        return scan_word(s, "null", 4, Py_None, out);
    }
    return 1;
}

/* The sparse event of ``n`` bytes at ``p``: 0 with *event a new dict; 1 when refused; -1 on error. */
static int sparse_event(const Trie *t, const char *p, Py_ssize_t n, PyObject **event) {
    Scan s = {(const unsigned char *)p, (const unsigned char *)p + n, 0, t};
    scan_ws(&s);
    if (s.p >= s.end || *s.p != '{') {
        return 1;
    }
    PyObject *dict = NULL;
    int rc = scan_object(&s, -1, 1, &dict);
    if (rc != 0) {
        return rc;
    }
    scan_ws(&s);
    if (s.p != s.end) {
        Py_DECREF(dict);
        return 1;
    }
    *event = dict;
    return 0;
}

/* -- the run -------------------------------------------------------------------------------------- */

/* the mutations of one record's event, appended to ``out``: 0 when done; 3 when a route's fast form
 * did not take it (returned None: the run stops at this record); 2 when ``sparse`` (the event is a
 * sparse event) and a plan refused it (the caller reads the record whole); -1 on an error */
static int route_event(PyObject *routes, PyObject *event, PyObject *origin, PyObject *put_kind, PyObject *out,
                       int sparse) {
    Py_ssize_t nroutes = PyTuple_GET_SIZE(routes);
    for (Py_ssize_t r = 0; r < nroutes; r++) {
        PyObject *route = PyTuple_GET_ITEM(routes, r); /* a plan tuple, or a fast form */
        PyObject *m = NULL;
        PyObject *mutation = route;
        if (PyTuple_CheckExact(route)) {
            mutation = PyTuple_GET_ITEM(route, 0);
            m = planned_put(route, event, origin, put_kind);
            if (m == NULL && PyErr_Occurred()) {
                return -1;
            }
            if (m == NULL && sparse) {
                return 2;
            }
        }
        if (m == NULL) {
            PyObject *args[2] = {event, origin};
            m = PyObject_Vectorcall(mutation, args, 2, NULL);
            if (m == NULL) {
                return -1;
            }
            if (m == Py_None) {
                Py_DECREF(m);
                return 3;
            }
        }
        int rc = PyList_Append(out, m);
        Py_DECREF(m);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *s_value, *s_offset, *s_schema, *s_payload;

/* whether a parsed value is a Kafka Connect envelope (exactly the keys schema and payload), which the
 * reference unwraps: such a record goes through ``one`` */
static int is_envelope(PyObject *dict) {
    return PyDict_GET_SIZE(dict) == 2 && PyDict_GetItemWithError(dict, s_schema) != NULL &&
           PyDict_GetItemWithError(dict, s_payload) != NULL;
}

static PyObject *route_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "route_run(records, start, stop, tp, routes, env) takes 6 arguments");
        return NULL;
    }
    PyObject *records = args[0], *tp = args[3], *routes = args[4], *env = args[5];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    if ((start == -1 || stop == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyTuple_CheckExact(routes) || !PyTuple_CheckExact(env) || PyTuple_GET_SIZE(env) != 5) {
        PyErr_SetString(PyExc_TypeError, "route_run: routes and env must be tuples (env of 5)");
        return NULL;
    }
    PyObject *loads = PyTuple_GET_ITEM(env, 0), *one = PyTuple_GET_ITEM(env, 1);
    PyObject *put_kind = PyTuple_GET_ITEM(env, 4);
    if (prepare_slots(env, PyTuple_GET_ITEM(env, 2), PyTuple_GET_ITEM(env, 3)) < 0) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    const Trie *trie = cached_trie(routes);
    Py_ssize_t i = start;
    for (; i < stop; i++) {
        PyObject *rec = PySequence_GetItem(records, i);
        if (rec == NULL) {
            goto fail;
        }
        Py_ssize_t before = PyList_GET_SIZE(out);
        PyObject *value = PyObject_GetAttr(rec, s_value);
        if (value == NULL) {
            Py_DECREF(rec);
            goto fail;
        }
        int rc, sparse_allowed = trie->n > 0;
    again:;
        PyObject *event = NULL;
        int sparse = 0;
        if (sparse_allowed && PyBytes_CheckExact(value)) {
            int src = sparse_event(trie, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), &event);
            if (src < 0) {
                Py_DECREF(value);
                Py_DECREF(rec);
                goto fail;
            }
            sparse = src == 0;
        }
        if (event == NULL && PyBytes_CheckExact(value) &&
            !has_long_run(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))) {
            event = PyObject_CallOneArg(loads, value);
            if (event == NULL) {
                PyErr_Clear();
            } else if (!PyDict_CheckExact(event) || is_envelope(event)) {
                Py_CLEAR(event);
            }
            if (PyErr_Occurred()) { /* is_envelope's lookup failed */
                Py_DECREF(value);
                Py_DECREF(rec);
                goto fail;
            }
        }
        if (event == NULL) {
            /* the Python loop's steps for this record: parse (exactly, an envelope unwrapped), fast forms */
            PyObject *one_args[2] = {rec, tp};
            PyObject *ms = PyObject_Vectorcall(one, one_args, 2, NULL);
            if (ms == NULL) {
                rc = -1;
            } else if (ms == Py_None) {
                rc = 3;
                Py_DECREF(ms);
            } else {
                rc = PyList_SetSlice(out, PyList_GET_SIZE(out), PyList_GET_SIZE(out), ms) < 0 ? -1 : 0;
                Py_DECREF(ms);
            }
        } else {
            PyObject *offset = PyObject_GetAttr(rec, s_offset);
            PyObject *origin = offset == NULL ? NULL : new_origin(tp, offset);
            Py_XDECREF(offset);
            rc = origin == NULL ? -1 : route_event(routes, event, origin, put_kind, out, sparse);
            Py_XDECREF(origin);
            Py_DECREF(event);
            if (rc == 2) { /* a plan refused the sparse event: the record again, read whole by orjson */
                if (PyList_SetSlice(out, before, PyList_GET_SIZE(out), NULL) < 0) {
                    Py_DECREF(value);
                    Py_DECREF(rec);
                    goto fail;
                }
                sparse_allowed = 0;
                goto again;
            }
        }
        Py_DECREF(value);
        Py_DECREF(rec);
        if (rc < 0) {
            goto fail;
        }
        if (rc == 3) { /* the fast forms do not take this record: none of its mutations stay, the run stops */
            if (PyList_SetSlice(out, before, PyList_GET_SIZE(out), NULL) < 0) {
                goto fail;
            }
            break;
        }
    }
    return Py_BuildValue("(nN)", i, out);
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"route_run", (PyCFunction)(void (*)(void))route_run, METH_FASTCALL,
     "route_run(records, start, stop, tp, routes, env) -> (stop, mutations, error): see the module's source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_routerun", "The compiled plain-topic loop of pipeline.core.routes.router.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__routerun(void) {
    s_value = PyUnicode_InternFromString("value");
    s_offset = PyUnicode_InternFromString("offset");
    s_schema = PyUnicode_InternFromString("schema");
    s_payload = PyUnicode_InternFromString("payload");
    zero = PyLong_FromLong(0);
    ts_max = PyLong_FromLongLong(INT64_MAX);
    if (s_value == NULL || s_offset == NULL || s_schema == NULL || s_payload == NULL || zero == NULL || ts_max == NULL || PyType_Ready(&FloatTextType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
