/*
 * ext_errors.c - libringd's statuses as Python exceptions.
 *
 * The exception classes live in ringd/_errors.py, which registers a factory
 * (set_error_factory) when the package is imported: factory(code, message,
 * where) returns the exception to raise. Parsing the message (peer rank,
 * address, phase) is done there too, in one tested function.
 */
#include "ext.h"

#include <limits.h>

/* The enum's names, indexed like ring_status_t (status.h). */
static const char *const status_names[RING_STATUS_COUNT] = {
    [RING_OK] = "RING_OK",
    [RING_IN_PROGRESS] = "RING_IN_PROGRESS",
    [RING_ERR_NO_MEMORY] = "RING_ERR_NO_MEMORY",
    [RING_ERR_INVALID] = "RING_ERR_INVALID",
    [RING_ERR_IO] = "RING_ERR_IO",
    [RING_ERR_NO_RESOURCE] = "RING_ERR_NO_RESOURCE",
    [RING_ERR_TIMED_OUT] = "RING_ERR_TIMED_OUT",
    [RING_ERR_REMOTE] = "RING_ERR_REMOTE",
    [RING_ERR_MISMATCH] = "RING_ERR_MISMATCH",
    [RING_ERR_PROTOCOL] = "RING_ERR_PROTOCOL",
    [RING_ERR_UNSUPPORTED] = "RING_ERR_UNSUPPORTED",
    [RING_ERR_CANCELED] = "RING_ERR_CANCELED",
    [RING_ERR_INTERNAL] = "RING_ERR_INTERNAL",
    [RING_ERR_NONFINITE] = "RING_ERR_NONFINITE",
};

/* a status newer than this table gets a made-up name instead of NULL */
static PyObject *status_name_obj(int code)
{
    if (code < 0 || code >= RING_STATUS_COUNT || status_names[code] == NULL)
        return PyUnicode_FromFormat("RING_STATUS_%d", code);
    return PyUnicode_FromString(status_names[code]);
}

static const char *const where_names[] = {
    [RINGPY_IN_CONFIG] = "config",
    [RINGPY_IN_OPEN] = "open",
    [RINGPY_IN_CALL] = "call",
};

static PyObject *error_factory; /* set by ringd/_errors.py */

PyObject *ringpy_raise(ring_status_t status, const char *msg, ringpy_where_t where)
{
    PyObject *exc;

    if (msg == NULL || msg[0] == '\0')
        msg = ring_status_str(status);
    if (error_factory == NULL) {
        PyErr_Format(PyExc_RuntimeError, "ringd: %s (%s)", msg, ring_status_str(status));
        return NULL;
    }
    exc = PyObject_CallFunction(error_factory, "iss", (int)status, msg, where_names[where]);
    if (exc == NULL)
        return NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *ringpy_set_error_factory(PyObject *self, PyObject *factory)
{
    if (!PyCallable_Check(factory)) {
        PyErr_SetString(PyExc_TypeError, "set_error_factory: a callable (code, message, where)");
        return NULL;
    }
    Py_INCREF(factory);
    Py_XSETREF(error_factory, factory);
    Py_RETURN_NONE;
}

PyObject *ringpy_status_name(PyObject *self, PyObject *arg)
{
    long code = PyLong_AsLong(arg);

    if (code == -1 && PyErr_Occurred())
        return NULL;
    if (code < INT_MIN || code > INT_MAX)
        return PyUnicode_FromFormat("RING_STATUS_%ld", code);
    return status_name_obj((int)code);
}

int ringpy_errors_init(PyObject *module)
{
    PyObject *names = PyTuple_New(RING_STATUS_COUNT), *strs;

    if (names == NULL)
        return -1;
    strs = PyTuple_New(RING_STATUS_COUNT);
    if (strs == NULL) {
        Py_DECREF(names);
        return -1;
    }
    for (int i = 0; i < RING_STATUS_COUNT; i++) {
        PyObject *n = status_name_obj(i);
        PyObject *s = PyUnicode_FromString(ring_status_str((ring_status_t)i));
        if (n == NULL || s == NULL) {
            Py_XDECREF(n);
            Py_XDECREF(s);
            Py_DECREF(names);
            Py_DECREF(strs);
            return -1;
        }
        PyTuple_SET_ITEM(names, i, n);
        PyTuple_SET_ITEM(strs, i, s);
    }
    /* STATUS_NAMES[code] = "RING_ERR_TIMED_OUT"; STATUS_TEXT[code] = "timed out" */
    if (PyModule_AddObject(module, "STATUS_NAMES", names) < 0) {
        Py_DECREF(names);
        Py_DECREF(strs);
        return -1;
    }
    if (PyModule_AddObject(module, "STATUS_TEXT", strs) < 0) {
        Py_DECREF(strs);
        return -1;
    }
    return 0;
}
