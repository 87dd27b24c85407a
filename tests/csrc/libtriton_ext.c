/* A Python extension module named "libtriton": the shape of Triton's triton/_C/libtriton.so. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "libtriton", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_libtriton(void) { return PyModule_Create(&module); }
