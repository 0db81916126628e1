// TensorArrayWriteV3, TensorArrayReadV3 and TensorArrayGatherV3 for raw_ops.py, their common
// case in C (on host arrays: the numpy and emulated backends): a first write of an accepted
// shape into a uniform layout with room, a read of a slot holding a value, and a gather of
// written slots of a uniform layout by an index vector. storage.py takes these same branches
// in Python; here they skip the interpreter work around a row copy (about 0.8 us a write or
// read, 12 us a gather), which is what a loop of small raw ops costs.
//
// Every other call (a wrong type, a bound, a flag, a closed array, a held lock, keyword
// arguments, a tape recording) goes unchanged to raw_ops' Python op (``_write_op``,
// ``_read_op``, ``_gather_op``): the common case changes nothing before it is sure to
// finish. So every error, and every rarer path, is the Python code's; this file decides
// nothing that code does not decide the same way.
//
// Why no lock is taken: storage runs every op under the array's lock. Under the GIL,
// a lock found free stays free while this code runs, because it never releases the GIL,
// calls no Python code and allocates nothing the cyclic collector tracks (the arrays it
// makes, a read's view and a gather's rows, are made with the collector paused): the op
// is as atomic as if it held the lock. A free-threaded build has no such guarantee, so
// there every call goes to the Python op.
//
// The state is read where CPython keeps it: ``configure`` names the classes, whose
// fields are ``__slots__``; a slot's member descriptor gives its offset in the object,
// as CPython's own attribute cache uses it.
//
// Built by g++ against this Python's and this NumPy's headers (backends/cpu_kernels.py).
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <cstring>

#ifndef Py_T_OBJECT_EX
#define Py_T_OBJECT_EX T_OBJECT_EX
#define Py_READONLY READONLY
#endif

// storage.py's slot flags.
enum : unsigned char { WRITTEN = 1, READ = 2, CLEARED = 4, VALUE = 8 };
static const unsigned char STORED = WRITTEN | VALUE;
static const unsigned char READABLE = WRITTEN | VALUE | CLEARED;
static const unsigned char CLEARED_AFTER_READ = WRITTEN | READ | CLEARED;
static const unsigned char READ_VALUE = WRITTEN | READ | VALUE;
static const unsigned char SEEN = 0x80;          // no flag of storage's: a gather's mark of a slot it takes
// A gather whose result is larger goes through the allocation door (Backend.allocate's
// memory limit); one of at most _FAST_BATCH slots is checked slot by slot (storage.py).
static const npy_intp MOST_GATHERED_BYTES = npy_intp(1) << 24;
static const npy_intp FAST_BATCH = 8;

// The fields read, as (class, name): Handle.array, then ArrayStorage's, then UniformLayout's.
enum Field {
    HANDLE_ARRAY,
    DTYPE, CLEAR_AFTER_READ, SIZE, DYNAMIC_SIZE, FLAGS, LOCK, ATTENTION, LAYOUT, ACCEPTED_SHAPE, WRITTEN_COUNT,
    CLEARED_COUNT, UNREAD,
    SLAB, VIEW,
    N_FIELDS
};
static const char* const FIELD_NAMES[N_FIELDS] = {
    "array",
    "dtype", "clear_after_read", "_size", "_dynamic_size", "_flags", "_lock", "_attention", "_layout",
    "_accepted_shape", "_written_count", "_cleared_count", "_unread",
    "slab", "view",
};
static const int FIRST_STORAGE_FIELD = DTYPE, FIRST_LAYOUT_FIELD = SLAB;

struct State {
    PyObject* namespace_;             // raw_ops' globals: its recorder and its Python ops
    PyObject* recorder_name;          // "_record"
    PyObject* write_name;             // "_write_op"
    PyObject* read_name;              // "_read_op"
    PyObject* gather_name;            // "_gather_op"
    PyTypeObject* handle_type;
    PyTypeObject* storage_type;
    PyTypeObject* layout_type;        // UniformLayout
    PyTypeObject* lock_type;          // threading.Lock's
    PyObject* flow_dtype;             // float32
    PyObject* dtype_names;            // dtypes.as_dtype's cache: spelling -> dtype
    PyObject* locked;                 // the lock type's ``locked`` method (unbound)
    Py_ssize_t offsets[N_FIELDS];
    bool configured;
};

