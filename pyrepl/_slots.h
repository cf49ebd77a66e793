/* pyrepl/_slots.h: a Python class's __slots__ read and written from C at their offsets, and
   the glue every extension but _zbtree.c shares.

   A hot path that is mostly slot loads and stores (a reader's feed_first, a client's read and
   reply bookkeeping) costs a Python server ~20-30 ns a line; the same moves in C cost a few.
   The layout stays Python's: ``slots_bind`` finds each slot's offset in the instance from the
   class's member descriptor (what __slots__ makes: a writable T_OBJECT_EX member) and refuses
   anything else, so a renamed or removed slot fails at import, not at run time. A caller
   checks the instance's exact type before it touches a slot, and treats an unset slot (NULL)
   as "not the common case".

   The glue (at the end): an entry point's checks (BOUND_ENTRY, usage_error), bind()'s
   classes and objects (bind_args), a RESP header's digits and a bulk string (resp_header,
   resp_bulk_at, resp_bulk_bytes), the method table and the module (SLOTS_MODULE). A file
   that uses BOUND_ENTRY or SLOTS_MODULE defines MODULE_NAME, its module's dotted name. */

#ifndef PYREPL_SLOTS_H
#define PYREPL_SLOTS_H

#include <Python.h>
#include <structmember.h>

#define SLOT_AT(o, off) (*(PyObject **)((char *)(o) + (off)))

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

/* A whole object: one whose class has a ``_whole`` slot, and every other slot of its layout
   set. The first check of such an object walks the layout once and leaves the answer in that
   slot (True, or False: checked slot by slot from then on); later checks read it. It holds
   because pyrepl never deletes a slot once set, and it cannot outlive the object: a new object
   starts with the slot unset or None, wherever its memory was. The classes every request checks
   (ServerCore, Client, Command) set all their slots in __init__ (tests/unit/test_slots.py). */
#define WHOLE_TYPES 32
static struct {
    PyTypeObject *type;   /* (a reference: a freed type's address is never reused for it) */
    Py_ssize_t off;       /* its _whole slot's offset, -1: none */
} whole_types[WHOLE_TYPES];
static int whole_count;

static inline Py_ssize_t
whole_offset_of(PyTypeObject *t)
{
    for (int i = 0; i < whole_count; i++)
        if (whole_types[i].type == t)
            return whole_types[i].off;
    Py_ssize_t off = -1;
    PyObject *mro = t->tp_mro;
    for (Py_ssize_t i = 0; mro != NULL && i < PyTuple_GET_SIZE(mro) && off < 0; i++) {
        PyMemberDef *m = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_members;
        for (; m != NULL && m->name != NULL; m++)
            if (m->type == T_OBJECT_EX && !(m->flags & READONLY) &&
                    strcmp(m->name, "_whole") == 0) {
                off = m->offset;
                break;
            }
    }
    if (whole_count < WHOLE_TYPES) {   /* (past that, looked up again: slower, not wrong) */
        Py_INCREF(t);
        whole_types[whole_count].type = t;
        whole_types[whole_count++].off = off;
    }
    return off;
}

/* Every slot of o's layout but _whole (at off) set: the answer, left in _whole. */
static inline int
whole_walk(PyObject *o, Py_ssize_t off)
{
    int whole = 1;
    PyObject *mro = Py_TYPE(o)->tp_mro;
    for (Py_ssize_t i = 0; whole && mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyMemberDef *m = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_members;
        for (; m != NULL && m->name != NULL; m++)
            if (m->type == T_OBJECT_EX && m->offset != off && SLOT_AT(o, m->offset) == NULL) {
                whole = 0;
                break;
            }
    }
    PyObject *old = SLOT_AT(o, off);   /* (NULL, or a bool: no code runs when it goes) */
    SLOT_AT(o, off) = Py_NewRef(whole ? Py_True : Py_False);
    Py_XDECREF(old);
    return whole;
}

