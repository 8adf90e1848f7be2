/* The batch Seal of input shares (hpke_seal_shares.c), an entry point of `_native_hpke`. */
#ifndef LDPCOLLECT_HPKE_SEAL_SHARES_H
#define LDPCOLLECT_HPKE_SEAL_SHARES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *hpke_seal_shares(PyObject *module, PyObject *args);

#endif