static State* state_of(PyObject* module) { return static_cast<State*>(PyModule_GetState(module)); }

// A field's value (borrowed), or nullptr when unset.
static inline PyObject* get(const State* st, PyObject* object, Field field) {
    return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(object) + st->offsets[field]);
}

// Replace a field's value with ``value`` (a new reference, given to the field).
static inline void set(const State* st, PyObject* object, Field field, PyObject* value) {
    PyObject** slot = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(object) + st->offsets[field]);
    Py_XSETREF(*slot, value);
}

// A non-negative int32 index: raw_ops' own check takes anything else.
static bool index_of(PyObject* object, Py_ssize_t* index) {
    if (!PyLong_CheckExact(object)) return false;
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (overflow || value < 0 || value > 2147483647LL) {
        PyErr_Clear();
        return false;
    }
    *index = static_cast<Py_ssize_t>(value);
    return true;
}

static Py_ssize_t count_of(PyObject* object) {
    if (object == nullptr || !PyLong_CheckExact(object)) return -1;
    const Py_ssize_t count = PyLong_AsSsize_t(object);
    if (count < 0) PyErr_Clear();
    return count;
}

// The count in ``field`` plus ``by``, a new int, else nullptr (no error set).
static PyObject* count_plus(const State* st, PyObject* object, Field field, Py_ssize_t by) {
    const Py_ssize_t count = count_of(get(st, object, field));
    PyObject* sum = count < 0 ? nullptr : PyLong_FromSsize_t(count + by);
    if (sum == nullptr) PyErr_Clear();
    return sum;
}

// PyArray_NewFromDescr (which steals ``descr``) with the cyclic collector paused: a
// collection could run Python code while a lock is taken for free (see the top).
static PyObject* new_array(PyTypeObject* type, PyArray_Descr* descr, int ndim, npy_intp* dims, npy_intp* strides,
                           char* data, int flags) {
    const int collecting = PyGC_Disable();
    PyObject* made = PyArray_NewFromDescr(type, descr, ndim, dims, strides, data, flags, nullptr);
    if (collecting) PyGC_Enable();
    return made;
}

// The ArrayStorage behind ``handle``, else nullptr.
static PyObject* storage_of(const State* st, PyObject* handle) {
    if (Py_TYPE(handle) != st->handle_type) return nullptr;
    PyObject* array = get(st, handle, HANDLE_ARRAY);
    return array != nullptr && Py_TYPE(array) == st->storage_type ? array : nullptr;
}

// Whether ``array``'s lock is free (see the top) and it needs no attention (closed, or a
// stack's read marks pending: storage.py's _attend).
static bool is_free(const State* st, PyObject* array) {
    PyObject* lock = get(st, array, LOCK);
    if (lock == nullptr || Py_TYPE(lock) != st->lock_type) return false;
    PyObject* held = PyObject_Vectorcall(st->locked, &lock, 1, nullptr);
    if (held == nullptr) {
        PyErr_Clear();
        return false;
    }
    Py_DECREF(held);
    return held == Py_False && get(st, array, ATTENTION) == Py_False;
}

// The flag byte of ``index`` when it is below len(flags), else nullptr.
static unsigned char* flag_of(const State* st, PyObject* array, Py_ssize_t index) {
    PyObject* flags = get(st, array, FLAGS);
    if (flags == nullptr || !PyByteArray_CheckExact(flags) || index >= PyByteArray_GET_SIZE(flags)) return nullptr;
    return reinterpret_cast<unsigned char*>(PyByteArray_AS_STRING(flags)) + index;
}

// The layout's array field ``field`` when the layout is a UniformLayout and it is an array.
static PyArrayObject* uniform_rows(const State* st, PyObject* array, Field field) {
    PyObject* layout = get(st, array, LAYOUT);
    if (layout == nullptr || Py_TYPE(layout) != st->layout_type) return nullptr;
    PyObject* rows = get(st, layout, field);
    return rows != nullptr && PyArray_Check(rows) ? reinterpret_cast<PyArrayObject*>(rows) : nullptr;
}