/* Every slot of o set (none NULL): the n at offsets, or, for a whole object, all of them. */
static inline int
slots_all_set(PyObject *o, const Py_ssize_t *offsets, int n)
{
    if (n >= 4) {   /* (fewer: checked as fast one by one) */
        Py_ssize_t off = whole_offset_of(Py_TYPE(o));
        if (off >= 0) {
            PyObject *w = SLOT_AT(o, off);
            if (w == Py_True)
                return 1;
            if (w != Py_False && whole_walk(o, off))   /* (unset, or None: not walked yet) */
                return 1;
        }
    }
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

#if PY_VERSION_HEX < 0x030C0000
/* The exception being raised, taken (new ref), and put back (stolen): 3.12's API. */
static inline PyObject *
PyErr_GetRaisedException(void)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb != NULL && v != NULL)
        PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
}

static inline void
PyErr_SetRaisedException(PyObject *v)
{
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(v)), v, PyException_GetTraceback(v));
}
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

/* v := y in place when v is an int only its holder holds (reference count 1: no one can
   see it change) with as many digits as y (0 < y): its digits written, sparing an int's
   allocation and release (~150 instructions; a request makes ~10 counts and sets a
   reader's offsets). 1 when done, else 0 (v untouched). */
static inline int
int_write_in_place(PyObject *v, long long y)
{
#ifdef SLOT_INT_DIGITS
    if (y > 0 && y < SLOT_INT_LIMIT && Py_REFCNT(v) == 1 && PyLong_CheckExact(v)) {
        Py_ssize_t size = Py_SIZE(v);
        if (size == (y < (1LL << PyLong_SHIFT) ? 1 : 2)) {
            digit *d = ((PyLongObject *)v)->ob_digit;
            d[0] = (digit)(y & PyLong_MASK);
            if (size == 2)
                d[1] = (digit)(y >> PyLong_SHIFT);
            return 1;
        }
    }
#endif
    return 0;
}

/* slot := y (0 <= y), an int, in place when it can be (int_write_in_place); -1 with an
   error set on failure. */
