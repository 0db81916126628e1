"""Where an array's element values live on the device.

Two arrangements behind one interface (Layout):
- UniformLayout: every stored element has one shape, so they sit in one slab
  ``[capacity, *row_shape]``: a write is one row copy, gather one take, stack a
  view, scatter one row scatter, aggregation one scatter-add.
- RaggedLayout: elements of differing shapes in one flat buffer with per-slot
  offsets, appended in write order, so a concat of slots written in order
  (a split's pieces) is a view.
- StringLayout: TensorFlow's strings, on the host whatever the backend (TensorFlow
  keeps string tensors in host memory): each slot's value its own NumPy object
  array of bytes (strings.py), so any mix of shapes fits.
Storage takes the layout ``new_layout`` gives for its dtype: for numbers a uniform
one, which it widens to a ragged one the first time a shape does not fit. Layouts
know nothing of flags or TensorFlow's rules: storage checks first, then calls them.
Storage touches element memory only through these methods.

Allocation happens in three kinds of methods only, all through the backend's one
door (Backend.allocate): ``prepared``/``prepare_*`` (which return what a later call
needs, allocated), ``widened`` (a new layout) and ``reserve`` (growth, the last
allocation of an op). Every other method allocates nothing, so an op that made
its allocations first cannot run out of memory after changing anything.
"""

from . import strings
from .host import broadcast_rows, element_count, index_vector

__all__ = ["Layout", "UniformLayout", "RaggedLayout", "StringLayout", "new_layout"]


def new_layout(backend, dtype, owner, hold):
    """An empty layout for elements of ``dtype`` on ``backend`` (``hold``: Layout's)."""
    if dtype is strings.STRING:
        return StringLayout(backend, dtype, owner, hold)
    return UniformLayout(backend, dtype, None, owner, hold)


def _listed(slots):
    """Slots (a range, a tuple or a host int vector) as Python ints."""
    return slots.tolist() if hasattr(slots, "tolist") else slots


def _zero_rows(slab, slots):
    """``slab[slots] = 0`` by slices, one per run of consecutive slots, for an undo, which
    runs after the op allocated everything and must not allocate: a GPU uploads an index
    array and the zero (two allocations a full device refuses), where a slice's zero is a
    memset. ``slots``: a range, a tuple or a host int vector, in any order."""
    if type(slots) is range and slots.step == 1:
        slab[slots.start:slots.stop] = 0
        return
    start = stop = None
    for slot in slots:
        slot = int(slot)
        if slot != stop:
            if start is not None:
                slab[start:stop] = 0
            start = slot
        stop = slot + 1
    if start is not None:
        slab[start:stop] = 0


# A dynamic array's slab starts with room for this many bytes of rows (at least): a
# loop of small writes then regrows it a few times, not at every power of two.
FIRST_SLAB_BYTES = 16 * 1024


def _grown(capacity, needed, first=4):
    # Doubling keeps dynamic_size growth amortised O(1) per write.
    return max(needed, 2 * capacity, first)