static bool same_shape(PyObject* shape, int ndim, const npy_intp* dims) {
    if (shape == nullptr || !PyTuple_CheckExact(shape) || PyTuple_GET_SIZE(shape) != ndim) return false;
    for (int i = 0; i < ndim; ++i) {
        PyObject* item = PyTuple_GET_ITEM(shape, i);
        if (!PyLong_CheckExact(item) || PyLong_AsSsize_t(item) != dims[i]) {
            PyErr_Clear();
            return false;
        }
    }
    return true;
}

static bool is_flow(const State* st, PyObject* flow) {
    return PyArray_CheckExact(flow) && PyArray_NDIM(reinterpret_cast<PyArrayObject*>(flow)) == 0 &&
           reinterpret_cast<PyObject*>(PyArray_DESCR(reinterpret_cast<PyArrayObject*>(flow))) == st->flow_dtype;
}

// Write(handle, index, value, flow_in) in its common case -> flow_in (a new reference),
// else nullptr having changed nothing (no error set). storage.ArrayStorage.write's first
// branch: a C-contiguous ndarray of the array's dtype and of ``_accepted_shape``, into an
// empty slot below the slab's capacity.
static PyObject* write_common(const State* st, PyObject* const* args) {
    Py_ssize_t index;
    if (!index_of(args[1], &index) || !is_flow(st, args[3]) || !PyArray_CheckExact(args[2])) return nullptr;
    PyArrayObject* value = reinterpret_cast<PyArrayObject*>(args[2]);
    PyObject* array = storage_of(st, args[0]);
    if (array == nullptr || !is_free(st, array) ||
            reinterpret_cast<PyObject*>(PyArray_DESCR(value)) != get(st, array, DTYPE) ||
            PyDataType_REFCHK(PyArray_DESCR(value)) || !PyArray_IS_C_CONTIGUOUS(value)) {
        return nullptr;
    }
    const Py_ssize_t size = count_of(get(st, array, SIZE));
    unsigned char* flag = flag_of(st, array, index);
    if (size < 0 || flag == nullptr || *flag != 0 || (index >= size && get(st, array, DYNAMIC_SIZE) != Py_True) ||
            !same_shape(get(st, array, ACCEPTED_SHAPE), PyArray_NDIM(value), PyArray_DIMS(value))) {
        return nullptr;
    }
    PyArrayObject* slab = uniform_rows(st, array, SLAB);
    const int ndim = PyArray_NDIM(value);
    if (slab == nullptr || !PyArray_CheckExact(reinterpret_cast<PyObject*>(slab)) || PyArray_NDIM(slab) != ndim + 1 ||
            PyArray_DESCR(slab) != PyArray_DESCR(value) || !PyArray_IS_C_CONTIGUOUS(slab) ||
            !PyArray_ISWRITEABLE(slab) || index >= PyArray_DIM(slab, 0) ||
            std::memcmp(PyArray_DIMS(slab) + 1, PyArray_DIMS(value), sizeof(npy_intp) * ndim) != 0) {
        return nullptr;
    }
    PyObject* new_written = count_plus(st, array, WRITTEN_COUNT, 1);
    PyObject* new_size = index < size ? nullptr : PyLong_FromSsize_t(index + 1);
    if (new_written == nullptr || (index >= size && new_size == nullptr)) {
        Py_XDECREF(new_written);
        Py_XDECREF(new_size);
        PyErr_Clear();
        return nullptr;
    }
    // Everything is checked and allocated: from here on nothing fails. memmove: a value
    // may be a view of the slab (of this very row, at most).
    const npy_intp row_bytes = PyArray_NBYTES(value);
    std::memmove(PyArray_BYTES(slab) + index * row_bytes, PyArray_BYTES(value), row_bytes);
    if (new_size != nullptr) set(st, array, SIZE, new_size);
    *flag = STORED;
    set(st, array, WRITTEN_COUNT, new_written);
    Py_INCREF(args[3]);
    return args[3];
}