static inline int
slot_set_int(PyObject *o, Py_ssize_t off, long long y)
{
    PyObject *v = SLOT_AT(o, off);
    if (v != NULL && int_write_in_place(v, y))
        return 0;
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

/* *where := module.name, imported on first use (a callee whose module imports the caller's,
   so that it cannot be bound at import time); 0 when it is there, -1 with an error set. */
static inline int
keep_import(PyObject **where, const char *module, const char *name)
{
    if (*where != NULL)
        return 0;
    PyObject *m = PyImport_ImportModule(module);
    int rc = m == NULL ? -1 : keep_attr(where, m, name);
    Py_XDECREF(m);
    return rc;
}

/* -- the glue: an entry point's checks, bind(), the method table and the module ------------ */

/* TypeError(usage), for a call not of the form usage shows: NULL, for the caller's return. */
static inline PyObject *
usage_error(const char *usage)
{
    PyErr_SetString(PyExc_TypeError, usage);
    return NULL;
}

/* RuntimeError for MODULE_NAME.func called before its module's bind(): NULL. */
static inline PyObject *
unbound_error(const char *module, const char *func)
{
    PyErr_Format(PyExc_RuntimeError, "%s.%s called before its module's bind()", module, func);
    return NULL;
}

/* The start of an entry point that needs what its module's bind() bound (``bound`` is the
   module's flag, set by bind's last statement): RuntimeError before that instead of reaching
   a NULL type or function pointer, then TypeError(usage) for a call of other than n
   arguments. The C function has the name of the Python one (__func__ names it). */
#define BOUND_ENTRY(bound, nargs, n, usage)                                   \
    do {                                                                      \
        if (!(bound))                                                         \
            return unbound_error(MODULE_NAME, __func__);                      \
        if ((nargs) != (n))                                                   \
            return usage_error(usage);                                        \
    } while (0)

/* One argument of bind(): a class whose slots are bound (names, n, offsets: slots_bind) and,
   where ``where`` is not NULL, kept there (a reference of its own); with no names, any object
   kept as it is. */
typedef struct {
    const char *const *names;
    int n;
    Py_ssize_t *offsets;
    PyObject **where;
} slots_spec;

/* The spec of class x, as a file names its parts: slots x_names, offsets x_off, kept in
   x_type. */
#define SLOTS_OF(x) {x##_names, (int)Py_ARRAY_LENGTH(x##_names), x##_off, (PyObject **)&x##_type}
/* The spec of an object kept in *where. */
#define KEPT(where) {NULL, 0, NULL, (PyObject **)(where)}

/* bind()'s arguments: TypeError(usage) unless ``form`` (the call's form checked), then
   args[i] as specs[i] says, i < count; -1 with an error set. */
static inline int
bind_args(int form, const char *usage, PyObject *const *args, const slots_spec *specs,
          Py_ssize_t count)
{
    if (!form) {
        usage_error(usage);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (specs[i].names != NULL &&
                slots_bind(args[i], specs[i].names, specs[i].n, specs[i].offsets) < 0)
            return -1;
        if (specs[i].where != NULL)
            keep(specs[i].where, args[i]);
    }
    return 0;
}

/* A METH_FASTCALL function of a module's method table. */
/* o.<method>(x) for a method answering an index (a sorted set's _bisect): that index, -1
   with an error set on failure. */
static inline Py_ssize_t
call_index(PyObject *o, PyObject *method, double x)
{
    PyObject *f = PyFloat_FromDouble(x);
    if (f == NULL)
        return -1;
    PyObject *args[2] = {o, f};
    PyObject *r = PyObject_VectorcallMethod(method, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            NULL);
    Py_DECREF(f);
    if (r == NULL)
        return -1;
    Py_ssize_t i = PyLong_AsSsize_t(r);
    Py_DECREF(r);
    return i;
}

/* A RESP header or integer at w (room for 24 bytes): mark, n in decimal, CRLF (what
   snprintf's "%c%lld\r\n" writes, at a tenth of its ~700 instructions); its length. */
static inline int
resp_header(char *w, char mark, long long n)
{
    char digits[20];
    int k = 0, at = 0;
    unsigned long long u = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
    do {
        digits[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    w[at++] = mark;
    if (n < 0)
        w[at++] = '-';
    while (k)
        w[at++] = digits[--k];
    w[at++] = '\r';
    w[at++] = '\n';
    return at;
}

/* A RESP bulk string of the n bytes at s written at w: "$<n>\r\n", the bytes, CRLF; its
   length, the bytes written (1 + n's digits + 2 + n + 2: at most n + 26). */
static inline Py_ssize_t
resp_bulk_at(char *w, const void *s, Py_ssize_t n)
{
    int k = resp_header(w, '$', (long long)n);
    memcpy(w + k, s, (size_t)n);
    w[k + n] = '\r';
    w[k + n + 1] = '\n';
    return k + n + 2;
}

/* A RESP bulk string of the n bytes at s, as a new bytes object of its exact size (one copy
   of the bytes); NULL with MemoryError. */
static inline PyObject *
resp_bulk_bytes(const char *s, Py_ssize_t n)
{
    char head[24];
    int k = resp_header(head, '$', (long long)n);
    PyObject *out = PyBytes_FromStringAndSize(NULL, k + n + 2);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out);
    memcpy(w, head, (size_t)k);
    memcpy(w + k, s, (size_t)n);
    w[k + n] = '\r';
    w[k + n + 1] = '\n';
    return out;
}

#define FASTCALL(name, fn, doc) {(name), (PyCFunction)(void (*)(void))(fn), METH_FASTCALL, (doc)}

/* The module MODULE_NAME (doc), its functions the FASTCALL entries that follow, and its
   PyInit_<init>. */
#define SLOTS_MODULE(init, doc, ...)                                                  \
    static PyMethodDef methods[] = {__VA_ARGS__, {NULL, NULL, 0, NULL}};              \
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, MODULE_NAME, (doc), -1, \
                                        methods};                                     \
    PyMODINIT_FUNC PyInit_##init(void) { return PyModule_Create(&module); }

#endif
