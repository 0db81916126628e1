"""One TensorArray resource: its attributes, per-slot flags, and TensorFlow's
state machine (tensorflow/core/kernels/tensor_array.h) over a device layout.

Every operation validates completely, then makes every allocation it needs
(through the backend's one door, Backend.allocate: values' contiguous copies,
scatter-add plans, results, a widened layout, a grown flag buffer, and last the
layout's growth), and only then changes anything: a failed op, also one that runs
out of memory, leaves the array exactly as it was (docs/semantics.md §6.1). Each
public method lists TensorFlow's checks in TensorFlow's order; the numbers refer
to the steps of its op in docs/semantics.md §2 (Write: §2.2, Read: §2.3, ...).
Element values live in a layout (layouts.py), reached only through the Layout
interface; flags live on the host in a bytearray, one byte per slot (and zeros
past ``size``: room to grow).

Outside this module an array is read through its public face: ``backend``,
``dtype``, ``name``, ``is_grad``, ``clear_after_read``, ``identical_element_shapes``,
``created_dynamic`` (fixed at creation), ``size``, ``element_shape``, ``dynamic_size``, ``marked_size``,
``closed``, ``nbytes``, ``grads`` (read-only properties) and ``slot_state(index)``.
"""

from collections import namedtuple
from operator import attrgetter
from types import MappingProxyType

from . import dtypes, messages
from .errors import AbortedError, InvalidArgumentError, ResourceExhaustedError
from .host import (FLAG_BYTES, INT32_MAX, count_distinct, distinct, element_count, first_true, flag_view,
                   flags_all_equal, flags_at, has_duplicates, index_vector, lone_arrivals, repeats)
from .layouts import new_layout
from .shapes import check_element_count, is_compatible, is_fully_defined, merge

__all__ = ["ArrayStorage", "SlotState"]

#: One slot as TensorFlow's TensorAndState describes it (tensor_array.h): ``value`` is
#: its value (None when it holds none: unwritten, soft or cleared), ``shape`` its shape
#: once written.
SlotState = namedtuple("SlotState", ["written", "read", "cleared", "has_value", "shape", "value"])

# Per-slot flags. A WRITTEN slot without VALUE is "soft": its shape is known and
# it reads as zeros (gradient arrays get these from the forward array).
WRITTEN, READ, CLEARED, VALUE = 1, 2, 4, 8
_STORED = WRITTEN | VALUE
_READABLE = WRITTEN | VALUE | CLEARED
_CLEARED_AFTER_READ = WRITTEN | READ | CLEARED
_READ_VALUE = WRITTEN | READ | VALUE
_FAST_BATCH = 8       # batches up to this size are checked slot by slot
_FIRST_FLAGS = 1024   # a growing array's flags start with this many slots: a byte each
_UNSURE = object()    # a vector check that cannot vouch for a batch
_VECTOR_PLAN_BYTES = 40   # host bytes per index that _plan_reads_vector's temporaries take at most