// Whether ``requested`` is the array's dtype as dtypes.as_dtype resolved it before, looked up
// only for spellings whose hash runs no Python code (and before the lock is looked at).
static bool is_requested(const State* st, PyObject* array, PyObject* requested) {
    PyObject* dtype = get(st, array, DTYPE);
    if (requested == dtype) return true;
    if (!PyUnicode_CheckExact(requested) && !PyArray_DescrCheck(requested) && !PyType_Check(requested)) return false;
    PyObject* resolved = PyDict_GetItemWithError(st->dtype_names, requested);
    if (resolved == nullptr) PyErr_Clear();
    return resolved == dtype;
}

// Read(handle, index, flow_in, dtype) in its common case -> the value of slot ``index``,
// else nullptr having changed nothing (no error set). storage.ArrayStorage.read's first
// branch: a slot holding a value, read from a uniform layout as a read-only view.
static PyObject* read_common(const State* st, PyObject* const* args) {
    Py_ssize_t index;
    if (!index_of(args[1], &index)) return nullptr;
    PyObject* array = storage_of(st, args[0]);
    if (array == nullptr) return nullptr;
    if (!is_requested(st, array, args[3]) || !is_free(st, array)) return nullptr;
    const Py_ssize_t size = count_of(get(st, array, SIZE));
    unsigned char* flag = flag_of(st, array, index);
    PyObject* clear_after_read = get(st, array, CLEAR_AFTER_READ);
    PyArrayObject* view = uniform_rows(st, array, VIEW);
    if (index >= size || flag == nullptr || (*flag & READABLE) != STORED || view == nullptr ||
            PyArray_NDIM(view) < 1 || index >= PyArray_DIM(view, 0) ||
            (clear_after_read != Py_True && clear_after_read != Py_False)) {
        return nullptr;
    }
    PyObject* new_cleared = nullptr;
    if (clear_after_read == Py_True && (new_cleared = count_plus(st, array, CLEARED_COUNT, 1)) == nullptr) {
        return nullptr;
    }
    // view[index, ...]: the layout's row as NumPy makes it, read-only, its base the view.
    PyArray_Descr* descr = PyArray_DESCR(view);
    Py_INCREF(descr);
    char* data = PyArray_BYTES(view) + index * PyArray_STRIDE(view, 0);
    PyObject* row = new_array(Py_TYPE(view), descr, PyArray_NDIM(view) - 1, PyArray_DIMS(view) + 1,
                              PyArray_STRIDES(view) + 1, data, PyArray_FLAGS(view) & ~NPY_ARRAY_WRITEABLE);
    Py_INCREF(view);
    if (row == nullptr || PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(row),
                                                reinterpret_cast<PyObject*>(view)) < 0) {
        if (row == nullptr) Py_DECREF(view);
        Py_XDECREF(row);
        Py_XDECREF(new_cleared);
        PyErr_Clear();
        return nullptr;
    }
    // From here on nothing fails.
    Py_INCREF(Py_False);
    set(st, array, UNREAD, Py_False);
    if (new_cleared != nullptr) {
        *flag = CLEARED_AFTER_READ;
        set(st, array, CLEARED_COUNT, new_cleared);
    } else {
        *flag |= READ;
    }
    return row;
}

