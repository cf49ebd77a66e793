/* pyrepl/_slots.h: a Python class's __slots__ read and written from C at their offsets.

   A hot path that is mostly slot loads and stores (a reader's feed_first, a client's read and
   reply bookkeeping) costs a Python server ~20-30 ns a line; the same moves in C cost a few.
   The layout stays Python's: ``slots_bind`` finds each slot's offset in the instance from the
   class's member descriptor (what __slots__ makes: a writable T_OBJECT_EX member) and refuses
   anything else, so a renamed or removed slot fails at import, not at run time. A caller
   checks the instance's exact type before it touches a slot, and treats an unset slot (NULL)
   as "not the common case". Shared by pyrepl/resp/_scan.c and pyrepl/net/_serve.c. */

#ifndef PYREPL_SLOTS_H
#define PYREPL_SLOTS_H

#include <Python.h>
#include <structmember.h>

#define SLOT_AT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* An entry point of a module whose bind() has not run to its end (``bound`` is the module's
   flag, set by bind's last statement) raises RuntimeError instead of reaching a NULL type or
   function pointer. */
#define REQUIRE_BOUND(bound, what)                                                        \
    do {                                                                                  \
        if (!(bound)) {                                                                   \
            PyErr_SetString(PyExc_RuntimeError, what " called before its module's bind()"); \
            return NULL;                                                                  \
        }                                                                                 \
    } while (0)

/* offsets[i] := the offset of slot names[i] of cls (looked up on cls and its bases). */
static inline int
slots_bind(PyObject *cls, const char *const *names, int n, Py_ssize_t *offsets)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "slots_bind: a class is needed");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttrString(cls, names[i]);
        if (d == NULL)
            return -1;
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX &&
                 !(((PyMemberDescrObject *)d)->d_member->flags & READONLY);
        if (ok)
            offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a writable slot",
                         ((PyTypeObject *)cls)->tp_name, names[i]);
            return -1;
        }
    }
    return 0;
}

/* One class's slots: their names, how many, and where their offsets go. */
typedef struct {
    const char *const *names;
    int n;
    Py_ssize_t *offsets;
} slots_spec;

/* slots_bind for classes[i] and specs[i], i < count. */
static inline int
slots_bind_each(PyObject *const *classes, const slots_spec *specs, int count)
{
    for (int i = 0; i < count; i++)
        if (slots_bind(classes[i], specs[i].names, specs[i].n, specs[i].offsets) < 0)
            return -1;
    return 0;
}

/* ``seq.append(item)``: a list's at C speed, anything else's method; -1 on an exception. */
static inline int
seq_append(PyObject *seq, PyObject *item)
{
    if (PyList_CheckExact(seq))
        return PyList_Append(seq, item);
    PyObject *r = PyObject_CallMethod(seq, "append", "O", item);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Every slot of o set (none NULL). */
static inline int
slots_all_set(PyObject *o, const Py_ssize_t *offsets, int n)
{
    for (int i = 0; i < n; i++)
        if (SLOT_AT(o, offsets[i]) == NULL)
            return 0;
    return 1;
}

/* CPython 3.11 keeps an int as Py_SIZE(v) digits of PyLong_SHIFT (30) bits, the sign in the
   size. A counter below 2^60 has at most two digits: read straight, and, in slot_set_int,
   written in place (see there). Other versions go through the API. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && PyLong_SHIFT == 30
#define SLOT_INT_DIGITS 1
#define SLOT_INT_LIMIT (1LL << 60)
#endif

/* An int slot's value as a long long; -1 (no error set) when it is not a plain int in range
   or is negative. */
static inline long long
slot_int(PyObject *v)
{
    if (v == NULL || !PyLong_CheckExact(v))
        return -1;
#ifdef SLOT_INT_DIGITS
    Py_ssize_t size = Py_SIZE(v);
    const digit *d = ((PyLongObject *)v)->ob_digit;
    if (size == 0)
        return 0;
    if (size == 1)
        return (long long)d[0];
    if (size == 2)
        return (long long)d[0] | ((long long)d[1] << PyLong_SHIFT);
#endif
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || x < 0) {
        PyErr_Clear();
        return -1;
    }
    return x;
}

/* Store v (a new reference, stolen) in slot off of o; -1 when v is NULL (an error is set). */
static inline int
slot_set(PyObject *o, Py_ssize_t off, PyObject *v)
{
    if (v == NULL)
        return -1;
    Py_XSETREF(SLOT_AT(o, off), v);
    return 0;
}

/* Store v (borrowed: the slot takes a reference of its own) in slot off of o. */
static inline void
slot_put(PyObject *o, Py_ssize_t off, PyObject *v)
{
    Py_INCREF(v);
    Py_XSETREF(SLOT_AT(o, off), v);
}

/* slot := y (0 <= y), an int; -1 with an error set on failure. An int only the slot holds
   (reference count 1: no one can see it change) keeps its object when y has as many digits:
   its digits are written in place, sparing an int's allocation and release (~150
   instructions; a request makes ~10 counts and sets a reader's offsets). */
static inline int
slot_set_int(PyObject *o, Py_ssize_t off, long long y)
{
#ifdef SLOT_INT_DIGITS
    PyObject *v = SLOT_AT(o, off);
    if (v != NULL && y > 0 && y < SLOT_INT_LIMIT && Py_REFCNT(v) == 1 && PyLong_CheckExact(v)) {
        Py_ssize_t size = Py_SIZE(v);
        if (size == (y < (1LL << PyLong_SHIFT) ? 1 : 2)) {
            digit *d = ((PyLongObject *)v)->ob_digit;
            d[0] = (digit)(y & PyLong_MASK);
            if (size == 2)
                d[1] = (digit)(y >> PyLong_SHIFT);
            return 0;
        }
    }
#endif
    return slot_set(o, off, PyLong_FromLongLong(y));
}

/* slot += by, as Python's ``+=`` on whatever int the slot holds; -1 with an error set on
   failure. (A non-negative result in range is the common case, done without an add.) */
static inline int
slot_add(PyObject *o, Py_ssize_t off, long long by)
{
    PyObject *v = SLOT_AT(o, off);
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "slot_add: the slot is not set");
        return -1;
    }
    long long x = slot_int(v);
    if (x >= 0 && (by >= 0 ? x <= LLONG_MAX - by : x + by >= 0))
        return slot_set_int(o, off, x + by);
    PyObject *inc = PyLong_FromLongLong(by);    /* (negative or huge: Python's addition) */
    if (inc == NULL)
        return -1;
    PyObject *sum = PyNumber_Add(v, inc);
    Py_DECREF(inc);
    return slot_set(o, off, sum);
}

/* *where := an interned str of s, once; -1 on failure. */
static inline int
intern(PyObject **where, const char *s)
{
    if (*where == NULL)
        *where = PyUnicode_InternFromString(s);
    return *where == NULL ? -1 : 0;
}

/* *where := v (a reference of its own, the old one dropped); -1 when v is NULL. */
static inline int
keep(PyObject **where, PyObject *v)
{
    Py_XINCREF(v);
    Py_XSETREF(*where, v);
    return v == NULL ? -1 : 0;
}

/* *where := o.name (a method the C calls back: the reference); -1 with an error set. */
static inline int
keep_attr(PyObject **where, PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    int rc = keep(where, v);
    Py_XDECREF(v);
    return rc;
}

#endif