class ArrayStorage:
    """The resource behind a handle. All methods run under the array's lock (a C
    lock, ``Backend.array_lock``) and, inside it, its device step: on a GPU, that makes
    the array's device current and orders its device work across streams
    (``Backend.array_device``)."""

    __slots__ = ("dtype", "clear_after_read", "_size", "_dynamic_size", "_flags", "_lock", "_on_device", "_attention",
                 "_layout", "_accepted_shape", "_written_count", "_cleared_count", "_unread", "__dict__", "__weakref__")

    def __init__(self, backend, dtype, size, element_shape, dynamic_size, clear_after_read,
                 identical_element_shapes, name, is_grad=False, marked_size=-1):
        # Fixed at creation; read them, never assign them.
        self.backend = backend
        self.dtype = dtype
        self.name = name
        self.clear_after_read = clear_after_read
        self.identical_element_shapes = identical_element_shapes
        self.is_grad = is_grad
        self.created_dynamic = dynamic_size         # (a gradient array of it then fixes its size)
        self._aggregate = is_grad                   # multiple_writes_aggregate
        # Changed by ops; public as read-only properties.
        self._size = size
        self._element_shape = element_shape         # a partial shape (shapes.py)
        self._dynamic_size = dynamic_size
        self._marked_size = marked_size             # set by Split; Concat of a grad array uses it
        self._closed = False
        self._flags = backend.allocate(lambda: bytearray(size), size,
                                       lambda: f"the flags of TensorArray {name} ({size} slots)", host=True)
        self._written_count = 0                     # slots with WRITTEN: with _cleared_count, makes
        self._cleared_count = 0                     # "stack of a fully written array" an O(1) check
        self._unmarked_reads = 0                    # slots [0, n) read by a stack, flags not yet set
        # Until the first read (which may set READ and clear values) no slot is READ or
        # CLEARED, so "every slot holds a value" is written_count == size and soft_count
        # == 0: an aggregating scatter then needs no flag scan. soft_count (WRITTEN slots
        # without VALUE) is exact only while _unread.
        self._unread = True
        self._soft_count = 0
        self._attention = False                     # closed, or _unmarked_reads: see _attend
        # The one place an op's device work is put on the array's device and ordered
        # across streams: the backend's device step, entered under the C lock
        # (backends/device_guard.py; on the CPU, a C-level no-op). Device memory an op
        # drops goes to ``_hold`` first: another stream may still be reading it.
        self._lock = backend.array_lock()
        self._on_device = backend.array_device()
        self._hold = backend.array_hold(self._on_device)
        self._layout = new_layout(backend, dtype, name, self._hold)
        self._native_type = self._layout.native_type
        self._fills_zeros = dtypes.fills_zeros(dtype)     # strings have no zeros (TensorSetZero)
        self._aggregatable = dtype in dtypes.AGGREGATABLE
        self._flushes = dtypes.flushes_subnormals(dtype)
        # source -> gradient array handle. The registry makes handles (make_gradient's
        # ``register``); the forward array keeps its gradient arrays alive, as TF's
        # per-step container does, and names them to whoever asks (``grads``).
        self._grads = {}
        self._accepted_shape = None                 # a value shape known to need no element-shape work
        self._forked = None                         # why a forked child cannot use it: after_fork

    # -- the public face (read-only) -----------------------------------------------------------
    size = property(attrgetter("_size"), doc="The number of slots.")
    element_shape = property(attrgetter("_element_shape"), doc="The element shape known so far (shapes.py).")
    dynamic_size = property(attrgetter("_dynamic_size"), doc="Whether writes past the end grow the array.")
    marked_size = property(attrgetter("_marked_size"), doc="The slot count of the last Split (-1: none).")
    closed = property(attrgetter("_closed"), doc="Whether TensorArrayCloseV3 ran.")

    @property
    def nbytes(self):
        """Device bytes held by the element values."""
        return self._layout.nbytes

    @property
    def grads(self):
        """source -> handle of this array's gradient arrays (read-only mapping)."""
        return MappingProxyType(self._grads)

    def slot_state(self, index):
        """Slot ``index`` (0 <= index < size) as a SlotState: for tests and debugging."""
        with self._lock, self._on_device:
            if self._attention:
                self._attend()
            flags = self._flags[index]
            shape = self._layout.slot_shape(index) if flags & WRITTEN else None
            value = self._layout.row(index) if flags & VALUE else None
            return SlotState(bool(flags & WRITTEN), bool(flags & READ), bool(flags & CLEARED),
                             bool(flags & VALUE), shape, value)

    # -- every op's prologue ---------------------------------------------------------------------
    # Each op runs ``with self._lock, self._on_device:``, then ``if self._attention:
    # self._attend()``. One flag answers "closed, or a stack's read marks wait?", so the
    # common case costs one attribute check and no call. Never ``acquire()`` then ``try:``: CPython delivers a pending
    # KeyboardInterrupt or asynchronous exception when ``acquire()`` returns, outside the
    # ``try``, and the lock would stay held; a ``with`` block's exit runs whatever comes.
    def _attend(self, check_closed=True):
        """Settle a stack's pending read marks; fail if the array is closed (where
        TensorFlow checks that first: ``check_closed``). Runs under the lock."""
        if self._forked:
            raise AbortedError(f"TensorArray {self.name} {self._forked}")
        if self._unmarked_reads:
            view = flag_view(self._flags)
            # Plain assignments, no call: an interrupt cannot land between them.
            view[:self._unmarked_reads] = FLAG_BYTES[_CLEARED_AFTER_READ if self.clear_after_read else _READ_VALUE]
            self._unmarked_reads = 0
            self._attention = self._closed
            del view
        if check_closed and self._closed:
            raise messages.closed(self)

    def after_fork(self):
        """In a child process (os.register_at_fork, registry.py): a fresh lock. If another
        thread held the old one, its op stopped wherever it was when the process forked
        (that thread does not exist here): every later op fails with AbortedError, as
        it does where the child cannot reach the array's memory (a GPU's)."""
        if self._lock.locked():
            self._forked = messages.FORKED_MID_OP
        elif self.backend.unusable_after_fork:
            self._forked = f"cannot be used in this process: {self.backend.unusable_after_fork}"
        if self._forked:
            self._attention = True
        self._lock = self.backend.array_lock()
        self._on_device = self.backend.array_device()
        self._hold = self._layout.hold = self.backend.array_hold(self._on_device)

    # -- checks shared by several ops (texts: messages.py) ---------------------------------------
    def _in_own_dtype(self, value):
        """``value`` in the array's dtype: itself, or a copy in this machine's byte order where only
        that differs (TensorFlow converts such a value); else the op's dtype error."""
        if value.dtype != self.dtype:
            native = value.dtype.newbyteorder("=")
            if native != self.dtype:
                raise messages.written_dtype(self, native)
            try:
                return self.backend.contiguous(value, self.dtype)
            except ResourceExhaustedError as error:
                raise messages.out_of_memory(self, error) from None
        return value

    def check_requested_dtype(self, dtype):
        if dtype != self.dtype:
            raise messages.requested_dtype(self, dtype)

    # -- single-slot rules shared by Write, Scatter and Split ----------------------------------
    def _checked_element_shape(self, index, shape, element_shape):
        """docs/semantics.md §1.4: the value must be compatible with the element shape; in identical
        mode a not fully defined element shape becomes the value's shape."""
        if not is_compatible(element_shape, shape):
            raise messages.incompatible_shape(self, index, shape, element_shape)
        if self.identical_element_shapes and not is_fully_defined(element_shape):
            return shape
        return element_shape

    def _check_slot(self, index, shape, flags, slot_shape):
        """docs/semantics.md §2.2 steps 8-10 and §4 for a slot that has flags set."""
        if flags & READ:
            raise messages.already_read(self, index)
        if flags & WRITTEN:
            if not self._aggregate:
                raise messages.already_written(self, index)
            if slot_shape != shape:
                raise messages.aggregate_shape(self, index, slot_shape, shape)
            if flags & VALUE and not self._aggregatable and element_count(shape):
                raise messages.not_aggregatable(self)

    def _converted(self, value):
        """A caller's value as a backend array; a conversion error names this array."""
        try:
            return self._layout.convert(value)
        except InvalidArgumentError as error:
            raise messages.converted(self, error) from None
        except ResourceExhaustedError as error:     # a device copy of the value (a GPU)
            raise messages.out_of_memory(self, error) from None

    def _value(self, value):
        return self._in_own_dtype(self._converted(value))

    # -- TensorArrayWriteV3 --------------------------------------------------------------------
    def write(self, index, value):
        """docs/semantics.md §2.2 steps 3-11 (the index is a host int). Growth happens
        only if the write succeeds."""
        if type(value) is not self._native_type:
            value = self._converted(value)
        if value.dtype is not self.dtype:                                     # 3
            value = self._in_own_dtype(value)
        shape = value.shape
        with self._lock, self._on_device:
            if self._attention:                                               # 4
                self._attend()
            size = self._size
            if 0 <= index < size:
                flags = self._flags[index]
            elif index < 0 or not self._dynamic_size:                         # 5
                raise messages.write_bounds(self, index, size)
            else:
                flags = 0
            layout = self._layout
            if not flags and shape == self._accepted_shape and index < layout.capacity and index < len(self._flags):
                # The common case: a first write of a shape the slab holds, to a row it has.
                # Plain assignments, no call: an interrupt lands before them or after them.
                layout.slab[index] = value
                if index >= size:
                    self._size = index + 1
                self._flags[index] = _STORED
                self._written_count += 1
                return
            element_shape = self._element_shape
            if shape != self._accepted_shape:                                 # 7
                element_shape = self._checked_element_shape(index, shape, element_shape)
            if flags:                                                         # 8-10
                self._check_slot(index, shape, flags, self._layout.slot_shape(index))
            self._store(index, value, flags, element_shape)                   # 6, 10-11

    def _store(self, index, value, flags, element_shape):
        """Store or aggregate one checked value, growing a dynamic array to hold it."""
        size = max(index + 1, self._size)
        live = self._layout
        adds = flags & VALUE and self._aggregate
        try:
            if adds:
                layout = live
                change = layout.prepare_add_rows(index_vector([index]), value.reshape((1,) + value.shape), size)
            else:
                layout = self._layout_for(value.shape)
                change = layout.prepare_store(index, layout.prepared(value))
            room = (size, value.shape, not self._dynamic_size, 0 if adds else element_count(value.shape))
            grown = self._flags_for(size, layout, *room)
            undo = layout.undo_point((index,), _KEEP if adds else _ZEROS) if layout is live else _nothing
            layout.reserve(*room)
        except ResourceExhaustedError as error:
            raise messages.out_of_memory(self, error) from None
        # Everything is allocated: from here on nothing fails. An interrupt while element
        # memory changes undoes the change; the bookkeeping after it is plain assignments.
        try:
            change()
        except BaseException:
            undo()
            raise
        self._layout = layout
        self._flags = grown
        self._size = size
        grown[index] = flags | _STORED
        self._written_count += not flags & WRITTEN
        self._soft_count -= flags & (WRITTEN | VALUE) == WRITTEN
        self._element_shape = element_shape
        self._accepted_shape = value.shape

    # -- allocation first, then the commit --------------------------------------------------------
    # An op that changes the array checks, then allocates everything it needs (a widened
    # layout, grown flags, an undo point, the layout's growth), then commits: first the
    # calls that change element memory, inside ``try``, whose ``except BaseException`` undoes
    # them (an interrupt: KeyboardInterrupt, an asynchronous exception); then the flags,
    # counters, size and layout as plain assignments, with no call between them, where
    # CPython delivers no interrupt. So an interrupt leaves the array as before or as after.
    def _layout_for(self, *shapes):
        """The layout, or a new, widened one (uniform to ragged, for the commit to put in
        place) the first time it cannot hold ``shapes``."""
        if self._layout.accepts(*shapes):
            return self._layout
        view = flag_view(self._flags)
        written = (view & WRITTEN).nonzero()[0].tolist()
        valued = (view & VALUE).nonzero()[0].tolist()
        del view
        self._hold(self._layout)            # the commit drops it: the copy out of it may be pending
        return self._layout.widened(written, valued)

    def _flags_for(self, size, layout, *reserve):
        """The flag buffer for ``size`` slots: this one while it has room, else a new one
        twice as long or ``_FIRST_FLAGS`` long (growth one slot at a time stays amortised
        O(1)) holding these flags, for the commit to put in place.
        ``layout.reserve(*reserve)`` comes next: a growth it would refuse is refused first,
        before the flags are made. The flags never outgrow an int32 size, so a write within
        them cannot either."""
        if size > INT32_MAX:
            raise messages.too_many_slots(self, size)
        flags = self._flags
        if size <= len(flags):
            return flags
        layout.check_reserve(*reserve)
        capacity = min(max(size, 2 * len(flags), _FIRST_FLAGS), INT32_MAX)
        grown = self.backend.allocate(lambda: bytearray(capacity), capacity,
                                      lambda: f"the flags of TensorArray {self.name} grown to {size} slots", host=True)
        grown[:len(flags)] = flags
        return grown

    # -- TensorArrayReadV3 ---------------------------------------------------------------------
    def read(self, index, dtype):
        """docs/semantics.md §2.3 steps 3-9 (the index is a host int)."""
        if dtype is not self.dtype:                                            # 3
            self.check_requested_dtype(dtype)
        with self._lock, self._on_device:
            if self._attention:                                               # 4
                self._attend()
            size = self._size
            if 0 <= index < size:
                flags = self._flags[index]
                if flags & _READABLE == _STORED:
                    # The common case: a stored value (taken first: a string's is a copy),
                    # then the marks, plain assignments.
                    value = self._layout.row(index)
                    self._unread = False
                    if self.clear_after_read:
                        self._flags[index] = _CLEARED_AFTER_READ
                        self._cleared_count += 1
                    else:
                        self._flags[index] = flags | READ
                    return value
            elif index < 0 or not self.is_grad:                               # 5
                raise messages.read_bounds(self, index, size)
            return self._read_slot(index)                                    # 6-9

    def _read_slot(self, index):
        """A read that makes soft zeros, grows a gradient array or fails as cleared: a
        gather of one slot (apart from ``read``, so that its closure costs ``read`` nothing)."""
        self._check_growth(range(index, index + 1), self._element_shape)
        plan = self._plan_reads((index,), self._element_shape)
        shape = plan[0][0]
        return self._commit_reads((index,), plan, lambda layout: layout.prepare_row(index, shape))

    def _check_zeros(self, shape):
        """Zeros of ``shape`` for a slot without a value: none for strings, unless empty."""
        if not self._fills_zeros and element_count(shape):
            raise messages.no_zeros(self)

    def _zero_shape(self, index, element_shape):
        if not is_fully_defined(element_shape):
            raise messages.zeros_shape_unknown(self, index, element_shape)
        return element_shape

    # -- reads of many slots: Gather and Concat ------------------------------------------------
    def _plan_reads(self, indices, element_shape):
        """Check reads of ``indices`` in order exactly as sequential ReadV3s would,
        changing nothing. Returns (shape of each read, slots that become soft, the size
        after a gradient array's reads past its end, the shape of the slots it grows by,
        the element count of the zeros that the reads make values)."""
        size = new_size = self._size
        soft, grow_shape, elements = {}, None, 0
        after = {}                     # slot -> flags once this batch's earlier reads ran
        shapes = []
        for index in indices:
            if index < 0 or (index >= size and not self.is_grad):
                raise messages.read_bounds(self, index, new_size)
            if index in after:
                flags = after[index]
            elif index < size:
                flags = self._flags[index]
            else:
                flags = WRITTEN if index < new_size else 0
            if not flags & WRITTEN:
                shape = self._zero_shape(index, element_shape)
                if index >= size:
                    new_size, grow_shape = index + 1, shape
                else:
                    soft[index] = shape
                flags = WRITTEN
            elif flags & CLEARED:
                raise messages.cleared(self, index)
            if index >= size:
                shape = grow_shape
            else:
                shape = soft[index] if index in soft else self._layout.slot_shape(index)
            shapes.append(shape)
            if not flags & VALUE:
                if not self._fills_zeros:
                    self._check_zeros(shape)
                elements += element_count(shape)
            after[index] = flags | READ | VALUE | (CLEARED if self.clear_after_read else 0)
        by_shape = {}
        for index, shape in soft.items():
            by_shape.setdefault(shape, []).append(index)
        return shapes, list(by_shape.items()), new_size, grow_shape, elements

    def _plan_reads_vector(self, indices, element_shape):
        """``_plan_reads`` of a host int64 vector with vector operations, for a uniform
        layout (every written slot has one shape), of a dtype with zeros (strings' soft
        slots need the loop's per-slot check). It holds a few bytes per index where
        the loop holds a dict entry, so a gradient array's gather far past its end stays
        near the memory it admits. Returns (the plan, the first read's shape, None or
        (position, shape) of the first read of another shape)."""
        size, count = self._size, len(indices)
        inside, flags = flags_at(self._flags, size, indices)
        repeated = repeats(indices)
        first = ~repeated
        written = inside & ((flags & WRITTEN) != 0)
        zeros = first & ~written                     # unwritten slots and slots past the end
        out_of_bounds = (indices < 0) if self.is_grad else ~inside
        failures = [out_of_bounds, first & written & ((flags & CLEARED) != 0)]
        if self.clear_after_read:
            failures.append(repeated)
        if not is_fully_defined(element_shape):
            failures.append(zeros)
        failing = [first_true(mask) for mask in failures]
        position = min(failing)
        if position < count:
            index = int(indices[position])
            if failing[0] == position:
                grown = int(indices[:position].max()) + 1 if position else 0
                raise messages.read_bounds(self, index, max(size, grown))
            if zeros[position]:
                self._zero_shape(index, element_shape)
            raise messages.cleared(self, index)
        row_shape = self._layout.common_shape
        new_size = max(size, int(indices.max()) + 1)
        grow_shape = element_shape if new_size > size else None
        soft_slots = indices[zeros & inside]
        soft = [(element_shape, soft_slots)] if len(soft_slots) else []
        elements = int(zeros.sum()) * element_count(element_shape or ())
        if row_shape is not None:
            elements += int((first & written & ((flags & VALUE) == 0)).sum()) * element_count(row_shape)
        first_shape = row_shape if written[0] else element_shape
        other = None
        if row_shape != element_shape:
            differs = written != written[0]
            position = first_true(differs)
            if position < count:
                other = (position, element_shape if written[0] else row_shape)
        return (None, soft, new_size, grow_shape, elements), first_shape, other

    def _check_growth(self, indices, element_shape):
        """A gradient array's reads past its end grow it: refuse at once when the
        grown array could not exist (more slots than an int32 counts: whatever the memory)
        or its slab could not be allocated, before checking slot by slot."""
        last = (indices.stop - 1) if type(indices) is range else int(indices.max())
        if self.is_grad and last >= INT32_MAX:
            raise messages.too_many_slots(self, last + 1)
        if self.is_grad and last >= self._size and is_fully_defined(element_shape):
            self._layout.check_allocation((last + 1) * (element_count(element_shape) * self.dtype.itemsize + 1),
                                          lambda: f"TensorArray {self.name} grown to {last + 1} slots")

    def _commit_reads(self, indices, plan, prepare_result, element_shape=None):
        """Reads of ``indices`` as ``plan`` (``_plan_reads``) says. First every allocation:
        a widened layout, grown flags, the result (``prepare_result(layout)`` -> a function
        that makes it), an undo point and last the room for soft zeros and growth; then
        soft slots become zeros and the result is made (a failure undoes the zeros), and
        last the reads are marked and the element shape becomes ``element_shape`` (None: as
        it is). Returns the result."""
        _, soft, new_size, grow_shape, elements = plan
        first = self._size
        changes = soft or new_size > first      # else nothing becomes soft or grows (a stack's common case)
        exact = not (self._dynamic_size or self.is_grad)
        live = self._layout
        try:
            if changes:
                shapes = {shape for shape, _ in soft} | ({grow_shape} if new_size > first else set())
                room = (new_size, next(iter(shapes)), exact, elements)
                layout = self._layout_for(*shapes)
                flags = self._flags_for(new_size, layout, *room)
                soft_slots = soft[0][1] if len(soft) == 1 else \
                    index_vector([slot for _, slots in soft for slot in _listed(slots)])
                made_count = new_size - first + len(soft_slots)
            else:
                room, layout, flags = (new_size, None, exact, elements), live, self._flags
            result = prepare_result(layout)
            if changes or elements or new_size > layout.capacity or layout.common_shape is None:
                undo = layout.undo_point(indices, None) if layout is live else _nothing
                layout.reserve(*room)
            else:       # every slot read holds a value in the slab (a stack's common case): nothing to undo
                undo = None
        except ResourceExhaustedError as error:
            raise messages.out_of_memory(self, error) from None
        # Everything the op allocates is allocated (see "the commit" above). A stack's
        # O(size) flag update waits for the next op (_attend), so stacking an array that
        # is then dropped or closed costs O(1).
        stack = type(indices) is range and indices.start == 0 and len(indices) == new_size
        count = len(indices)
        selected = None if stack else _selector(indices)
        mark = _CLEARED_AFTER_READ if self.clear_after_read else _READ_VALUE
        if element_shape is None:
            element_shape = self._element_shape
        accepted = self._accepted_shape if element_shape == self._element_shape and layout is live else None
        view = flag_view(flags) if changes or not stack else None     # (a stack's marks wait: _attend)
        try:
            if undo is not None:
                if new_size > first:
                    layout.set_shapes(range(first, new_size), grow_shape)
                for shape, slots in soft:
                    layout.set_shapes(slots, shape)
                layout.materialize(indices)
            # The result before the marks: a device may still find no memory for what its
            # copy needs besides the result (a join of many small pieces uploads a table of
            # their addresses), and that failure, as an interrupt, leaves the array as it was.
            value = result()
        except BaseException as error:
            if undo is not None:
                undo()
            if isinstance(error, ResourceExhaustedError):
                raise messages.out_of_memory(self, error) from None
            raise
        self._unread = False
        if changes:
            self._layout = layout
            self._flags = flags
            self._size = new_size
            view[first:new_size] = FLAG_BYTES[WRITTEN]
            view[soft_slots] = FLAG_BYTES[WRITTEN]
            self._written_count += made_count
        if self.clear_after_read:
            self._cleared_count += count         # distinct and uncleared: the plan checked
        if stack:
            self._unmarked_reads = new_size
            self._attention = True
        else:
            view[selected] = FLAG_BYTES[mark]
        self._element_shape = element_shape
        self._accepted_shape = accepted
        del view
        return value

    def _readable_fast(self, indices, bounds):
        """Whether a gather of ``indices`` (a layout whose slots share one shape) needs
        no per-slot work: every slot in range, written, not cleared, and (clearing
        arrays) no slot twice. ``bounds``: as ``gather`` has them."""
        if type(indices) is range:
            if indices.stop > self._size:
                return False
        else:
            low, high = bounds or (indices.min(), indices.max())
            if low < 0 or high >= self._size or (self.clear_after_read and has_duplicates(indices)):
                return False
        if self._written_count == self._size and self._cleared_count == 0:
            return True                     # every slot written, none cleared: counters answer in O(1)
        if type(indices) is range and len(indices) == self._size:
            return False                    # the whole array (stack), and some slot is not readable
        flags = flag_view(self._flags)[_selector(indices)]
        return bool(((flags & (WRITTEN | CLEARED)) == WRITTEN).all())

    # -- TensorArrayGatherV3 -------------------------------------------------------------------
    def gather(self, indices, dtype, element_shape, bounds=None):
        """docs/semantics.md §2.4 steps 2-9; ``indices`` is a host int64 array of any rank, or a range
        (host.host_indices), which makes a gather of consecutive slots a view; ``bounds``: the
        array's (smallest, largest) when the caller knows them (host.host_ints_bounded)."""
        if dtype is not self.dtype:                                            # 2
            self.check_requested_dtype(dtype)
        with self._lock, self._on_device:
            if self._attention:
                self._attend(check_closed=False)
            merged = self._element_shape if element_shape is None else \
                merge(self._element_shape, element_shape, self)                # 3
            if type(indices) is not range and indices.ndim != 1:              # 4
                raise messages.indices_not_vector(self, indices.shape)
            if len(indices) == 0:                                             # 5
                if not is_fully_defined(element_shape):
                    raise messages.empty_gather_shape(self, element_shape)
                value = self._layout.zeros((0,) + element_shape)
                self._set_element_shape(merged)
                return value
            if self._closed:                                                   # 6
                raise messages.closed(self)
            row_shape = self._layout.common_shape
            if len(indices) > _FAST_BATCH and row_shape is not None and self._readable_fast(indices, bounds):
                plan, first_shape, other = (None, [], self._size, None, 0), row_shape, None
            else:
                self._check_growth(indices, merged)
                if type(indices) is not range and len(indices) > _FAST_BATCH and self._fills_zeros and \
                        (row_shape is not None or not self._written_count):
                    plan, first_shape, other = self.backend.allocate(
                        lambda: self._plan_reads_vector(indices, merged), _VECTOR_PLAN_BYTES * len(indices),
                        lambda: f"the plan of a gather of {len(indices)} slots from TensorArray {self.name}",
                        host=True)
                else:
                    # A range stays lazy: a bad index fails before a huge range is listed.
                    plan = self._plan_reads(indices if type(indices) is range else indices.tolist(), merged)
                    first_shape = plan[0][0]
                    other = next(((position, shape) for position, shape in enumerate(plan[0])
                                  if shape != first_shape), None)
            if not is_compatible(element_shape, first_shape):                 # 7
                raise messages.gather_shape(self, element_shape, first_shape)
            nonempty = element_count(first_shape)
            if other is not None and nonempty:                                # 8 (TF skips it when
                raise messages.gather_inconsistent(self, first_shape, *other)  # value 0 is empty)
            if nonempty:                                                      # 9: a range: a view
                prepare = lambda layout: layout.prepare_take(indices, first_shape)    # noqa: E731
            else:
                prepare = lambda layout: self._zeros_result((len(indices),) + first_shape)    # noqa: E731
            return self._commit_reads(indices, plan, prepare, merged)

    def _zeros_result(self, shape):
        zeros = self._layout.zeros(shape)
        return lambda: zeros

    def _set_element_shape(self, element_shape):
        if element_shape != self._element_shape:
            self._element_shape = element_shape
            self._accepted_shape = None

    # -- TensorArrayConcatV3 -------------------------------------------------------------------
    def concat(self, dtype, element_shape_except0):
        """docs/semantics.md §2.7 steps 2-9. Returns (value, lengths as a host int64 vector)."""
        self.check_requested_dtype(dtype)                                      # 2
        with self._lock, self._on_device:
            if self._attention:                                               # 3
                self._attend()
            count = self._marked_size if self.is_grad else self._size          # 4
            if count == 0:                                                    # 5
                if not is_fully_defined(element_shape_except0):
                    raise messages.empty_concat_shape(self, element_shape_except0)
                return self._layout.zeros((0,) + element_shape_except0), index_vector(())
            if count < 0:                                                     # 6: TF crashes here (§6.2)
                raise messages.concat_unmarked(self)
            plan = self._plan_reads(range(count), self._element_shape)       # 7
            shapes = plan[0]
            first = shapes[0]
            for index, shape in enumerate(shapes):                            # 8
                if len(shape) == 0:
                    raise messages.concat_scalar(self, index)
                if index == 0:
                    if not is_compatible(element_shape_except0, shape[1:]):
                        raise messages.concat_shape(self, element_shape_except0, shape)
                elif shape[1:] != first[1:]:
                    raise messages.concat_inconsistent(self, first, index, shape)
            lengths = index_vector([shape[0] for shape in shapes])           # before the reads are marked
            value = self._commit_reads(range(count), plan, lambda layout: layout.prepare_concat(shapes))  # 9
            return value, lengths

    # -- writes of many slots: Scatter and Split -----------------------------------------------
    def _plan_writes(self, indices, shapes):
        """Check writes in order exactly as sequential single-slot writes would,
        changing nothing. Returns the element shape after them."""
        element_shape = self._element_shape
        size = self._size
        after = {}                  # slot -> (flags, shape) once this batch's earlier writes ran
        for index, shape in zip(indices, shapes):
            if index < 0 or (index >= size and not self._dynamic_size):
                raise messages.write_bounds(self, index, size)
            size = max(size, index + 1)
            element_shape = self._checked_element_shape(index, shape, element_shape)
            if index in after:
                flags, slot_shape = after[index]
            elif index < self._size:
                flags, slot_shape = self._flags[index], self._layout.slot_shape(index)
            else:
                flags, slot_shape = 0, None
            if flags:
                self._check_slot(index, shape, flags, slot_shape)
            after[index] = (flags | _STORED, shape)
        return element_shape

    def _writable_fast(self, indices, shape, low, high):
        """(element shape after writing rows of ``shape``, which the slab accepts, to
        ``indices``, whose smallest and largest are ``low`` and ``high``; the flags of
        ``indices`` when all are in range, else None), or (_UNSURE, None) when some slot
        may fail: then the slot-by-slot plan finds the first failure, and its message."""
        if low < 0 or (not self._dynamic_size and high >= self._size):
            return _UNSURE, None
        element_shape = self._checked_element_shape(int(indices[0]), shape, self._element_shape)
        if self._aggregate and self._aggregatable and self._unread:
            return element_shape, None      # no slot read, and values add: no flag can fail
        if not self._written_count and not self._aggregate:
            # No slot written, so none has a flag (a fresh array's unstack): only a repeat fails.
            return (_UNSURE, None) if has_duplicates(indices) else (element_shape, None)
        view = flag_view(self._flags)
        in_range = high < self._size
        flags = view[indices] if in_range else view[indices[indices < self._size]]
        if self._aggregate:    # (slot shapes match: the slab accepts ``shape``)
            if not self._unread and (flags & READ).any():
                return _UNSURE, None
            if not self._aggregatable and ((flags & VALUE).any() or has_duplicates(indices)):
                return _UNSURE, None
        elif flags.any() or has_duplicates(indices):
            return _UNSURE, None
        return element_shape, flags if in_range else None

    def _write_rows(self, indices, rows, min_index, max_index, marked_size=None):
        """Write ``rows[k]`` to slot ``indices[k]`` for every k, in order. ``rows`` is
        an array (same-shaped rows) or a list of arrays (a split of unequal lengths);
        ``min_index`` and ``max_index`` bound the indices, which the caller already knows.
        ``marked_size``: Split's, set with the rest (None: as it is)."""
        if marked_size is None:
            marked_size = self._marked_size
        if len(indices) == 0:
            self._marked_size = marked_size
            return
        same_shape = not isinstance(rows, list)
        row_shape = rows.shape[1:] if same_shape else None
        # Same-shaped rows that fit the slab go in with vector operations; anything else
        # (a ragged layout, a split of unequal lengths) slot by slot.
        vectorised = same_shape and self._layout.takes_rows(row_shape)
        element_shape, flags = _UNSURE, None
        if vectorised and len(indices) > _FAST_BATCH:
            element_shape, flags = self._writable_fast(indices, row_shape, min_index, max_index)
        if element_shape is _UNSURE:
            shapes = [row_shape] * len(indices) if same_shape else [row.shape for row in rows]
            element_shape = self._plan_writes(indices.tolist(), shapes)
        new_size = max(self._size, max_index + 1)
        live = self._layout
        try:
            if vectorised:
                layout, elements = live, 0
                written, filled, change, mark, adds = self._prepare_store_rows(indices, rows, new_size, flags)
            else:
                layout, written, filled, change, elements, adds = self._prepare_stores(indices, rows, new_size)
                mark = None
            room = (new_size, row_shape if same_shape else rows[0].shape, not self._dynamic_size, elements)
            grown = self._flags_for(new_size, layout, *room)
            undo = layout.undo_point(indices, _KEEP if adds else _ZEROS) if layout is live else _nothing
            layout.reserve(*room)
        except ResourceExhaustedError as error:
            raise messages.out_of_memory(self, error) from None
        # Everything is allocated: from here on nothing fails (see "the commit" above).
        view = flag_view(grown)
        marks = view[indices] | _STORED if mark is None else FLAG_BYTES[mark]    # (allocated before any change)
        try:
            change()
        except BaseException:
            undo()
            raise
        self._layout = layout
        self._flags = grown
        self._size = new_size
        self._element_shape = element_shape
        self._accepted_shape = None
        self._marked_size = marked_size
        self._written_count += written
        self._soft_count -= filled
        view[indices] = marks
        del view

    def _prepare_store_rows(self, indices, rows, new_size, targets=None):
        """(slots written for the first time, soft slots given a value, ``change()``, the
        flag every slot gets (None: each keeps its own and gets _STORED), whether rows add
        to values) for rows that the layout takes in one operation, allocating what the
        change needs. ``targets``: the flags of ``indices`` when the caller has them
        (``_writable_fast``)."""
        filled = 0                                 # soft slots (written, no value) getting one
        if not self._aggregate:
            written = len(indices)                 # distinct and unwritten: the checks said so
            return written, 0, self._layout.prepare_store_rows(indices, rows), _STORED, False
        if self._unread and self._soft_count == self._written_count == self._size == new_size:
            # Every slot soft, none with a value (a fresh gradient array's): no flags to read.
            valueless, written, filled, adds = slice(None), 0, count_distinct(indices), False
        else:
            if targets is None:
                targets = flag_view(self._flags)[indices]
            valueless = (targets & VALUE) == 0
            written = 0
            if valueless.any():                    # (a slot without WRITTEN has no VALUE either)
                written, filled = self._new_values(indices[valueless], targets[valueless])
            adds = not valueless.all()
        if not self._aggregatable or (not adds and written + filled == len(indices)):
            # First arrivals only (every slot without a value, none twice), which TF stores
            # as they are; a dtype that cannot add has no others.
            return written, filled, self._layout.prepare_store_rows(indices, rows), None, adds
        # TF stores a slot's first arrival and adds later ones. Slots without a value
        # start from the identity that keeps every bit of what is added to it (-0.0:
        # +0.0 would turn a stored -0.0 into +0.0), so one in-order scatter-add does both.
        # But an add flushes subnormals, as TF's CPU kernels do: where a slot's first arrival
        # is added to, TF's next add flushes it too; a lone arrival is put back, every bit.
        empty = distinct(indices[valueless])        # once each: put_rows' threads write distinct rows
        identity = dtypes.exact_identity(self.dtype)
        fill = self._layout.prepare_fill(empty, identity, rows.shape[1:]) if len(empty) else None
        add = self._layout.prepare_add_rows(indices, rows, new_size)
        lone = lone_arrivals(indices, None if type(valueless) is slice else valueless) if self._flushes else ()
        put = None
        if len(lone):
            put = self._layout.prepare_store_rows(
                indices[lone], self.backend.prepare_take_rows(lone, rows.shape[1:], self.dtype)(rows))

        def change():
            if fill is not None:
                fill()
            add()
            if put is not None:
                put()
        return written, filled, change, None, adds

    def _prepare_stores(self, indices, rows, new_size):
        """(layout, slots written for the first time, soft slots given a value,
        ``change()``, element count to reserve, whether rows add to values) for rows
        stored or added one slot at a time, in order."""
        indices = indices.tolist()
        layout = self._layout_for(*{row.shape for row in rows})
        steps, after, written, filled, elements, adds = [], {}, 0, 0, 0, False
        for index, row in zip(indices, rows):
            flags = after.get(index)
            if flags is None:
                flags = self._flags[index] if index < self._size else 0
            if flags & VALUE and self._aggregate:
                steps.append(layout.prepare_add_rows(index_vector([index]), row.reshape((1,) + row.shape), new_size))
                adds = True
            else:
                row = layout.prepared(row)
                elements += element_count(row.shape)
                steps.append(layout.prepare_store(index, row))
            written += not flags & WRITTEN
            filled += flags & (WRITTEN | VALUE) == WRITTEN
            after[index] = flags | _STORED

        def change():
            for step in steps:
                step()
        return layout, written, filled, change, elements, adds

    def _new_values(self, indices, targets):
        """(slots first written, soft slots filled) among ``indices`` (flags ``targets``,
        none with VALUE; repeats allowed)."""
        new = count_distinct(indices[(targets & WRITTEN) == 0])
        return new, count_distinct(indices) - new

    # -- TensorArrayScatterV3 ------------------------------------------------------------------
    def scatter(self, indices, value, bounds=None):
        """docs/semantics.md §2.5 steps 3-10; ``indices`` is a host int64 array of any rank; ``bounds``: its
        (smallest, largest) when the caller knows them (host.host_ints_bounded)."""
        if type(value) is not self._native_type:
            value = self._converted(value)
        if value.dtype is not self.dtype:                                     # 3
            value = self._in_own_dtype(value)
        if value.ndim == 0:                                                   # 4
            raise messages.unpack_scalar(self, value.shape)
        with self._lock, self._on_device:
            if self._attention:                                               # 5
                self._attend()
            if indices.ndim != 1:                                             # 6
                raise messages.indices_not_vector(self, indices.shape)
            if len(indices) != value.shape[0]:                                # 7
                raise messages.scatter_count(self, len(indices), value.shape[0])
            if not len(indices):
                return
            min_index, max_index = bounds or (int(indices.min()), int(indices.max()))    # 8-9
            size = max(self._size, max_index + 1) if self._dynamic_size else self._size
            if max_index >= size:
                raise messages.scatter_bounds(self, max_index, size)
            if self._aggregate and self._unread and min_index >= 0 and max_index < self._size \
                    and self._add_valued(indices, value, self._written_count != size or self._soft_count):
                return
            self._write_rows(indices, value, min_index, max_index)            # 10

    def _add_valued(self, indices, value, check_flags):
        """Scatter's step 10 where every slot in ``indices`` (within size) holds a value and
        none was read: each row adds to its slot, and no other check can fail. ``check_flags``:
        whether that is still to be checked (else it is known: every slot holds one, O(1)); the
        add then checks each slot's flag as it reads the indices (unread slots have no READ or
        CLEARED flag). -> whether the rows were added; if not, nothing changed. Under the lock."""
        row_shape = value.shape[1:]
        if row_shape != self._layout.common_shape or not self._aggregatable or self._written_count == self._soft_count \
                or (row_shape != self._accepted_shape and not is_compatible(self._element_shape, row_shape)):
            return False        # a layout whose slots share one shape adds batches of rows; no slot has a value
        element_shape = self._element_shape
        if row_shape != self._accepted_shape:
            element_shape = self._checked_element_shape(int(indices[0]), row_shape, element_shape)
        # Only a changing element shape makes the add one of two changes; the accepted
        # shape is a cache, which an interrupt may leave unset.
        accepted = element_shape == self._element_shape
        if not accepted:
            # The element shape changes too, so the add gets an undo point: the guard's
            # check first, on the host (the point copies the slots it names).
            if check_flags and not flags_all_equal(self._flags, indices, _STORED):
                return False
            check_flags = False
        try:
            # A guard is checked before anything is allocated: running out of memory here
            # is the op's error, every check having passed.
            guard = (self._flags, _STORED) if check_flags else None
            add = self._layout.prepare_add_rows(indices, value, self._size, guard)
            undo = None if accepted else self._layout.undo_point(indices, _KEEP)
        except ResourceExhaustedError as error:
            raise messages.out_of_memory(self, error) from None
        if accepted:
            # The add is the op's one change, made in one step (the compiled loop; NumPy's
            # computes aside and assigns at its end): an interrupt lands before it or after it.
            if add() is False:
                return False
            self._accepted_shape = row_shape
            return True
        try:
            added = add()
        except BaseException:
            undo()
            raise
        if added is False:
            return False
        self._element_shape = element_shape
        self._accepted_shape = row_shape
        return True

    def try_add(self, indices, value):
        """TensorArrayScatterV3 into a gradient array in its common case, without the
        argument checks: ``indices`` a host integer vector (host.is_index_vector), ``value``
        rows of the array's own type, dtype and element shape, every slot in ``indices``
        within size and holding a value, none ever read. Then the rows add (scatter's step
        10) and the answer is True. Otherwise nothing changes and the answer is False: the
        caller runs the checked op (``scatter``), whose checks all pass whenever this adds."""
        if not self._aggregate or type(value) is not self._native_type or value.dtype is not self.dtype \
                or not value.ndim or len(value) != len(indices) or not len(indices):
            return False
        with self._lock, self._on_device:
            return not self._attention and self._unread and self._add_valued(indices, value, True)

    # -- TensorArraySplitV3 --------------------------------------------------------------------
    def split(self, value, lengths):
        """docs/semantics.md §2.6 steps 2-12; ``lengths`` is a host int64 array of any rank."""
        if lengths.ndim != 1:                                                 # 2
            raise messages.lengths_not_vector(self, lengths.shape)
        value = self._converted(value)
        if value.ndim == 0:                                                   # 4
            raise messages.split_scalar(self, value.shape)
        total = int(lengths.sum())
        if total != value.shape[0]:                                           # 5
            raise messages.split_total(self, total, value.shape)
        with self._lock, self._on_device:
            if self._attention:                                               # 6
                self._attend()
            count = len(lengths)                                              # 8
            size = max(self._size, count) if self._dynamic_size else self._size
            if size != count:
                raise messages.split_count(self, size, count)
            value = self._in_own_dtype(value)                                 # 9
            if count and lengths.min() < 0:                                   # 7: TF aborts the process (§6.2)
                position = int((lengths < 0).nonzero()[0][0])
                raise messages.split_negative(self, position, int(lengths[position]))
            rest = tuple(value.shape[1:])
            if count and (lengths == lengths[0]).all():                       # 10
                pieces = value.reshape((count, int(lengths[0])) + rest)
            else:
                bounds = [0] + lengths.cumsum().tolist()
                pieces = [value[bounds[i]:bounds[i + 1]] for i in range(count)]
            self._write_rows(index_vector(range(count)), pieces, 0, count - 1,  # 12
                             None if self.is_grad else count)                   # 11

    # -- TensorArraySizeV3, TensorArrayCloseV3 -------------------------------------------------
    def current_size(self):
        with self._lock, self._on_device:
            if self._attention:
                self._attend()
            return self._size

    def close(self):
        """Drop every slot's storage and the handles of this array's gradient arrays (no
        op can reach them through a closed array: they live on only while their own
        handles do); closing twice is fine."""
        empty, flags = new_layout(self.backend, self.dtype, self.name, self._hold), bytearray()
        with self._lock, self._on_device:
            self._hold(self._layout)        # dropped below: freed once other streams are ordered
            # Plain assignments, no call: an interrupt lands before them or after them.
            self._closed = self._attention = True
            self._layout = empty
            self._flags = flags
            self._grads = {}
            self._written_count = self._cleared_count = self._unmarked_reads = self._soft_count = 0

    # -- TensorArrayGradV3, TensorArrayGradWithShape -------------------------------------------
    def make_gradient(self, source, shape_to_prepend, register):
        """docs/semantics.md §3 steps 1-9 on this (forward) array: the handle of its gradient array for
        ``source``, made on first use with this array's size and its written slots'
        shapes prefixed by ``shape_to_prepend`` (a host int64 array; None for GradV3),
        then handed to ``register`` (storage -> handle). Locks this array's size."""
        if self.is_grad:                                                       # 1
            raise messages.grad_of_grad(self)
        with self._lock, self._on_device:
            if self._attention:                                               # 5
                self._attend()
            prepend = () if shape_to_prepend is None else self._prepend_shape(shape_to_prepend)   # 8
            handle = self._grads.get(source)                                   # 9: returned as is
            if handle is None:
                element_shape = self._element_shape
                if element_shape is not None:
                    element_shape = prepend + element_shape
                    check_element_count(element_shape, self)
                grad = ArrayStorage(self.backend, self.dtype, self._size, element_shape,
                                    dynamic_size=False, clear_after_read=True,
                                    identical_element_shapes=self.identical_element_shapes,
                                    name=f"{self.name}@{source}", is_grad=True, marked_size=self._marked_size)
                grad._copy_shapes_from(self, prepend)
                handle = register(grad)
                # Both or neither (plain assignments): an interrupt before them leaves the
                # gradient array to its handle alone, which dies with it.
                self._grads[source] = handle
            self._dynamic_size = False                                         # 4
            return handle

    def forget_gradient(self, source):
        """-> the handle of the gradient array for ``source`` (None: there is none), which
        leaves ``grads``: its gradient computation has ended (registry.end_gradient)."""
        with self._lock, self._on_device:
            return self._grads.pop(source, None)

    def _prepend_shape(self, shape):
        if shape.ndim != 1:
            raise messages.prepend_not_vector(self, shape.shape)
        for dim in shape.tolist():
            if dim < 0:
                raise messages.prepend_negative(self, dim, shape.tolist())
        prepend = tuple(shape.tolist())
        check_element_count(prepend, self)
        return prepend

    def _copy_shapes_from(self, forward, prepend):
        """TensorArrayGradV3's CopyShapesFrom: every written forward slot becomes a soft
        slot of shape prepend + its shape. Runs under the forward array's lock."""
        if forward._written_count == forward._size:         # every slot (the common case): no scan
            written = range(forward._size)
        else:
            view = flag_view(forward._flags)
            written = (view & WRITTEN).nonzero()[0]
            del view
        if prepend:     # D2: a slot's prefixed shape past int64 (TensorFlow's CHECK aborts the process)
            layout = forward._layout
            shapes = {layout.common_shape} if layout.common_shape is not None else \
                {layout.slot_shape(index) for index in _listed(written)}
            for shape in shapes:
                check_element_count(prepend + shape, forward)
        self._layout = forward._layout.shapes_for_gradient(prepend, written, self.name, self._hold)
        flag_view(self._flags)[_selector(written)] = WRITTEN
        self._written_count = self._soft_count = len(written)


_KEEP, _ZEROS = "keep", "zeros"     # Layout.undo_point: what slots' rows hold before a change


def _nothing():
    pass


def _listed(slots):
    """Slots (a range, a tuple, a list or a host int vector) as Python ints."""
    return slots.tolist() if hasattr(slots, "tolist") else slots


def _selector(indices):
    """Indexes NumPy flag views and slabs: a slice for a range (a view), else the array."""
    return slice(indices.start, indices.stop) if type(indices) is range else indices