// Gather(handle, indices, flow_in, dtype) in its common case -> the rows, a new array, else
// nullptr having changed nothing (no error set). storage.ArrayStorage.gather's fast branch: a
// C-contiguous int64 vector of more than FAST_BATCH indices of a uniform layout, every slot in
// range, written and not cleared (and, on a clearing array, none twice); the reads are marked
// as storage's _commit_reads marks them.
static PyObject* gather_common(const State* st, PyObject* const* args) {
    if (!PyArray_CheckExact(args[1])) return nullptr;
    PyArrayObject* indices = reinterpret_cast<PyArrayObject*>(args[1]);
    const npy_intp n = PyArray_NDIM(indices) == 1 ? PyArray_DIM(indices, 0) : 0;
    if (n <= FAST_BATCH || PyArray_TYPE(indices) != NPY_INT64 || !PyArray_IS_C_CONTIGUOUS(indices) ||
            !PyArray_ISNOTSWAPPED(indices)) {
        return nullptr;
    }
    PyObject* array = storage_of(st, args[0]);
    if (array == nullptr || !is_requested(st, array, args[3]) || !is_free(st, array)) return nullptr;
    const Py_ssize_t size = count_of(get(st, array, SIZE));
    PyObject* flags_object = get(st, array, FLAGS);
    PyObject* clear_after_read = get(st, array, CLEAR_AFTER_READ);
    PyArrayObject* slab = uniform_rows(st, array, SLAB);
    if (size < 0 || flags_object == nullptr || !PyByteArray_CheckExact(flags_object) ||
            PyByteArray_GET_SIZE(flags_object) < size || slab == nullptr || !PyArray_IS_C_CONTIGUOUS(slab) ||
            PyArray_NDIM(slab) < 1 || PyArray_DIM(slab, 0) < size || PyArray_ITEMSIZE(slab) == 0 ||
            PyDataType_REFCHK(PyArray_DESCR(slab)) || (clear_after_read != Py_True && clear_after_read != Py_False)) {
        return nullptr;
    }
    npy_intp row_bytes = PyArray_ITEMSIZE(slab);
    for (int axis = 1; axis < PyArray_NDIM(slab); ++axis) row_bytes *= PyArray_DIM(slab, axis);
    if (row_bytes == 0 || n > MOST_GATHERED_BYTES / row_bytes) return nullptr;   // empty rows: zeros, in Python
    const bool clearing = clear_after_read == Py_True;
    PyObject* new_cleared = nullptr;
    if (clearing && (new_cleared = count_plus(st, array, CLEARED_COUNT, n)) == nullptr) return nullptr;
    // One pass checks every index (a clearing array's repeats too, by a mark undone below).
    unsigned char* flags = reinterpret_cast<unsigned char*>(PyByteArray_AS_STRING(flags_object));
    const npy_int64* slots = static_cast<const npy_int64*>(PyArray_DATA(indices));
    npy_intp checked = 0;
    for (; checked < n; ++checked) {
        const npy_int64 slot = slots[checked];
        if (slot < 0 || slot >= size || (flags[slot] & (WRITTEN | CLEARED | SEEN)) != WRITTEN) break;
        if (clearing) flags[slot] |= SEEN;
    }
    PyObject* rows = nullptr;
    if (checked == n) {
        npy_intp dims[NPY_MAXDIMS];
        dims[0] = n;
        std::memcpy(dims + 1, PyArray_DIMS(slab) + 1, sizeof(npy_intp) * (PyArray_NDIM(slab) - 1));
        PyArray_Descr* descr = PyArray_DESCR(slab);
        Py_INCREF(descr);
        rows = new_array(&PyArray_Type, descr, PyArray_NDIM(slab), dims, nullptr, nullptr, 0);
    }
    if (rows == nullptr) {
        for (npy_intp k = 0; clearing && k < checked; ++k) flags[slots[k]] &= ~SEEN;
        Py_XDECREF(new_cleared);
        PyErr_Clear();
        return nullptr;
    }
    // From here on nothing fails.
    char* out = PyArray_BYTES(reinterpret_cast<PyArrayObject*>(rows));
    const char* source = PyArray_BYTES(slab);
    const unsigned char mark = clearing ? CLEARED_AFTER_READ : READ_VALUE;
    for (npy_intp k = 0; k < n; ++k) {
        std::memcpy(out + k * row_bytes, source + slots[k] * row_bytes, row_bytes);
        flags[slots[k]] = mark;
    }
    Py_INCREF(Py_False);
    set(st, array, UNREAD, Py_False);
    if (new_cleared != nullptr) set(st, array, CLEARED_COUNT, new_cleared);
    return rows;
}

