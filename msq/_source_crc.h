/* SOURCE_CRC, shared by msq's C extensions: the CRC-32 of the extension's own .c file when it
   was compiled (setup.py defines MSQ_SOURCE_CRC). msq.cext uses the module only while the file
   beside the package still has that CRC: an editable install after a git pull otherwise runs a
   module built from an older text (see msq/cext.py). */
#ifndef MSQ_SOURCE_CRC_H
#define MSQ_SOURCE_CRC_H

#include <Python.h>

/* 0, or -1 with an exception set */
static inline int msq_add_source_crc(PyObject *module) {
#ifdef MSQ_SOURCE_CRC
    PyObject *crc = PyLong_FromUnsignedLong(MSQ_SOURCE_CRC);
    int rc = crc ? PyModule_AddObjectRef(module, "SOURCE_CRC", crc) : -1;
    Py_XDECREF(crc);
    return rc;
#else
    (void)module;
    return 0;
#endif
}

#endif
