/*
 * ext_buffer.c - a tensor's memory as (pointer, bytes, dtype), without a copy.
 *
 * numpy arrays (and bytearray, array.array, memoryview...) come through the
 * buffer protocol; the view is held until the request finishes, which also
 * stops numpy from resizing the array meanwhile. torch tensors come as a
 * descriptor made by ringd/_tensor.py from data_ptr(), numel() *
 * element_size() and the dtype (t.numpy() fails for bfloat16, and numpy
 * 1.24's from_dlpack is read-only); the tensor itself is held.
 */
#include "ext.h"

#include <string.h>

/* A buffer-protocol format as a dtype: "f" float32, "<e" float16, ... */
static const char *format_dtype(const char *fmt, ringpy_kind_t *kind_p)
{
    static const struct {
        char code;
        const char *name;
    } names[] = {
        {'f', "float32"}, {'e', "float16"}, {'d', "float64"}, {'g', "float128"},
        {'b', "int8"},    {'B', "uint8"},   {'h', "int16"},   {'H', "uint16"},
        {'i', "int32"},   {'I', "uint32"},  {'l', "int64"},   {'L', "uint64"},
        {'q', "int64"},   {'Q', "uint64"},  {'?', "bool"},    {'c', "bytes"},
    };

    *kind_p = RINGPY_OTHER;
    if (fmt == NULL)
        return "uint8";
    /* native or little-endian byte order (this is a little-endian library) */
    if (fmt[0] == '@' || fmt[0] == '=' || fmt[0] == '<')
        fmt++;
    if (fmt[0] == 'Z' && fmt[1] != '\0' && fmt[2] == '\0')
        return "complex";
    if (fmt[0] == '\0' || fmt[1] != '\0')
        return NULL;
    if (fmt[0] == 'f')
        *kind_p = RINGPY_F32;
    else if (fmt[0] == 'e')
        *kind_p = RINGPY_F16;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].code == fmt[0])
            return names[i].name;
    /* structs and the like end above; any other one-letter format is fine for moving
     * bytes, except objects, whose bytes are pointers into this process */
    return fmt[0] == 'O' ? NULL : "bytes";
}

