"""The walk's abstract state and its values (inits/values.py, inits/state.py): the lattice's equality tells an
exact address from one Within its object, the join (meet) is commutative and idempotent and widens addresses of
one object to Within it, and bound() keeps a state's size constant."""
from __future__ import annotations

from itertools import product

import pytest

from elfpatch.inits.budget import STATE_SLOTS
from elfpatch.inits.state import bound, equal, head_state, meet
from elfpatch.inits.values import ALLOC, FRAME, Ptr, Within, address_of, plain, same

OBJECTS = ((0x4000, 0x4100), (0x5000, 0x5010))  # two global objects: [start, end)


def object_of(a: int) -> int | None:
    return next((lo for lo, hi in OBJECTS if lo <= a < hi), None)


VALUES = (None, 0x4000, 0x4008, 0x5000, 0x9000, Within(0x4000), Within(0x5000), FRAME, ALLOC, Ptr("arg", 1),
          "ext_sym")
# Every state over two keys (None: the key absent), and a compare outcome on some: 121 states, 14,641 pairs.
STATES = [{k: v for k, v in (("rax", x), ("m:rbp-8", y), ("cmp", (1, 1) if i % 3 == 0 else None)) if v is not None}
          for i, (x, y) in enumerate(product(VALUES, VALUES))]


def test_within_is_not_its_address() -> None:
    """An address somewhere inside an object is not the object's exact start: a state holding one is not the
    state holding the other (else a loop head would settle on the wrong value)."""
    assert not same(Within(0x4000), 0x4000)
    assert not same(0x4000, Within(0x4000))
    assert same(Within(0x4000), Within(0x4000)) and same(0x4000, 0x4000)
    assert not equal({"rax": Within(0x4000)}, {"rax": 0x4000})


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


def test_meet_widens_one_object_to_within() -> None:
    """Two addresses in one object agree on the object; in two objects, or outside any, on nothing."""
    assert equal(meet({"rax": 0x4000}, {"rax": 0x4008}, object_of), {"rax": Within(0x4000)})
    assert meet({"rax": 0x4000}, {"rax": 0x5000}, object_of) == {}
    assert meet({"rax": 0x9000}, {"rax": 0x9008}, object_of) == {}


def test_meet_drops_the_compare() -> None:
    """A join's state holds no compare outcome: the compare was decided on one edge only."""
    assert meet(None, {"cmp": (1, 1), "rax": 1}, object_of) == {"rax": 1}
    assert meet({"cmp": (1, 1)}, {"cmp": (1, 1)}, object_of) == {}


def test_meet_is_commutative() -> None:
    for a, b in product(STATES, STATES):
        assert equal(meet(a, b, object_of), meet(b, a, object_of)), (a, b)


@pytest.mark.parametrize("a", STATES, ids=repr)
def test_meet_is_idempotent(a: dict) -> None:
    once = meet(a, a, object_of)
    assert equal(once, {k: v for k, v in a.items() if k != "cmp"})
    assert equal(meet(once, once, object_of), once)


def test_meet_only_loses_or_widens() -> None:
    """What the fixpoint's termination rests on: a join keeps a subset of the keys, each value as it was or
    widened to Within its object; and a Within met again stays."""
    for a, b in product(STATES, STATES):
        out = meet(a, b, object_of)
        for k, v in out.items():
            assert k in a and k in b
            assert same(v, a[k]) or (isinstance(v, Within) and object_of(address_of(a[k])) == v.start), (a, b)
        assert equal(meet(out, a, object_of), out), (a, b)


def test_head_state_copies() -> None:
    """A loop head's state is a copy: walking the block must not change the state it started from."""
    fwd = {"rax": 1}
    st = head_state(fwd, None, object_of)
    st["rbx"] = 2
    assert fwd == {"rax": 1}


def test_bound_holds_and_keeps_registers() -> None:
    """bound() keeps at most STATE_SLOTS stack slots (the newest) and every register."""
    st = {"rax": 1, "rdi": Within(0x4000)}
    st.update((f"m:rbp-{8 * i}", i) for i in range(1, 3 * STATE_SLOTS))
    bound(st)
    slots = [k for k in st if k.startswith("m:")]
    assert len(slots) == STATE_SLOTS
    assert slots[-1] == f"m:rbp-{8 * (3 * STATE_SLOTS - 1)}"
    assert st["rax"] == 1 and same(st["rdi"], Within(0x4000))
