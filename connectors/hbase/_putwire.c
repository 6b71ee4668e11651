/* The compiled form of connectors.hbase.putwire's encoder: a Thrift2 ``putMultiple`` call message,
 * binary protocol, strict writes, sequence id 0, built in one growing buffer.
 *
 * Contract: ``encode(table, puts, framed)`` returns a ``bytearray`` equal byte for byte to what
 * ``connectors.hbase.putwire._encode`` (the pure-Python encoder, the reference) returns for the same
 * arguments; a property test checks it. Layout (big-endian; str = i32 length + bytes):
 *
 *   [i32 length, when framed] i32 0x80010001 . str "putMultiple" . i32 0
 *   . 0b 0001 str table . 0f 0002 0c i32 n_puts . TPut* . 00
 *   TPut = 0b 0001 str row . 0f 0002 0c i32 n_cells . TColumnValue* [. 0a 0003 i64 ts] . 00
 *   TColumnValue = 0b 0001 str family . 0b 0002 str qualifier . 0b 0003 str value [. 0a 0004 i64 ts] . 00
 *
 * A column splits at its first ':' (none: all family, empty qualifier). Each put is read through its
 * attributes ``row`` (bytes or bytearray), ``cells`` (a dict, or any mapping with ``items()``, of
 * bytes to bytes or bytearray, in its order) and ``timestamp`` (None, or an int in the signed 64-bit range). Errors: TypeError for
 * anything that is not bytes where bytes belong (the Python wrapper words the message), ValueError
 * naming the row for a timestamp that is not a signed 64-bit integer. The table is not checked here
 * (the wrapper does). No global state; the GIL is held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "" /* set by the build (hatch_build.py): the SHA-256 of this file */
#endif

typedef struct {
    PyObject *out; /* a bytearray, grown by doubling, cut to length at the end */
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

static PyObject *s_row, *s_cells, *s_timestamp;

static int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) {
        return 0;
    }
    Py_ssize_t cap = b->cap * 2;
    if (cap < b->len + more) {
        cap = b->len + more;
    }
    if (PyByteArray_Resize(b->out, cap) < 0) {
        return -1;
    }
    b->data = PyByteArray_AS_STRING(b->out);
    b->cap = cap;
    return 0;
}

static inline void put_raw(Buf *b, const char *p, Py_ssize_t n) {
    memcpy(b->data + b->len, p, (size_t)n);
    b->len += n;
}

static inline void put_i32(Buf *b, int32_t v) {
    uint32_t u = (uint32_t)v;
    unsigned char *p = (unsigned char *)b->data + b->len;
    p[0] = (unsigned char)(u >> 24);
    p[1] = (unsigned char)(u >> 16);
    p[2] = (unsigned char)(u >> 8);
    p[3] = (unsigned char)u;
    b->len += 4;
}

static inline void put_i64(Buf *b, int64_t v) {
    uint64_t u = (uint64_t)v;
    unsigned char *p = (unsigned char *)b->data + b->len;
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(u & 0xff);
        u >>= 8;
    }
    b->len += 8;
}

/* a field header: type byte, i16 field id */
static inline void put_field(Buf *b, unsigned char type, unsigned char id) {
    unsigned char *p = (unsigned char *)b->data + b->len;
    p[0] = type;
    p[1] = 0;
    p[2] = id;
    b->len += 3;
}

static inline void put_str(Buf *b, const char *p, Py_ssize_t n) {
    put_i32(b, (int32_t)n);
    put_raw(b, p, n);
}

#define T_STRING 11
#define T_I64 10
#define T_STRUCT 12
#define T_LIST 15

/* the bytes of a row or value: bytes or bytearray (both encoders take either); else TypeError */
static int bytes_of(PyObject *obj, const char **p, Py_ssize_t *n, const char *what) {
    if (PyBytes_Check(obj)) {
        *p = PyBytes_AS_STRING(obj);
        *n = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyByteArray_Check(obj)) {
        *p = PyByteArray_AS_STRING(obj);
        *n = PyByteArray_GET_SIZE(obj);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s must be bytes, got %s", what, Py_TYPE(obj)->tp_name);
    return -1;
}

static int write_cell(Buf *b, PyObject *column, PyObject *value, int has_ts, int64_t ts) {
    const char *val;
    Py_ssize_t nval;
    if (!PyBytes_Check(column)) {
        PyErr_SetString(PyExc_TypeError, "a cell's column must be bytes");
        return -1;
    }
    if (bytes_of(value, &val, &nval, "a cell's value") < 0) {
        return -1;
    }
    const char *col = PyBytes_AS_STRING(column);
    Py_ssize_t ncol = PyBytes_GET_SIZE(column);
    const char *colon = memchr(col, ':', (size_t)ncol);
    Py_ssize_t nfam = colon ? (Py_ssize_t)(colon - col) : ncol;
    Py_ssize_t nqual = colon ? ncol - nfam - 1 : 0;
    if (buf_reserve(b, 3 * 7 + ncol + nval + 11 + 1) < 0) {
        return -1;
    }
    put_field(b, T_STRING, 1);
    put_str(b, col, nfam);
    put_field(b, T_STRING, 2);
    put_str(b, colon ? colon + 1 : col + ncol, nqual);
    put_field(b, T_STRING, 3);
    put_str(b, val, nval);
    if (has_ts) {
        put_field(b, T_I64, 4);
        put_i64(b, ts);
    }
    b->data[b->len++] = 0;
    return 0;
}

static int write_cells(Buf *b, PyObject *cells, int has_ts, int64_t ts) {
    if (PyDict_CheckExact(cells)) {
        Py_ssize_t n = PyDict_GET_SIZE(cells);
        if (buf_reserve(b, 8) < 0) {
            return -1;
        }
        put_field(b, T_LIST, 2);
        b->data[b->len++] = T_STRUCT;
        put_i32(b, (int32_t)n);
        Py_ssize_t pos = 0;
        PyObject *column, *value;
        while (PyDict_Next(cells, &pos, &column, &value)) {
            if (write_cell(b, column, value, has_ts, ts) < 0) {
                return -1;
            }
        }
        return 0;
    }
    /* any other mapping: its items() in order, as the Python encoder reads it */
    PyObject *items = PyMapping_Items(cells);
    if (items == NULL) {
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    int rc = buf_reserve(b, 8);
    if (rc == 0) {
        put_field(b, T_LIST, 2);
        b->data[b->len++] = T_STRUCT;
        put_i32(b, (int32_t)n);
        for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
            PyObject *item = PyList_GET_ITEM(items, i);
            if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
                PyErr_SetString(PyExc_TypeError, "a cell must be a (column, value) pair");
                rc = -1;
                break;
            }
            rc = write_cell(b, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1), has_ts, ts);
        }
    }
    Py_DECREF(items);
    return rc;
}

