"""Objects without a symbol in a stripped file: which addresses the initializers' summaries keep as objects
(those an initializer builds or stores into; a guard is none), what is built on first use (under
``__cxa_guard_acquire``), and which unexported local functions build an object through ``this`` rather than
insert into one another initializer builds."""
from __future__ import annotations

from elfpatch.inits.image import Image
from elfpatch.inits.walk import Summary


def unnamed_built(image: Image | None, summaries: list[Summary | None]) -> list[Summary | None]:
    """The summaries as a stripped file lets them be read. Objects without a symbol (known by address) are
    kept only where an initializer builds or stores into one at that address; a guard
    (``__cxa_guard_acquire``'s) is none. What is built under a guard (a function-local static, or clang's
    inline variable) is built on first use: its reads count only in a walk that saw every call it makes, which
    would have seen that use's initialization (a getter chain past --depth returns the object without it). A
    constructor the file does not export has no name: a local function storing into the object its first
    argument points to builds it, unless another initializer builds it: for sure, by stores by address (an
    inlined constructor's), or through such a function that stores through ``this`` before it loads there (a
    constructor's first store; an insert's read-modify-write loads first): then it is a registrar's insert."""
    if image is None or not image.stripped:
        return summaries
    ss = [s for s in summaries if s is not None]
    guards = {o for s in ss for o in s.guards}
    built = {o for s in ss for o in (*s.constructs, *s.call_stores, *s.this_builds)} - guards
    unnamed = {o for s in ss for o in (*s.reads, *s.constructs, *s.touched, *s.call_stores)
               if image.symbol_at(o) is None}
    drop = unnamed - built
    first_use = unnamed & {o for s in ss for o in s.guarded_builds} - drop
    strong = {o for s in ss for o, sure in s.constructs.items() if sure}
    # what an initializer builds by a constructor call, by stores (an inlined constructor's), or through an unnamed
    # callee whose first access through `this` stores (a constructor's): another initializer's unnamed callee
    # then inserts into it, never builds it
    stored: dict[int, set[int]] = {}
    for pos, s in enumerate(summaries):
        for o in (set(s.constructs) - s.this_builds) | (s.this_builds - s.this_loads) if s is not None else ():
            stored.setdefault(o, set()).add(pos)
    return [_kept(_this_built(s, strong | drop | {o for o in s.this_builds if stored.get(o, {pos}) != {pos}}),
                  drop, drop if _whole(s) else drop | first_use)
            if s is not None else None for pos, s in enumerate(summaries)]


def _this_built(s: Summary, not_these: set[int]) -> Summary:
    """``s`` with the objects its unnamed callees store into through their first argument built (strong),
    but ``not_these`` (another initializer builds them: the callee inserts, see _siof). A load of one before
    that is a read before construction, unless the callee too loads it before it stores there (an insert's
    read-modify-write: ``if (r.n < 8) add(&r, x)`` on a zero-initialized registry is a flag checked before
    an insert): built by a store, its early load a note (_loaded_then_stored), never a finding."""
    sure = {o for o, strong in s.constructs.items() if strong}
    built = s.this_builds - not_these - sure
    # an insert: the callee's stores (by address where it was walked with the argument) build nothing here
    inserted = (s.this_builds & not_these) - sure
    if inserted:
        s = s._replace(constructs=_without(s.constructs, set(inserted)), call_stores=s.call_stores | inserted)
    if not built:
        return s
    loaded = {o for o in built if s.touched.get(o, (False,))[0]}
    early = {o: s.touched[o][1] for o in loaded - s.this_loads}
    return s._replace(constructs={**s.constructs, **dict.fromkeys(built - (loaded & s.this_loads), True),
                                  **{o: False for o in loaded & s.this_loads}}, early={**s.early, **early})


def _whole(s: Summary) -> bool:
    """Whether a walk saw every call it makes (within the depth). A jump to an address no function starts at
    is no call a compiler makes (a jump back into a function on the walk's stack, whose code is swept whole;
    a table jump read as one): it hides no first use."""
    return not (s.indirect or s.depth_limited or s.cut)


def _kept(s: Summary, drop: set[int], unread: set[int]) -> Summary:
    """``s`` without the objects in ``drop``, and without reads of those in ``unread``."""
    if not unread:
        return s
    return s._replace(reads=_without(s.reads, unread), constructs=_without(s.constructs, drop),
                      touched=_without(s.touched, unread), early=_without(s.early, unread),
                      via_once=_without(s.via_once, unread), call_stores=s.call_stores - drop)


def _without(d: dict, drop: set) -> dict:
    return {k: v for k, v in d.items() if k not in drop}