// The Python op ``name`` of the namespace, called with the caller's arguments.
static PyObject* python_op(const State* st, PyObject* name, PyObject* const* args, Py_ssize_t n_args,
                           PyObject* kwnames) {
    if (!st->configured) {          // cleared (the module's state, at interpreter exit)
        PyErr_SetString(PyExc_RuntimeError, "gpu_tensorarray's compiled raw ops are no longer configured");
        return nullptr;
    }
    PyObject* op = PyDict_GetItemWithError(st->namespace_, name);
    if (op == nullptr) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "raw_ops has no %U", name);
        return nullptr;
    }
    Py_INCREF(op);
    PyObject* result = PyObject_Vectorcall(op, args, n_args, kwnames);
    Py_DECREF(op);
    return result;
}

// Whether a call may take the common case: positional arguments only, nothing recording
// (raw_ops' ``_record`` reports every op to the tape), and a GIL (see the top).
static bool common_call(const State* st, Py_ssize_t n_args, PyObject* kwnames) {
#ifdef Py_GIL_DISABLED
    return false;
#else
    return n_args == 4 && kwnames == nullptr && st->configured &&
           PyDict_GetItemWithError(st->namespace_, st->recorder_name) == Py_None;
#endif
}

// An op of raw_ops: its common case in C where the call allows it and it applies, else the
// Python op that State::*python_name names. All three take four positional arguments.
template <PyObject* (*common_case)(const State*, PyObject* const*), PyObject* State::*python_name>
static PyObject* raw_op(PyObject* module, PyObject* const* args, Py_ssize_t n_args, PyObject* kwnames) {
    const State* st = state_of(module);
    if (common_call(st, n_args, kwnames)) {
        PyObject* result = common_case(st, args);
        if (result != nullptr) return result;
    }
    if (PyErr_Occurred()) return nullptr;
    return python_op(st, st->*python_name, args, n_args, kwnames);
}

// A writable object slot's offset in instances of ``type``; -1 (an error set) otherwise.
static Py_ssize_t slot_offset(PyTypeObject* type, const char* name) {
    PyObject* descriptor = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), name);
    if (descriptor == nullptr) return -1;
    Py_ssize_t offset = -1;
    if (Py_TYPE(descriptor) == &PyMemberDescr_Type) {
        const PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descriptor)->d_member;
        if (member->type == Py_T_OBJECT_EX && !(member->flags & Py_READONLY)) offset = member->offset;
    }
    Py_DECREF(descriptor);
    if (offset < 0) PyErr_Format(PyExc_TypeError, "%s.%s is not a slot of objects", type->tp_name, name);
    return offset;
}

// configure(namespace, handle_type, storage_type, uniform_layout_type, lock_type, flow_dtype, dtype_names)
static PyObject* configure(PyObject* module, PyObject* const* args, Py_ssize_t n_args) {
    State* st = state_of(module);
    if (n_args != 7 || !PyDict_Check(args[0]) || !PyType_Check(args[1]) || !PyType_Check(args[2]) ||
            !PyType_Check(args[3]) || !PyType_Check(args[4]) || !PyArray_DescrCheck(args[5]) ||
            !PyDict_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError, "configure(namespace, handle_type, storage_type, uniform_layout_type, "
                                         "lock_type, flow_dtype, dtype_names)");
        return nullptr;
    }
    PyTypeObject* types[3] = {reinterpret_cast<PyTypeObject*>(args[1]), reinterpret_cast<PyTypeObject*>(args[2]),
                              reinterpret_cast<PyTypeObject*>(args[3])};
    Py_ssize_t offsets[N_FIELDS];           // all found before any is used: a failure changes nothing
    for (int field = 0; field < N_FIELDS; ++field) {
        PyTypeObject* owner = types[field >= FIRST_LAYOUT_FIELD ? 2 : field >= FIRST_STORAGE_FIELD ? 1 : 0];
        if ((offsets[field] = slot_offset(owner, FIELD_NAMES[field])) < 0) return nullptr;
    }
    PyObject* locked = PyObject_GetAttrString(args[4], "locked");
    if (locked == nullptr) return nullptr;
    std::memcpy(st->offsets, offsets, sizeof(offsets));
    Py_XSETREF(st->locked, locked);
    PyObject** kept[7] = {&st->namespace_, reinterpret_cast<PyObject**>(&st->handle_type),
                          reinterpret_cast<PyObject**>(&st->storage_type),
                          reinterpret_cast<PyObject**>(&st->layout_type), reinterpret_cast<PyObject**>(&st->lock_type),
                          &st->flow_dtype, &st->dtype_names};
    for (int i = 0; i < 7; ++i) {
        Py_INCREF(args[i]);
        Py_XSETREF(*kept[i], args[i]);
    }
    st->configured = true;
    Py_RETURN_NONE;
}