static int buf_from_view(PyObject *obj, const char *what, int writable, ringpy_buf_t *b)
{
    const char *name;

    if (PyObject_GetBuffer(obj, &b->view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        /* keep the exporter's reason (numpy: "cannot include dtype 'M' in a buffer") */
        PyObject *type, *value, *tb, *why = NULL;

        PyErr_Fetch(&type, &value, &tb);
        if (value != NULL)
            why = PyObject_Str(value);
        PyErr_Clear();
        if (why != NULL)
            PyErr_Format(PyExc_TypeError,
                         "%s: %s is neither a numpy array (or other object with the buffer "
                         "protocol) nor a torch tensor (%S)",
                         what, Py_TYPE(obj)->tp_name, why);
        else
            PyErr_Format(PyExc_TypeError,
                         "%s: %s is neither a numpy array (or other object with the buffer "
                         "protocol) nor a torch tensor",
                         what, Py_TYPE(obj)->tp_name);
        Py_XDECREF(why);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    b->has_view = 1;
    if (!PyBuffer_IsContiguous(&b->view, 'C')) {
        PyErr_Format(PyExc_ValueError,
                     "%s is not C-contiguous (a transposed or strided view?): pass "
                     "numpy.ascontiguousarray(x) or x.contiguous()",
                     what);
        goto fail;
    }
    if (writable && b->view.readonly) {
        PyErr_Format(PyExc_ValueError,
                     "%s is read-only (numpy: flags.writeable is False): the result is written "
                     "into it; pass a writable array, or give the result a place with out=",
                     what);
        goto fail;
    }
    if (b->view.format != NULL && (b->view.format[0] == '>' || b->view.format[0] == '!')) {
        PyErr_Format(PyExc_TypeError, "%s is big-endian (buffer format '%s'): convert it to "
                     "the native byte order first (numpy: x.astype(x.dtype.newbyteorder('=')))",
                     what, b->view.format);
        goto fail;
    }
    name = format_dtype(b->view.format, &b->kind);
    if (name == NULL) {
        PyErr_Format(PyExc_TypeError, "%s has the buffer format '%s', which ringd cannot move "
                     "(objects, or several fields)", what, b->view.format);
        goto fail;
    }
    snprintf(b->dtype, sizeof(b->dtype), "%s", name);
    b->ptr = b->view.buf;
    b->nbytes = (size_t)b->view.len;
    b->itemsize = b->view.itemsize > 0 ? (size_t)b->view.itemsize : 1;
    return 0;
fail:
    PyBuffer_Release(&b->view);
    b->has_view = 0;
    return -1;
}

/* (owner, data_ptr, nbytes, itemsize, dtype name), made by ringd/_tensor.py after its checks */
static int buf_from_descriptor(PyObject *desc, const char *what, ringpy_buf_t *b)
{
    PyObject *owner;
    unsigned long long ptr, nbytes, itemsize;
    const char *dtype;

    if (!PyArg_ParseTuple(desc, "OKKKs;a tensor descriptor is (owner, data_ptr, nbytes, "
                          "itemsize, dtype)", &owner, &ptr, &nbytes, &itemsize, &dtype))
        return -1;
    if ((ptr == 0 && nbytes != 0) || itemsize == 0 || nbytes % itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: a tensor descriptor with pointer 0x%llx, %llu "
                     "bytes of %llu", what, ptr, nbytes, itemsize);
        return -1;
    }
    b->ptr = (char *)(uintptr_t)ptr;
    b->nbytes = (size_t)nbytes;
    b->itemsize = (size_t)itemsize;
    snprintf(b->dtype, sizeof(b->dtype), "%s", dtype);
    if (strcmp(dtype, "float32") == 0 && itemsize == 4)
        b->kind = RINGPY_F32;
    else if (strcmp(dtype, "float16") == 0 && itemsize == 2)
        b->kind = RINGPY_F16;
    else if (strcmp(dtype, "bfloat16") == 0 && itemsize == 2)
        b->kind = RINGPY_BF16;
    else
        b->kind = RINGPY_OTHER;
    Py_INCREF(owner);
    b->owner = owner;
    return 0;
}

int ringpy_buf_get(PyObject *obj, const char *what, int writable, ringpy_buf_t *b)
{
    memset(b, 0, sizeof(*b));
    if (PyTuple_Check(obj))
        return buf_from_descriptor(obj, what, b);
    return buf_from_view(obj, what, writable, b);
}

void ringpy_buf_release(ringpy_buf_t *b)
{
    if (b->has_view)
        PyBuffer_Release(&b->view);
    b->has_view = 0;
    Py_CLEAR(b->owner);
    b->ptr = NULL;
    b->nbytes = 0;
}

int ringpy_buf_check_overlap(const ringpy_buf_t *a, const ringpy_buf_t *b, const char *what,
                             int same_ok)
{
    uintptr_t a0 = (uintptr_t)a->ptr, a1 = a0 + a->nbytes;
    uintptr_t b0 = (uintptr_t)b->ptr, b1 = b0 + b->nbytes;

    if (a->nbytes == 0 || b->nbytes == 0 || a1 <= b0 || b1 <= a0)
        return 0;
    if (same_ok && a0 == b0 && a1 == b1)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: the input and out= overlap in memory; %s", what,
                 same_ok ? "pass the same tensor (in place) or separate ones"
                         : "pass separate tensors");
    return -1;
}

int ringpy_buf_check_float(const ringpy_buf_t *b, const char *what)
{
    if (b->kind == RINGPY_F32 || b->kind == RINGPY_F16 || b->kind == RINGPY_BF16)
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "%s has dtype %s: reductions take float32, float16 or bfloat16 (broadcast and "
                 "allgather move any dtype)",
                 what, b->dtype);
    return -1;
}