static int write_put(Buf *b, PyObject *m) {
    int rc = -1;
    PyObject *row = PyObject_GetAttr(m, s_row);
    PyObject *cells = NULL, *stamp = NULL;
    if (row == NULL) {
        return -1;
    }
    cells = PyObject_GetAttr(m, s_cells);
    if (cells == NULL) {
        goto done;
    }
    stamp = PyObject_GetAttr(m, s_timestamp);
    if (stamp == NULL) {
        goto done;
    }
    int has_ts = stamp != Py_None;
    int64_t ts = 0;
    if (has_ts) {
        /* what struct's ">q" takes: an int, or an object with __index__ */
        int overflow = 0;
        long long v = -1;
        PyObject *index = PyNumber_Index(stamp);
        if (index != NULL) {
            v = PyLong_AsLongLongAndOverflow(index, &overflow);
            Py_DECREF(index);
        }
        if (index == NULL || overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "row %R: timestamp %R is not a signed 64-bit integer", row, stamp);
            goto done;
        }
        ts = (int64_t)v;
    }
    /* the timestamp first, then the row: the order the pure-Python encoder finds errors in */
    const char *rowp;
    Py_ssize_t nrow;
    if (bytes_of(row, &rowp, &nrow, "a put's row") < 0) {
        goto done;
    }
    if (buf_reserve(b, 7 + nrow) < 0) {
        goto done;
    }
    put_field(b, T_STRING, 1);
    put_str(b, rowp, nrow);
    if (write_cells(b, cells, has_ts, ts) < 0) {
        goto done;
    }
    if (buf_reserve(b, 12) < 0) {
        goto done;
    }
    if (has_ts) {
        put_field(b, T_I64, 3);
        put_i64(b, ts);
    }
    b->data[b->len++] = 0;
    rc = 0;
done:
    Py_XDECREF(stamp);
    Py_XDECREF(cells);
    Py_DECREF(row);
    return rc;
}

static PyObject *encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "encode(table, puts, framed) takes 3 arguments");
        return NULL;
    }
    PyObject *table = args[0];
    if (!PyBytes_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "the table name must be bytes");
        return NULL;
    }
    int framed = PyObject_IsTrue(args[2]);
    if (framed < 0) {
        return NULL;
    }
    /* a tuple of the puts: reading a put's attributes may run Python code, which must not be able
     * to change what is being iterated */
    PyObject *seq = PySequence_Tuple(args[1]);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    Py_ssize_t ntable = PyBytes_GET_SIZE(table);
    Buf b = {NULL, NULL, 0, 0};
    Py_ssize_t cap = 64 + ntable + n * 160;
    b.out = PyByteArray_FromStringAndSize(NULL, cap);
    if (b.out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    b.data = PyByteArray_AS_STRING(b.out);
    b.cap = cap;
    if (framed) {
        put_i32(&b, 0); /* the length, written once known */
    }
    put_i32(&b, (int32_t)0x80010001u);
    put_str(&b, "putMultiple", 11);
    put_i32(&b, 0);
    put_field(&b, T_STRING, 1);
    put_str(&b, PyBytes_AS_STRING(table), ntable);
    put_field(&b, T_LIST, 2);
    b.data[b.len++] = T_STRUCT;
    put_i32(&b, (int32_t)n);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (write_put(&b, PyTuple_GET_ITEM(seq, i)) < 0) {
            Py_DECREF(seq);
            Py_DECREF(b.out);
            return NULL;
        }
    }
    Py_DECREF(seq);
    if (buf_reserve(&b, 1) < 0) {
        Py_DECREF(b.out);
        return NULL;
    }
    b.data[b.len++] = 0;
    if (framed) {
        Py_ssize_t body = b.len - 4;
        Py_ssize_t end = b.len;
        b.len = 0;
        put_i32(&b, (int32_t)body);
        b.len = end;
    }
    if (PyByteArray_Resize(b.out, b.len) < 0) {
        Py_DECREF(b.out);
        return NULL;
    }
    return b.out;
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(table, puts, framed) -> bytearray: the putMultiple call message (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_putwire", "The compiled putMultiple encoder of connectors.hbase.putwire.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__putwire(void) {
    s_row = PyUnicode_InternFromString("row");
    s_cells = PyUnicode_InternFromString("cells");
    s_timestamp = PyUnicode_InternFromString("timestamp");
    if (s_row == NULL || s_cells == NULL || s_timestamp == NULL) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
