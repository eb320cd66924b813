/*
 * ext_module.c - the _ringd module: its types, functions and constants.
 * The Python API (ringd.init, ringd.allreduce, ...) is ringd/__init__.py.
 */
#include "ext.h"

PyMODINIT_FUNC PyInit__ringd(void);

static PyObject *version(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString(ring_version());
}

static PyObject *status_text(PyObject *self, PyObject *arg)
{
    long code = PyLong_AsLong(arg);

    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(ring_status_str((ring_status_t)code));
}

/* ring_launch_blas_advice: None, or (coretype, sentence) */
static PyObject *blas_advice(PyObject *self, PyObject *unused)
{
    char coretype[32], why[400];

    if (!ring_launch_blas_advice(coretype, sizeof(coretype), why, sizeof(why)))
        Py_RETURN_NONE;
    return Py_BuildValue("(ss)", coretype, why);
}

static PyMethodDef module_methods[] = {
    {"version", version, METH_NOARGS, "libringd's version, e.g. '0.1.0'."},
    {"setting_names", ringpy_setting_names, METH_NOARGS,
     "The names of libringd's settings, in its table's order."},
    {"set_error_factory", ringpy_set_error_factory, METH_O,
     "set_error_factory(fn): fn(code, message, where) -> the exception to raise."},
    {"status_name", ringpy_status_name, METH_O, "status_name(code) -> 'RING_ERR_TIMED_OUT'"},
    {"status_text", status_text, METH_O, "status_text(code) -> 'timed out' (ring_status_str)"},
    {"blas_advice", blas_advice, METH_NOARGS,
     "blas_advice() -> None, or (OPENBLAS_CORETYPE value, why) when this process's OpenBLAS "
     "runs generic kernels on a CPU with better ones (ring_launch_blas_advice)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ringd._ringd",
    .m_doc = "The C layer of the ringd package, over libringd's public API.",
    .m_size = -1,
    .m_methods = module_methods,
};

static int add_type(PyObject *m, PyTypeObject *type, const char *name)
{
    if (PyType_Ready(type) < 0)
        return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__ringd(void)
{
    PyObject *m = PyModule_Create(&module_def);

    if (m == NULL)
        return NULL;
    if (add_type(m, &ringpy_config_type, "Config") < 0 ||
        add_type(m, &ringpy_comm_type, "Comm") < 0 ||
        add_type(m, &ringpy_request_type, "Request") < 0 ||
        add_type(m, &ringpy_ssp_type, "SSP") < 0 || ringpy_errors_init(m) < 0 ||
        PyModule_AddIntConstant(m, "SUM", RING_SUM) < 0 ||
        PyModule_AddIntConstant(m, "AVG", RING_AVG) < 0 ||
        PyModule_AddIntConstant(m, "MAX_REQUESTS", RING_MAX_REQUESTS) < 0 ||
        PyModule_AddIntConstant(m, "FLOAT32", RING_FLOAT32) < 0 ||
        PyModule_AddIntConstant(m, "FLOAT16", RING_FLOAT16) < 0 ||
        PyModule_AddIntConstant(m, "BFLOAT16", RING_BFLOAT16) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
