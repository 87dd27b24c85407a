/* A minimal Python extension module named "fastmod". */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }

static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, "The answer."}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastmod", NULL, -1, methods};

PyMODINIT_FUNC PyInit_fastmod(void) { return PyModule_Create(&module); }
