/*
 * ext_config.c - _ringd.Config: a ring_config_t on the heap, read and written
 * by setting name (ring_config_new/set/get), so that no part of the Python
 * package depends on the struct's size. What the launcher said is read from
 * cfg->launch (ringd/launch.h).
 */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const source_names[] = {
    [RING_SRC_DEFAULT] = "default",
    [RING_SRC_ENV] = "environment",
    [RING_SRC_FLAG] = "flag",
    [RING_SRC_API] = "api",
    [RING_SRC_LAUNCHER] = "launcher",
};

static PyObject *config_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {NULL};
    ringpy_config_t *self;

    if (!PyArg_ParseTupleAndKeywords(args, kw, ":Config", kwlist))
        return NULL;
    self = (ringpy_config_t *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->cfg = ring_config_new();
    if (self->cfg == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void config_dealloc(ringpy_config_t *self)
{
    ring_config_delete(self->cfg);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *config_load_env(ringpy_config_t *self, PyObject *unused)
{
    ring_status_t st = ring_config_load_env(self->cfg);

    if (st != RING_OK)
        return ringpy_raise(st, ring_last_error(), RINGPY_IN_CONFIG);
    Py_RETURN_NONE;
}

static PyObject *config_set(ringpy_config_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "value", "source", NULL};
    const char *name, *value, *source = "api";
    ring_config_source_t src = RING_SRC_API;
    ring_status_t st;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|s:set", kwlist, &name, &value, &source))
        return NULL;
    if (strcmp(source, "default") == 0)
        src = RING_SRC_DEFAULT;
    else if (strcmp(source, "api") != 0) {
        PyErr_Format(PyExc_ValueError, "Config.set: source is 'api' or 'default', not '%s'",
                     source);
        return NULL;
    }
    st = ring_config_set(self->cfg, name, value, src);
    if (st != RING_OK)
        return ringpy_raise(st, ring_last_error(), RINGPY_IN_CONFIG);
    Py_RETURN_NONE;
}

static PyObject *config_get(ringpy_config_t *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    size_t len = 4096;

    if (name == NULL)
        return NULL;
    /* the peer list has no bound: grow until it fits */
    for (;;) {
        char *buf = malloc(len);
        ring_status_t st;
        PyObject *value;

        if (buf == NULL)
            return PyErr_NoMemory();
        st = ring_config_get(self->cfg, name, buf, len);
        if (st == RING_OK) {
            value = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strlen(buf), "replace");
            free(buf);
            return value;
        }
        free(buf);
        if (st != RING_ERR_INVALID || len >= ((size_t)64 << 20))
            return ringpy_raise(st, ring_last_error(), RINGPY_IN_CONFIG);
        len *= 4;
    }
}

static PyObject *config_source(ringpy_config_t *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    ring_config_source_t src;

    if (name == NULL)
        return NULL;
    src = ring_config_source(self->cfg, name);
    if ((unsigned)src >= sizeof(source_names) / sizeof(source_names[0]))
        return PyUnicode_FromFormat("source %d", (int)src);
    return PyUnicode_FromString(source_names[src]);
}

static PyObject *config_validate(ringpy_config_t *self, PyObject *unused)
{
    ring_status_t st = ring_config_validate(self->cfg);

    if (st != RING_OK)
        return ringpy_raise(st, ring_last_error(), RINGPY_IN_CONFIG);
    Py_RETURN_NONE;
}

static PyObject *config_uses_rendezvous(ringpy_config_t *self, PyObject *unused)
{
    return PyBool_FromLong(ring_config_uses_rendezvous(self->cfg));
}

/* What ring_config_load_env found in the launcher's variables. */
static PyObject *config_launch(ringpy_config_t *self, void *closure)
{
    const ring_launch_t *l = &self->cfg->launch;

    return Py_BuildValue("{s:s,s:i,s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}",
                         "launcher", l->launcher, "rank", l->rank, "world_size", l->world_size,
                         "local_rank", l->local_rank, "local_size", l->local_size, "nhosts",
                         l->nhosts, "rank_var", l->rank_var, "world_var", l->world_var,
                         "local_var", l->local_var, "rendezvous", l->rendezvous,
                         "rendezvous_why", l->rendezvous_why, "job_id", l->job_id, "role",
                         l->role, "note", l->note);
}

static PyMethodDef config_methods[] = {
    {"load_env", (PyCFunction)config_load_env, METH_NOARGS,
     "Read RING_* variables and the launcher's (ring_config_load_env)."},
    {"set", (PyCFunction)(void (*)(void))config_set, METH_VARARGS | METH_KEYWORDS,
     "set(name, value, source='api'): one setting from text, as a flag takes it."},
    {"get", (PyCFunction)config_get, METH_O, "get(name) -> the effective value as text."},
    {"source", (PyCFunction)config_source, METH_O,
     "source(name) -> 'default', 'environment', 'flag', 'api' or 'launcher'."},
    {"validate", (PyCFunction)config_validate, METH_NOARGS,
     "Check that the settings make sense together (ring_config_validate)."},
    {"uses_rendezvous", (PyCFunction)config_uses_rendezvous, METH_NOARGS,
     "True when the peers meet through the rendezvous setting, not the peer list."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef config_getset[] = {
    {"launch", (getter)config_launch, NULL, "what the launcher's variables said (a dict)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ringpy_config_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringd._ringd.Config",
    .tp_basicsize = sizeof(ringpy_config_t),
    .tp_dealloc = (destructor)config_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "libringd's settings (ring_config_t), by name: set, get, load_env, validate.",
    .tp_methods = config_methods,
    .tp_getset = config_getset,
    .tp_new = config_new,
};

/* The names of the settings, in the table's order, from ring_config_print_help's
 * "  --name UNIT" and "  --name, --no-name" lines: the public API has no other list. */
PyObject *ringpy_setting_names(PyObject *self, PyObject *unused)
{
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    PyObject *names;

    if (f == NULL)
        return PyErr_SetFromErrno(PyExc_OSError);
    ring_config_print_help(f);
    fclose(f);
    names = PyList_New(0);
    if (names == NULL) {
        free(text);
        return NULL;
    }
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        PyObject *n;

        if (strncmp(line, "  --", 4) != 0)
            continue;
        line += 4;
        n = PyUnicode_FromStringAndSize(line, (Py_ssize_t)strcspn(line, " ,"));
        if (n == NULL || PyList_Append(names, n) < 0) {
            Py_XDECREF(n);
            Py_DECREF(names);
            free(text);
            return NULL;
        }
        Py_DECREF(n);
    }
    free(text);
    return names;
}