class Layout:
    """What a layout promises storage. A slot has a shape once storage gives it one
    (``set_shapes``, ``store``) and a value once stored; a slot with a shape and no
    value is "soft": ``materialize`` gives it zeros. Values returned by reads are
    read-only where the backend allows (views of the layout's memory).

    ``hold(*buffers)`` (the array's, Backend.array_hold) gets the device memory the
    layout drops (its buffer, on growth) before it goes: another stream may still be
    reading it (backends/device_guard.py)."""

    #: Rows a slab has (UniformLayout's; none here).
    capacity = 0
    slab = None

    def __init__(self, backend, dtype, owner, hold):
        self.backend = backend
        self.dtype = dtype
        self.owner = owner              # the array's name, for out-of-memory messages
        self.hold = hold
        # Values of this type need no ``convert`` (None: every value does).
        self.native_type = backend.native_type

    # -- questions --------------------------------------------------------------------------
    @property
    def nbytes(self):
        """Device bytes held."""
        raise NotImplementedError

    @property
    def common_shape(self):
        """The one shape every slot with a shape has, or None when slots may differ
        (or none has a shape yet)."""
        return None

    def accepts(self, *shapes):
        """Whether elements of all of ``shapes`` fit together without ``widened``."""
        raise NotImplementedError

    def takes_rows(self, shape):
        """Whether ``store_rows``/``add_rows``/``fill`` take a batch of rows of ``shape``
        in one operation (``store``/``add_rows`` one slot at a time always work)."""
        return False

    def slot_shape(self, index):
        """The shape of slot ``index``, which has one."""
        raise NotImplementedError

    # -- memory -----------------------------------------------------------------------------
    def convert(self, value):
        """A caller's value as an array of the layout's backend (TensorFlow's rules; a
        typed value keeps its dtype, which the error for a mismatch names)."""
        return self.backend.asarray(value, self.dtype)

    def zeros(self, shape):
        """A new array of zeros (results that hold no slot: empty gathers, zero-size rows)."""
        return self.backend.zeros(shape, self.dtype)

    def check_allocation(self, nbytes, what):
        """Refuse at once (ResourceExhaustedError) an allocation that cannot succeed
        (``what``: a text, or a function making it)."""
        self.backend.check_allocation(nbytes, what)

    def prepared(self, value):
        """``value`` (of the layout's dtype) as ``store``/``prepare_add_rows`` can take it
        without allocating: a contiguous copy where the layout needs one."""
        return value

    def reserve(self, needed, row_shape=None, exact=False, elements=0):
        """Make slots [0, needed) addressable for elements of ``row_shape`` (allocating
        room for more unless ``exact``), and room for ``elements`` more element values
        in a layout that allocates per element. Growth keeps every slot as it was, so
        an op calls this last of its allocations, just before it changes anything
        (``check_reserve`` first, when a larger allocation would come before it)."""

    def check_reserve(self, needed, row_shape=None, exact=False, elements=0):
        """ResourceExhaustedError now when ``reserve`` with these arguments would be refused."""

    def widened(self, slots_with_shape, slots_with_values):
        """A new layout holding the same slots (those listed: the layout does not track
        which slots are written) that accepts every shape; this one is left as it is."""
        raise NotImplementedError

    def shapes_for_gradient(self, prepend, slots, owner, hold):
        """A new layout of the same kind (for gradient array ``owner``, whose ``hold`` it
        takes) in which every slot in ``slots`` (a host int vector or a range) has shape
        ``prepend + its shape here`` and no value."""
        raise NotImplementedError

    # -- writes -----------------------------------------------------------------------------
    def set_shapes(self, slots, shape):
        """Every slot in ``slots`` (an iterable; ``accepts(shape)``) gets ``shape``, no value."""
        raise NotImplementedError

    def store(self, index, value):
        """Store ``value`` at ``index`` (addressable: see ``reserve``)."""
        raise NotImplementedError

    def prepare_store(self, index, value):
        """-> ``store()``: ``store(index, value)``, where ``value`` is ``prepared``."""
        return lambda: self.store(index, value)

    def undo_point(self, slots, rows):
        """-> ``undo()``, allocated now: puts ``slots`` (a tuple, a range or a host int
        vector) back as they are now after an interrupted change of them (stores, adds,
        fills, ``set_shapes``, ``materialize``; not ``reserve``, which keeps every slot).
        ``rows``: what their element memory holds now: "keep" (values the change adds
        to: copies are kept), "zeros" (no values: rows to zero again) or None (the
        change does not write existing element memory: a read's)."""
        raise NotImplementedError

    def prepare_store_rows(self, indices, rows):
        """-> ``store()``: ``rows[k]`` to distinct slots ``indices[k]`` (``takes_rows``)."""
        raise NotImplementedError

    def prepare_fill(self, indices, value, row_shape):
        """-> ``fill()``: every slot in ``indices`` becomes a row of ``row_shape`` holding
        the host scalar ``value``, every bit of it (``takes_rows``)."""
        raise NotImplementedError

    def prepare_add_rows(self, indices, rows, size, guard=None):
        """-> ``add()``: ``rows[k]`` added to slot ``indices[k]`` (< ``size``) in order
        (duplicates allowed), each slot holding a value of the row's shape when ``add``
        runs. The order of the sums is the active accumulation mode's (backends/accumulation.py).
        ``guard`` (flags, value), only where ``common_shape`` is known: ``add`` adds only if
        every slot's flag is ``value``, and answers whether it did (Backend.prepare_add_rows)."""
        raise NotImplementedError

    def materialize(self, slots):
        """Every soft slot among ``slots`` (a range, a tuple or a host int vector) gets
        zeros of its shape (room reserved: ``reserve``)."""
        raise NotImplementedError

    # -- reads ------------------------------------------------------------------------------
    def row(self, index):
        """The value of slot ``index`` (a 0-d array for scalars, never a NumPy scalar)."""
        raise NotImplementedError

    def prepare_row(self, index, shape):
        """-> ``row()``: the value of slot ``index``, of ``shape`` (``materialize`` may
        give it its value after this call)."""
        return self._prepared_copy(shape, lambda: self._stored(index)) or (lambda: self.row(index))

    def _stored(self, index):
        """Slot ``index`` as a view of the storage itself, for code that copies it at once."""
        raise NotImplementedError

    def _prepared_copy(self, shape, stored):
        """None where returned values are views (``readonly``); where they are copies (a
        GPU: backend.values_are_copies), -> a function copying ``stored()`` into memory
        allocated now, while preparing: a read then allocates nothing after it is marked."""
        if not self.backend.values_are_copies:
            return None
        out = self.backend.empty(shape, self.dtype)

        def copy():
            out[...] = stored()
            return out
        return copy

    def prepare_take(self, indices, shape):
        """-> ``take()``: the values of ``indices`` (a non-empty vector, or a range: then a
        view where possible; each of ``shape``) stacked."""
        raise NotImplementedError

    def prepare_concat(self, shapes):
        """-> ``concat()``: slots [0, len(shapes)), of ``shapes``, joined along their first
        axis: a view where possible."""
        raise NotImplementedError


