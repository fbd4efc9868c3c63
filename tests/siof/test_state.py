"""The walk's abstract state and its values (inits/values.py, inits/state.py): the lattice's equality tells an
exact address from one Within its object, State.join is commutative and idempotent and widens addresses of one
object to Within it, and State.bound() keeps a state's size constant."""
from __future__ import annotations

from itertools import product
from types import SimpleNamespace

import pytest

from elfpatch.inits.budget import STATE_SLOTS, Budget
from elfpatch.inits.events import Ret
from elfpatch.inits.state import State, equal, head_state, join
from elfpatch.inits.values import ALLOC, FRAME, Ptr, Within, address_of, plain, same
from elfpatch.inits.walk import EMPTY, Summary, Walker

OBJECTS = ((0x4000, 0x4100), (0x5000, 0x5010))  # two global objects: [start, end)


def object_of(a: int) -> int | None:
    return next((lo for lo, hi in OBJECTS if lo <= a < hi), None)


VALUES = (None, 0x4000, 0x4008, 0x5000, 0x9000, Within(0x4000), Within(0x5000), FRAME, ALLOC, Ptr("arg", 1),
          "ext_sym")
# Every state over two keys (None: the key absent), and a compare outcome on some: 121 states, 14,641 pairs.
STATES = [State({k: v for k, v in (("rax", x), ("m:rbp-8", y), ("cmp", (1, 1) if i % 3 == 0 else None))
                if v is not None}) for i, (x, y) in enumerate(product(VALUES, VALUES))]


def test_within_is_not_its_address() -> None:
    """An address somewhere inside an object is not the object's exact start: a state holding one is not the
    state holding the other (else a loop head would settle on the wrong value)."""
    assert not same(Within(0x4000), 0x4000)
    assert not same(0x4000, Within(0x4000))
    assert same(Within(0x4000), Within(0x4000)) and same(0x4000, 0x4000)
    assert State({"rax": Within(0x4000)}) != State({"rax": 0x4000})
    assert not equal(State({"rax": Within(0x4000)}), State({"rax": 0x4000}))


def test_within_never_equals_an_int() -> None:
    """Within is no int: it never equals, nor hashes as a key for, the address it starts at, so no dict, set or
    cache takes one for the other; two of one object are one value; it is immutable."""
    assert Within(0x4000) != 0x4000 and 0x4000 != Within(0x4000)
    assert not isinstance(Within(0x4000), int)
    assert Within(0x4000) == Within(0x4000) and Within(0x4000) != Within(0x5000)
    assert hash(Within(0x4000)) == hash(Within(0x4000))
    assert len({Within(0x4000), 0x4000, Within(0x4000)}) == 2
    assert {0x4000: 1}.get(Within(0x4000)) is None
    with pytest.raises(AttributeError):
        Within(0x4000).start = 0x5000  # type: ignore[misc]


def test_a_within_names_its_objects_start() -> None:
    """What the walk reports a Within as (accesses, calls, registrations): its object's start."""
    assert address_of(Within(0x4000)) == 0x4000 and address_of(0x4008) == 0x4008
    assert address_of(FRAME) is None and address_of("ext_sym") is None and address_of(None) is None
    assert plain(Within(0x4000)) == 0x4000 and plain(FRAME) is FRAME and plain("ext_sym") == "ext_sym"


def test_provenance_is_never_an_address() -> None:
    """A pointer known only by its provenance never equals an address, whatever its fields."""
    assert FRAME != 0 and ALLOC != 0 and Ptr("arg", 0) != 0
    assert not same(Ptr("arg", 1), 1)


def test_join_widens_one_object_to_within() -> None:
    """Two addresses in one object agree on the object; in two objects, or outside any, on nothing."""
    assert State({"rax": 0x4000}).join(State({"rax": 0x4008}), object_of) == State({"rax": Within(0x4000)})
    assert State({"rax": 0x4000}).join(State({"rax": 0x5000}), object_of) == State()
    assert State({"rax": 0x9000}).join(State({"rax": 0x9008}), object_of) == State()


def test_join_drops_the_compare() -> None:
    """A join's state holds no compare outcome: the compare was decided on one edge only."""
    assert join(None, State({"cmp": (1, 1), "rax": 1}), object_of) == State({"rax": 1})
    assert State({"cmp": (1, 1)}).join(State({"cmp": (1, 1)}), object_of) == State()


def test_join_is_commutative() -> None:
    for a, b in product(STATES, STATES):
        assert a.join(b, object_of) == b.join(a, object_of), (a, b)


@pytest.mark.parametrize("a", STATES, ids=repr)
def test_join_is_idempotent(a: State) -> None:
    once = a.join(a, object_of)
    assert once == State({k: v for k, v in a.values.items() if k != "cmp"})
    assert once.join(once, object_of) == once