// Whether the ops can take their common case in this build.
static PyObject* enabled(PyObject*, PyObject*) {
#ifdef Py_GIL_DISABLED
    Py_RETURN_FALSE;
#else
    Py_RETURN_TRUE;
#endif
}

static int exec_module(PyObject* module) {
    if (_import_array() < 0) return -1;
    State* st = state_of(module);
    st->recorder_name = PyUnicode_InternFromString("_record");
    st->write_name = PyUnicode_InternFromString("_write_op");
    st->read_name = PyUnicode_InternFromString("_read_op");
    st->gather_name = PyUnicode_InternFromString("_gather_op");
    return st->recorder_name && st->write_name && st->read_name && st->gather_name ? 0 : -1;
}

static int traverse(PyObject* module, visitproc visit, void* arg) {
    State* st = state_of(module);
    Py_VISIT(st->namespace_);
    Py_VISIT(st->handle_type);
    Py_VISIT(st->storage_type);
    Py_VISIT(st->layout_type);
    Py_VISIT(st->lock_type);
    Py_VISIT(st->flow_dtype);
    Py_VISIT(st->dtype_names);
    Py_VISIT(st->locked);
    return 0;
}

static int clear(PyObject* module) {
    State* st = state_of(module);
    st->configured = false;
    Py_CLEAR(st->namespace_);
    Py_CLEAR(st->recorder_name);
    Py_CLEAR(st->write_name);
    Py_CLEAR(st->read_name);
    Py_CLEAR(st->gather_name);
    Py_CLEAR(st->handle_type);
    Py_CLEAR(st->storage_type);
    Py_CLEAR(st->layout_type);
    Py_CLEAR(st->lock_type);
    Py_CLEAR(st->flow_dtype);
    Py_CLEAR(st->dtype_names);
    Py_CLEAR(st->locked);
    return 0;
}

static void free_module(void* module) { clear(static_cast<PyObject*>(module)); }

#define ENTRY(NAME) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(NAME)), METH_FASTCALL | METH_KEYWORDS

static PyMethodDef METHODS[] = {
    {"TensorArrayWriteV3", ENTRY((raw_op<write_common, &State::write_name>)),
     "TensorArrayWriteV3(handle, index, value, flow_in, name=None)\n--\n\n"
     "Write ``value`` at ``index`` -> flow_out (``flow_in`` passed through)."},
    {"TensorArrayReadV3", ENTRY((raw_op<read_common, &State::read_name>)),
     "TensorArrayReadV3(handle, index, flow_in, dtype, name=None)\n--\n\n"
     "The element at ``index`` (zeros for unwritten slots of a fully defined element shape)."},
    {"TensorArrayGatherV3", ENTRY((raw_op<gather_common, &State::gather_name>)),
     "TensorArrayGatherV3(handle, indices, flow_in, dtype, element_shape=None, name=None)\n--\n\n"
     "The elements at ``indices``, stacked along a new first axis."},
    {"configure", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(configure)), METH_FASTCALL,
     "configure(namespace, handle_type, storage_type, uniform_layout_type, lock_type, flow_dtype, dtype_names)"},
    {"enabled", enabled, METH_NOARGS, "whether the ops can take their common case in this build"},
    {nullptr, nullptr, 0, nullptr},
};

static PyModuleDef_Slot SLOTS[] = {{Py_mod_exec, reinterpret_cast<void*>(exec_module)}, {0, nullptr}};

static PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "gpu_tensorarray_cpu_raw_ops", "Raw Write, Read and Gather, their common case compiled.",
    sizeof(State), METHODS, SLOTS, traverse, clear, free_module,
};

PyMODINIT_FUNC PyInit_gpu_tensorarray_cpu_raw_ops(void) { return PyModuleDef_Init(&MODULE); }