class UniformLayout(Layout):
    """Storage's write of a first value of the slab's row shape to a row the slab has
    (``index < capacity``) is the plain assignment ``slab[index] = value``: no call, so no
    interrupt lands in it (storage.py, "the commit")."""

    __slots__ = ("slab", "view")

    def __init__(self, backend, dtype, row_shape, owner, hold):
        super().__init__(backend, dtype, owner, hold)
        self.row_shape = row_shape      # None until the first element is stored
        self.slab = None                # [capacity, *row_shape]
        self.view = None                # the slab, read-only where the backend allows (``_view``)
        self.capacity = 0

    @property
    def nbytes(self):
        return 0 if self.slab is None else self.slab.nbytes

    @property
    def common_shape(self):
        return self.row_shape

    def accepts(self, shape, *more):
        return not more and (self.row_shape is None or self.row_shape == shape)

    def takes_rows(self, shape):
        return self.row_shape is None or self.row_shape == shape

    def slot_shape(self, index):
        return self.row_shape

    def _growth(self, needed, row_shape, exact):
        """(row shape, the shape of the grown slab or None when it has room)."""
        row_shape = row_shape if self.row_shape is None else self.row_shape
        if needed <= self.capacity:
            return row_shape, None
        row_bytes = element_count(row_shape) * self.dtype.itemsize
        capacity = needed if exact else _grown(self.capacity, needed, FIRST_SLAB_BYTES // max(row_bytes, 1))
        shape = (capacity,) + row_shape
        self.backend.check_allocation(element_count(shape) * self.dtype.itemsize,
                                      lambda: f"a slab of shape {list(shape)} for TensorArray {self.owner}")
        return row_shape, shape

    def check_reserve(self, needed, row_shape=None, exact=False, elements=0):
        self._growth(needed, row_shape, exact)

    def reserve(self, needed, row_shape=None, exact=False, elements=0):
        if needed <= self.capacity and row_shape is None:
            return                              # room, and no shape to learn (a read's common case)
        row_shape, shape = self._growth(needed, row_shape, exact)
        if shape is None:
            self.row_shape = row_shape
            return
        capacity = shape[0]
        slab = self.backend.zeros(shape, self.dtype)
        if self.slab is not None:
            slab[: self.capacity] = self.slab
            self.hold(self.slab)                # the copy out of it may still be pending
        self.slab, self.view, self.capacity, self.row_shape = slab, None, capacity, row_shape

    def _view(self):
        """The slab, read-only, made at its first read: a slab that is only written, grown
        out of or taken from (a gradient array's) never needs one."""
        view = self.view
        if view is None:
            view = self.view = self.backend.readonly(self.slab)
        return view

    def widened(self, slots_with_shape, slots_with_values):
        return RaggedLayout.from_uniform(self, slots_with_shape, slots_with_values)

    def shapes_for_gradient(self, prepend, slots, owner, hold):
        row_shape = None if self.row_shape is None else prepend + self.row_shape
        return UniformLayout(self.backend, self.dtype, row_shape, owner, hold)

    def set_shapes(self, slots, shape):
        # Unwritten slab rows are zeros: the soft values themselves.
        if self.row_shape is None:
            self.row_shape = shape

    def store(self, index, value):
        self.slab[index] = value

    def undo_point(self, slots, rows):
        row_shape, slab, view, capacity = self.row_shape, self.slab, self.view, self.capacity

        def restore_slab():
            # A slab grown since goes (the rows as they were are in the one it replaced): a
            # failed op leaves no grown memory behind.
            if self.slab is not slab:
                self.hold(self.slab)
                self.slab, self.view, self.capacity = slab, view, capacity
            self.row_shape = row_shape
        if rows == "keep":
            indices = index_vector(_listed(slots))
            kept = self.backend.prepare_take_rows(indices, row_shape, self.dtype)(self.slab)
            put = self.backend.prepare_put_rows(indices, kept, self.dtype)

            def undo():
                restore_slab()
                put(self.slab)
        elif rows == "zeros":
            def undo():
                restore_slab()
                if self.slab is not None:
                    _zero_rows(self.slab, slots)      # slices: rows past the slab's end are none
        else:
            undo = restore_slab
        return undo

    def prepare_store_rows(self, indices, rows):
        put = self.backend.prepare_put_rows(indices, rows, self.dtype)
        return lambda: put(self.slab)

    def prepare_fill(self, indices, value, row_shape):
        # Rows, not ``slab[indices] = value``: CuPy turns a scalar into a 0-d array by
        # fill(), a memset for zero, and -0.0 would land as +0.0.
        return self.prepare_store_rows(indices, broadcast_rows(value, len(indices), row_shape))

    def prepare_add_rows(self, indices, rows, size, guard=None):
        add = self.backend.prepare_add_rows(indices, rows, max(size, self.capacity), self.dtype, guard=guard)
        return lambda: add(self.slab)

    def materialize(self, slots):
        pass                                    # unwritten slab rows already are zeros

    def row(self, index):
        view = self.view
        return (self._view() if view is None else view)[index, ...]

    def _stored(self, index):
        return self.slab[index, ...]

    def prepare_take(self, indices, shape):
        if type(indices) is range:
            return self._prepared_copy((len(indices),) + tuple(shape),
                                       lambda: self.slab[indices.start:indices.stop]) \
                or (lambda: self._view()[indices.start:indices.stop])
        take = self.backend.prepare_take_rows(indices, shape, self.dtype)
        return lambda: take(self.slab)

    def prepare_concat(self, shapes):
        count = len(shapes)
        shape = (count * shapes[0][0],) + tuple(shapes[0][1:])
        return self._prepared_copy(shape, lambda: self.slab[:count].reshape(shape)) \
            or (lambda: self._view()[:count].reshape((count * self.row_shape[0],) + self.row_shape[1:]))


class _PerSlotLayout(Layout):
    """A layout that keeps each slot's shape itself (``shapes``), so any mix of shapes
    fits and it never widens: the ragged and the string layouts."""

    def __init__(self, backend, dtype, owner, hold):
        super().__init__(backend, dtype, owner, hold)
        self.shapes = {}                  # slot -> shape (also for soft, valueless slots)

    def slot_shape(self, index):
        return self.shapes.get(index)

    def accepts(self, *shapes):
        return True

    def widened(self, slots_with_shape, slots_with_values):
        return self

    def shapes_for_gradient(self, prepend, slots, owner, hold):
        layout = type(self)(self.backend, self.dtype, owner, hold)
        for index in _listed(slots):
            layout.shapes[index] = prepend + self.shapes[index]
        return layout

    def set_shapes(self, slots, shape):
        for index in slots:
            self.shapes[index] = shape

    def undo_point(self, slots, rows):
        slots = _listed(slots)
        shapes = {index: self.shapes.get(index) for index in slots}
        restore = self._undo_values(slots, rows)

        def undo():
            restore()
            for index, shape in shapes.items():
                if shape is None:
                    self.shapes.pop(index, None)
                else:
                    self.shapes[index] = shape
        return undo


class RaggedLayout(_PerSlotLayout):
    def __init__(self, backend, dtype, owner, hold):
        super().__init__(backend, dtype, owner, hold)
        self.flat = backend.zeros((0,), dtype)
        self.readable = backend.readonly(self.flat)   # indexed to make returned values
        self.end = 0                      # first free element of ``flat``
        self.offsets = {}                 # slot -> first element in ``flat`` (slots with a value)

    @classmethod
    def from_uniform(cls, uniform, slots_with_shape, slots_with_values):
        ragged = cls(uniform.backend, uniform.dtype, uniform.owner, uniform.hold)
        for index in slots_with_shape:
            ragged.shapes[index] = uniform.row_shape
        if slots_with_values:
            ragged.reserve(0, elements=len(slots_with_values) * element_count(uniform.row_shape))
        for index in slots_with_values:
            ragged.store(index, uniform.slab[index])
        return ragged

    @property
    def nbytes(self):
        return self.flat.nbytes

    def prepared(self, value):
        return self.backend.contiguous(value, self.dtype)       # stored as a flat run of elements

    def _growth(self, elements):
        """The grown buffer's length, or None when it has room."""
        end = self.end + elements
        if end <= len(self.flat):
            return None
        capacity = _grown(len(self.flat), end)         # appends, even to a fixed-size array
        self.backend.check_allocation(capacity * self.dtype.itemsize,
                                      lambda: f"a buffer of {capacity} elements for TensorArray {self.owner}")
        return capacity

    def check_reserve(self, needed, row_shape=None, exact=False, elements=0):
        self._growth(elements)

    def reserve(self, needed, row_shape=None, exact=False, elements=0):
        capacity = self._growth(elements)
        if capacity is not None:
            flat = self.backend.zeros((capacity,), self.dtype)
            flat[:self.end] = self.flat[:self.end]
            self.hold(self.flat)                # the copy out of it may still be pending
            self.flat, self.readable = flat, self.backend.readonly(flat)   # its read-only root, once

    def _undo_values(self, slots, rows):
        end, flat, readable = self.end, self.flat, self.readable
        offsets = {index: self.offsets.get(index) for index in slots}
        kept = []
        if rows == "keep":          # adds change values in place: copies of them
            for index, start in offsets.items():
                if start is not None:
                    count = element_count(self.shapes[index])
                    kept.append((start, count, self.backend.copy(self.flat[start:start + count])))

        def undo():
            # What lies past ``end`` is no slot's: appends overwrite it. A buffer grown since
            # goes: the one it replaced holds every value up to ``end``.
            if self.flat is not flat:
                self.hold(self.flat)
                self.flat, self.readable = flat, readable
            self.end = end
            for index, start in offsets.items():
                if start is None:
                    self.offsets.pop(index, None)
                else:
                    self.offsets[index] = start
            for start, count, values in kept:
                self.flat[start:start + count] = values
        return undo

    def _allocate(self, count):
        start = self.end
        self.reserve(0, elements=count)         # nothing to do where the op reserved the room
        self.end = start + count
        return start

    def store(self, index, value):
        count = element_count(value.shape)
        start = self._allocate(count)
        self.flat[start:start + count] = value.reshape(-1)
        self.offsets[index] = start
        self.shapes[index] = tuple(value.shape)

    def prepare_add_rows(self, indices, rows, size, guard=None):
        # Each row through the backend's scatter-add, as the one row of a one-row view
        # of its slot (never ``view += row``: CuPy's element-wise add may flush subnormals).
        slots, first = indices.tolist(), index_vector([0])
        adds = [self.backend.prepare_add_rows(first, self.prepared(row).reshape(1, -1), 1, self.dtype)
                for row in rows]
        count = element_count(rows.shape[1:])

        def add():
            # In arrival order; a slot's offset is looked up now (an earlier store of the
            # same op may have given it its value). Indexing ``flat`` allocates nothing.
            for index, add_row in zip(slots, adds):
                start = self.offsets[index]
                add_row(self.flat[start:start + count].reshape(1, count))
        return add

    def materialize(self, slots):
        for index in _listed(slots):
            if index not in self.offsets:
                count = element_count(self.shapes[index])
                start = self._allocate(count)
                self.flat[start:start + count] = 0
                self.offsets[index] = start

    def row(self, index):
        start = self.offsets[index]
        shape = self.shapes[index]
        return self.readable[start:start + element_count(shape)].reshape(shape)

    def _stored(self, index):
        """Slot ``index`` as a view of the storage, for code that copies it at once."""
        start = self.offsets[index]
        shape = self.shapes[index]
        return self.flat[start:start + element_count(shape)].reshape(shape)

    def prepare_take(self, indices, shape):
        join = self.backend.prepare_concatenate([(1,) + shape] * len(indices), self.dtype)
        # The join copies: views of the storage itself, not returned values (copies on a GPU).
        return lambda: join([self._stored(index).reshape((1,) + shape) for index in _listed(indices)])

    def prepare_concat(self, shapes):
        """A view when slots [0, count) have values lying in order in ``flat`` (a split's
        pieces do), else one concatenation."""
        count = len(shapes)
        start = position = self.offsets.get(0)
        for index, shape in enumerate(shapes):
            if position is None or self.offsets.get(index) != position:
                join = self.backend.prepare_concatenate(shapes, self.dtype)
                return lambda: join([self._stored(i) for i in range(count)])
            position += element_count(shape)
        rows = sum(shape[0] for shape in shapes)
        return self._prepared_copy((rows,) + tuple(shapes[0][1:]),
                                   lambda: self.flat[start:position].reshape((rows,) + tuple(shapes[0][1:]))) \
            or (lambda: self.readable[start:position].reshape((rows,) + tuple(shapes[0][1:])))


class StringLayout(_PerSlotLayout):
    """Each slot's value is its own host object array of bytes, made by ``convert``
    (fresh: kept without a copy). Reads return new arrays, so no caller ever holds
    one the layout keeps. Never aggregates: strings do not add (storage refuses first).

    Allocation: the values are made by ``convert`` (the caller's value, as for every
    dtype, before the op); storing keeps references to them, and a valueless slot
    (storage reads only empty ones: TensorFlow has no zeros for strings) reads as
    empty strings, so ``store``, ``materialize`` and ``reserve`` allocate no memory.
    What reads return is new: made in ``row``/``prepare_*`` through the backend's
    door, counted against the host's memory (their pointers: the bytes are shared)."""

    def __init__(self, backend, dtype, owner, hold):
        super().__init__(backend, dtype, owner, hold)
        self.native_type = None         # every value goes through ``convert``: a string check
        self.values = {}                # slot -> object array (slots with a value)
        self._nbytes = 0

    @property
    def nbytes(self):
        """Host bytes held: pointers and string contents."""
        return self._nbytes

    def takes_rows(self, shape):
        return True

    def convert(self, value):
        if strings.is_string_like(value):       # NumPy's own arrays too, which backend.asarray passes
            return strings.as_strings(value)
        return self.backend.asarray(value, self.dtype)

    def zeros(self, shape):
        return strings.empty_strings(shape)

    def store(self, index, value):
        previous = self.values.get(index)
        if previous is not None:
            self._nbytes -= strings.payload_bytes(previous)
        self.values[index] = value
        self.shapes[index] = tuple(value.shape)
        self._nbytes += strings.payload_bytes(value)

    def _undo_values(self, slots, rows):
        nbytes = self._nbytes
        values = {index: self.values.get(index) for index in slots}

        def undo():
            self._nbytes = nbytes
            for index, value in values.items():
                if value is None:
                    self.values.pop(index, None)
                else:
                    self.values[index] = value
        return undo

    def prepare_store_rows(self, indices, rows):
        # Views of ``rows`` (a 0-d array for a vector's element, not its bytes).
        pairs = [(index, rows[position, ...]) for position, index in enumerate(indices.tolist())]

        def store():
            for index, row in pairs:
                self.store(index, row)
        return store

    def prepare_add_rows(self, indices, rows, size, guard=None):
        # Storage adds only empty values to strings (its checks refuse others first):
        # adding nothing leaves the slot as it is.
        return lambda: None

    def materialize(self, slots):
        pass                            # a valueless (empty) slot reads as empty strings: _value

    def _value(self, index, shape=None):
        value = self.values.get(index)
        return strings.empty_strings(self.shapes[index] if shape is None else shape) if value is None else value

    def _allocated(self, make, elements, what):
        return self.backend.allocate(make, elements * self.dtype.itemsize, f"{what} of TensorArray {self.owner}",
                                     host=True)

    def row(self, index):
        value = self._value(index)
        return self._allocated(value.copy, value.size, f"a copy of slot {index}")

    def prepare_row(self, index, shape):
        value = self._allocated(lambda: self._value(index, shape).copy(), element_count(shape),
                                f"a copy of slot {index}")
        return lambda: value

    def prepare_take(self, indices, shape):
        indices = _listed(indices)
        value = self._allocated(lambda: strings.stacked([self._value(index, shape) for index in indices]),
                                len(indices) * element_count(shape), f"a gather of {len(indices)} slots")
        return lambda: value

    def prepare_concat(self, shapes):
        value = self._allocated(
            lambda: strings.joined([self._value(index, shape) for index, shape in enumerate(shapes)]),
            sum(element_count(shape) for shape in shapes), f"a concat of {len(shapes)} slots")
        return lambda: value