def test_join_only_loses_or_widens() -> None:
    """What the fixpoint's termination rests on: a join keeps a subset of the keys, each value as it was or
    widened to Within its object; and a Within joined again stays."""
    for a, b in product(STATES, STATES):
        out = a.join(b, object_of)
        for k, v in out.values.items():
            assert k in a.values and k in b.values
            assert same(v, a.values[k]) or (isinstance(v, Within) and object_of(address_of(a.values[k])) == v.start)
        assert out.join(a, object_of) == out, (a, b)


def test_equality_is_the_lattices() -> None:
    """Same keys, each the same value; None (no state) equals only None; a State is no dict and unhashable."""
    assert State({"rax": 1, "rbx": FRAME}) == State({"rbx": FRAME, "rax": 1})
    assert State({"rax": 1}) != State({"rax": 1, "rbx": 2}) and State({"rax": 1}) != State({"rax": 2})
    assert State({"rax": 1}) != {"rax": 1}
    assert equal(None, None) and not equal(None, State()) and not equal(State(), None)
    with pytest.raises(TypeError):
        hash(State())


def test_copies_are_copies() -> None:
    """A loop head's state, copy() and a first join are fresh: walking the block must not change the state it
    started from."""
    fwd = State({"rax": 1})
    for st in (head_state(fwd, None, object_of), fwd.copy(), join(None, fwd, object_of)):
        st.values["rbx"] = 2
    assert fwd == State({"rax": 1})


def test_bound_holds_and_keeps_registers() -> None:
    """bound() keeps at most STATE_SLOTS stack slots (the newest) and every register."""
    st = State({"rax": 1, "rdi": Within(0x4000)})
    st.values.update((f"m:rbp-{8 * i}", i) for i in range(1, 3 * STATE_SLOTS))
    st.bound()
    slots = [k for k in st.values if k.startswith("m:")]
    assert len(slots) == STATE_SLOTS
    assert slots[-1] == f"m:rbp-{8 * (3 * STATE_SLOTS - 1)}"
    assert st.values["rax"] == 1 and same(st.values["rdi"], Within(0x4000))


class _Image:
    @staticmethod
    def function_end(addr: int) -> int:
        return addr + 16


def _bare_walker(events: list) -> Walker:
    """A Walker with only what its caches and the getter check use: no file behind it."""
    w = Walker.__new__(Walker)
    w.image, w._memo, w._returns, w._sweeps, w._returning = _Image(), {}, {}, {}, []  # type: ignore[assignment]
    w.dis = SimpleNamespace(budget=Budget())  # type: ignore[assignment]
    w._events = lambda _addr, _end, _args: events  # type: ignore[method-assign]
    return w


def test_a_within_argument_is_not_its_exact_start_to_the_summaries() -> None:
    """A helper walked with an address Within an object and with the object's exact start gets two walks: the
    exact one may decide a compare the other cannot, so its summary is no stand-in for the other's."""
    w = _bare_walker([])
    made: list[tuple] = []

    def exact(addr: int, _end: int, args: tuple, _depth: int, _stack: frozenset) -> Summary:
        made.append(args)
        return EMPTY._replace()  # a new summary each walk

    w._exact = exact  # type: ignore[method-assign]
    a = w.walk(0x1000, (Within(0x4000),), 1)
    b = w.walk(0x1000, (0x4000,), 1)
    assert made == [(Within(0x4000),), (0x4000,)] and a is not b
    assert w.walk(0x1000, (Within(0x4000),), 1) is a  # the same tuple again: the summary made


def test_a_walk_the_depth_cut_nothing_of_stands_for_every_depth_it_reaches() -> None:
    """A walk at depth 3 whose calls went one level deep, none cut (height 1, depth_limited 0), is the walk at
    depths 1 and 8 too (one summary, not one per depth it is reached at); at depth 0 it would be cut: walked
    again. A walk the depth did cut stands only for its own depth."""
    w = _bare_walker([])
    made: list[int] = []

    def exact(_addr: int, _end: int, _args: tuple, depth: int, _stack: frozenset) -> Summary:
        made.append(depth)
        return EMPTY._replace(height=1, depth_limited=int(depth == 0))

    w._exact = exact  # type: ignore[method-assign]
    first = w.walk(0x1000, (), 3)
    assert w.walk(0x1000, (), 1) is first and w.walk(0x1000, (), 8) is first
    cut = w.walk(0x1000, (), 0)
    assert cut is not first and w.walk(0x1000, (), 0) is cut
    assert made == [3, 0]


def test_a_getter_returning_within_and_exact_returns_no_one_value() -> None:
    """``ret`` with an address Within an object on one path and the exact start on another: two values, so the
    getter's result is not known (not the first one seen)."""
    assert _bare_walker([Ret(Within(0x4000)), Ret(0x4000)])._returned(0x1000) is None
    assert _bare_walker([Ret(Within(0x4000)), Ret(Within(0x4000))])._returned(0x1000) == Within(0x4000)
