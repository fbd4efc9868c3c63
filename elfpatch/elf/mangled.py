"""An upper bound on the length of the demangled form of an Itanium C++ ABI name, found without demangling it.

Back-references (``S<seq>_`` substitutions, ``T<n>_`` template parameters) make a demangled name a DAG printed
as a tree: each reference prints its target again, so a 267-byte name can print 218 MB (a type holding two
references to the one before it, 25 times over). libstdc++'s ``__cxa_demangle`` builds that output in memory,
so the only way to bound it is to look first. This module walks the grammar once, in linear time, registering
substitution candidates in the order the ABI (and libiberty's cp-demangle.c) does, each with a bound on its
printed length, so a reference costs what its target costs. Every constant is an over-estimate of what the
demangler prints for that piece.

Expressions (``decltype``, ``X...E`` arguments, array bounds) are read by elfpatch.elf.mangled_expr; once one was
read, a substitution is charged the largest candidate so far, so that a candidate registered out of the ABI's
order cannot make it cheap. Constructs the walk does not follow give up on it; then a cruder bound counts every
possible reference as doubling what came before. Both are upper bounds, never estimates: when either says a
name fits, demangling it cannot allocate much more.
"""
from __future__ import annotations

import re

from elfpatch.elf.mangled_expr import ExpressionWalk

PER_CHAR = 40  # most any one mangled character prints as ("Sd": 51 characters for 2; "y": 18 for 1)
PIECE = 32  # punctuation and keywords around one production ("<", ", ", " const", "{lambda(", "#1}", ...)
STD_ABBREVIATION = 70  # Ss, Si, So, Sd printed in full before a constructor: "std::basic_string<char, ...> >"

_BUILTIN = frozenset("vwbcahstijlmxynofdegz")
_STD = frozenset("tabsiod")  # St, Sa, Sb, Ss, Si, So, Sd
# Anything that may print something else again: substitutions, template and function parameters,
# constructors and destructors (the class name again), pack expansions (a pattern per element).
_REFERENCE = re.compile(r"S[0-9A-Z]*_|T\d*_|f[pL]|C[1-5I]|D[0-5]")
_PACK = re.compile(r"Dp|sZ|sP|fl|fr|fL|fR")


# <operator-name> (the Itanium C++ ABI's "Operator Encodings"): the codes a name may use; cv <type>, li
# <source-name> and v <digit> <source-name> are read apart.
OPERATOR_NAMES = frozenset((
    "nw", "na", "dl", "da", "aw", "ps", "ng", "ad", "de", "co", "pl", "mi", "ml", "dv", "rm", "an", "or", "eo",
    "aS", "pL", "mI", "mL", "dV", "rM", "aN", "oR", "eO", "ls", "rs", "lS", "rS", "eq", "ne", "lt", "gt", "le",
    "ge", "ss", "nt", "aa", "oo", "pp", "mm", "cm", "pm", "pt", "cl", "ix", "qu",
))

_WALKS = 8  # walks of one name before its references are taken to form a cycle
_NESTED = 32  # arguments containing a reference looked past before charging it the largest of all


class _GiveUp(Exception):
    """A construct the walk does not follow."""


def crude_bound(name: str) -> int:
    """A bound from counting alone: every possible reference at most doubles what came before it, every pack
    expansion multiplies it by the name's length."""
    refs = len(_REFERENCE.findall(name))
    packs = len(_PACK.findall(name))
    n = len(name)
    if refs > 64 or packs > 8:
        return 1 << 80
    return PER_CHAR * n * (2 ** refs) * (max(n, 2) ** packs)


def demangled_bound(name: str) -> int:
    """An upper bound on len(demangle(name)) for a ``_Z`` name (the walk's, or the crude one)."""
    try:
        return _Walk(name).bound()
    except _GiveUp:
        return crude_bound(name)
    except (IndexError, ValueError, RecursionError):
        return crude_bound(name)  # malformed past where the walk could tell: the demangler refuses it too


# An unresolved name (sr ...) somewhere in an expression: only then can a name be spelled otherwise by
# libstdc++'s demangler and c++filt (see ExpressionWalk._unresolved and _operand).
_RESPELLING = re.compile(r"sr[^_E]")  # not "sparse_csr_", "csrE"


def respelled(name: str) -> bool:
    """Whether demanglers of different releases spell ``name`` differently: libiberty before GCC 13 (libstdc++
    12's ``__cxa_demangle``) prints a qualified template name used as an operand bare, later ones (binutils
    2.40's c++filt) in parentheses: ``std::begin(std::declval<T&>())`` against
    ``std::begin((std::declval<T&>)())``; and a qualified name in an expression mangled the older way
    (sr <type> <base>) is read by each release its own way. A glob could match one spelling and not the
    other, so such a name is not taken as demangled. Where the walk cannot follow a name, the rest of it is
    taken as respelled when it could be."""
    if _RESPELLING.search(name) is None:
        return False
    walk = _Walk(name)
    try:
        walk.bound()
    except (_GiveUp, IndexError, ValueError, RecursionError):
        if walk.i < len(name):  # stopped inside: what it did not read may hold the construct
            return walk.respelled or _RESPELLING.search(name, max(0, name.rfind("sr", 0, walk.i + 2))) is not None
    return walk.respelled


class _Walk(ExpressionWalk):
    GiveUp = _GiveUp

    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0
        self.subs: list[int] = []  # bound of each substitution candidate, in the ABI's order
        # Once an expression was read, a reference is charged the largest candidate so far, not only its
        # own: the bound then holds even where the walk registered a candidate the demangler did not.
        self.expressions = False
        self.peak = self.peak_seen = 0
        # Template parameters refer to the arguments of a name's own template argument lists (the entity's,
        # an enclosing class's, a local name's function's), never to those of a type's (vector<T_>). And a
        # reference never prints an argument that holds it: the demangler refuses that recursion. So T_ is
        # charged the largest argument of a name that does not contain it, which also keeps an argument
        # holding a reference (a lambda of a function template as a template argument) from feeding itself.
        self.args: list[tuple[int, int, int]] = []  # (bound, start, end) of every template argument of a name
        self.packs = 1  # the most elements of any argument pack of a name seen
        self.in_type = 0  # > 0 while inside a type (its template arguments are not a name's)
        self.charges: list[tuple[int, int, int]] = []  # the previous walk's args, largest first
        self.refs: list[tuple[int, int]] = []  # (position, charge) of every template parameter reference
        # A conversion operator's type resolves T_ against whatever template is being printed, a type's too:
        # its references are charged the largest argument of any list (of the previous walk).
        self.any_arg = 0  # the largest argument of any list, this walk
        self.cv_charge = 0  # ... of the previous walk
        self.in_cv = 0  # > 0 while inside a conversion operator's type
        self.cv_refs = False
        # The demangler refuses a reference to an argument that holds it only on its second nesting: before it
        # stops, it prints that argument once more. When a charge left such an argument out, the bound doubles.
        self.excluded = False
        self.pack = 1  # how many elements a pack expansion is charged (raised until it holds)
        self.depth = 0
        self.respelled = False  # a qualified template name as an operand (see respelled())
        self.templated_unresolved = -1  # where the last unresolved name with template arguments began

    def bound(self) -> int:
        # Template parameters may refer forward (a conversion operator's type) and packs may be expanded
        # before they are seen: charge what the previous walk found, and walk again until what was charged
        # holds. Each walk settles one more level of arguments that hold references.
        for _ in range(_WALKS):
            self.i, self.subs, self.args, self.refs, self.packs, self.depth, self.in_type = 0, [], [], [], 1, 0, 0
            self.any_arg, self.in_cv, self.cv_refs, self.excluded, self.expressions = 0, 0, False, False, False
            self.peak = self.peak_seen = 0
            total = self._mangled()
            self.charges = sorted(self.args, reverse=True)  # bounds only grow with what they were charged
            if (self.packs <= self.pack and all(self._charge(pos) <= charged for pos, charged in self.refs)
                    and (not self.cv_refs or self.any_arg <= self.cv_charge)):
                return 2 * total if self.excluded else total
            self.pack = max(self.pack, self.packs)
            self.cv_charge = max(self.cv_charge, self.any_arg)
        raise _GiveUp  # the arguments keep growing: references in a cycle

    def _charge(self, pos: int) -> int:
        """The largest argument (of the last walk) that does not contain position ``pos``; those that do are
        nested, so this looks at most a nesting depth past the first, and past _NESTED of them takes the
        largest of all (which may then keep the walk from settling: the crude bound serves)."""
        for bound, start, end in self.charges[:_NESTED]:
            if not start <= pos < end:
                return bound
            self.excluded = True
        return self.charges[0][0] if self.charges else 0

    # -- helpers ------------------------------------------------------------------------------------

    def _peek(self, k: int = 0) -> str:
        """The character ``k`` ahead, or NUL past the end (never in a name, nor in any set tested here)."""
        j = self.i + k
        return self.s[j] if j < len(self.s) else "\0"

    def _take(self, text: str) -> bool:
        if self.s.startswith(text, self.i):
            self.i += len(text)
            return True
        return False

    def _number(self) -> int:
        start = self.i
        self._take("n")
        while self._peek().isdigit():
            self.i += 1
        if self.i == start:
            raise _GiveUp
        return int(self.s[start : self.i].lstrip("n") or "0")

    def _seq(self) -> int:
        """<seq-id>: base 36 in digits and capitals, then '_' (none: 0, else value + 1)."""
        start = self.i
        while self._peek().isdigit() or self._peek().isupper():
            self.i += 1
        digits = self.s[start : self.i]
        if not self._take("_"):
            raise _GiveUp
        return int(digits, 36) + 1 if digits else 0

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > 500:
            raise _GiveUp

    # -- grammar ------------------------------------------------------------------------------------

    def _mangled(self) -> int:
        if not self._take("_Z"):
            raise _GiveUp
        total = self._encoding()
        if self._peek() == ".":  # clone suffixes: " [clone .constprop.0]"
            total += 2 * (len(self.s) - self.i) + PIECE
            self.i = len(self.s)
        if self.i != len(self.s):
            raise _GiveUp
        return total

    def _encoding(self) -> int:
        outer, self.in_type = self.in_type, 0  # an encoding within a type (L_Z...E) names an entity again
        try:
            return self._encoding_inner()
        finally:
            self.in_type = outer

    def _encoding_inner(self) -> int:
        c = self._peek()
        if c == "T" or (c == "G" and self._peek(1) in "VRT"):
            return self._special()
        total, template, cdtor = self._name()
        if self.i >= len(self.s) or self._peek() in "E.":
            return total
        if template and not cdtor:
            total += self._type()  # the return type
        while self.i < len(self.s) and self._peek() not in "E.":
            total += self._type() + PIECE
        return total + PIECE

    def _special(self) -> int:
        """Virtual tables, typeinfo, thunks, guard variables and the like: a fixed text and what it is for."""
        for prefix, parts in _SPECIAL:
            if self._take(prefix):
                return sum(part(self) for part in parts) + PIECE
        raise _GiveUp

    def _offset(self) -> int:
        """<number> _ (a thunk's or construction vtable's offset)."""
        self._number()
        if not self._take("_"):
            raise _GiveUp
        return 0

    def _name_only(self) -> int:
        return self._name()[0]

    def _temporary(self) -> int:
        """GR <name> [<seq-id>] _: a reference temporary."""
        total = self._name()[0]
        while self._peek() != "_":
            if not (self._peek().isdigit() or self._peek().isupper()):
                raise _GiveUp
            self.i += 1
        self.i += 1
        return total

    def _name(self) -> tuple[int, bool, bool]:
        """(bound, is a template, is a constructor, destructor or conversion operator)."""
        c = self._peek()
        if c == "N":
            return self._nested()
        if c == "Z":
            return self._local()
        if c == "S" and self._peek(1) != "t":
            total = self._substitution()
            if self._peek() != "I":
                raise _GiveUp  # a name that is only a substitution: not valid here
            return total + self._template_args(), True, False
        total = 0
        if self._take("St"):
            total = 5
        name, cdtor = self._unqualified(0)
        total += name
        if self._peek() == "I":
            self.subs.append(total)  # <unscoped-template-name>
            return total + self._template_args(), True, cdtor
        return total, False, cdtor

    def _nested(self) -> tuple[int, bool, bool]:
        """N [qualifiers] [ref-qualifier] <prefix components> E: every prefix but the whole is a candidate."""
        self.i += 1  # N
        total = 0
        while self._peek() in ("r", "V", "K"):
            self.i += 1
            total += 10
        if self._peek() in ("R", "O"):
            self.i += 1
            total += 3
        prefix, last, template, cdtor = 0, 0, False, False
        while not self._take("E"):
            c = self._peek()
            if c == "M":  # the data member a lambda initializes: prints nothing
                self.i += 1
                continue
            if c == "I":
                if prefix == 0:
                    raise _GiveUp
                prefix += self._template_args()
                template = True
            else:
                name, cdtor = self._component(c, last)
                last = last if cdtor else name
                prefix += name + 2  # "::"
                template = False
            if c != "S" and self._peek() != "E":
                self.subs.append(prefix)
        return total + prefix, template, cdtor

    def _component(self, c: str, last: int) -> tuple[int, bool]:
        """One prefix component other than template arguments: (bound, is a constructor, destructor or
        conversion operator)."""
        if c == "\0":
            raise _GiveUp
        if c == "D" and self._peek(1) in ("T", "t"):  # decltype: a type, and a candidate as a type
            return self._type(), False
        if c == "S":
            return (5 if self._take("St") else self._substitution()), False
        if c == "T":
            return self._template_param(), False
        return self._unqualified(last)

    def _substitution(self) -> int:
        """S_, S<seq>_ or a standard abbreviation; never a new candidate."""
        self.i += 1  # S
        c = self._peek()
        if c in _STD and c != "t":
            self.i += 1
            return STD_ABBREVIATION
        k = self._seq()
        if k >= len(self.subs):
            raise _GiveUp
        return self._largest_candidate() if self.expressions else self.subs[k]

    def _largest_candidate(self) -> int:
        """The largest candidate registered so far (amortized: each is looked at once per walk)."""
        while self.peak_seen < len(self.subs):
            self.peak = max(self.peak, self.subs[self.peak_seen])
            self.peak_seen += 1
        return self.peak

    def _local(self) -> tuple[int, bool, bool]:
        self.i += 1  # Z
        total = self._encoding()
        if not self._take("E"):
            raise _GiveUp
        if self._take("s"):
            total += 16  # "string literal"
        elif self._take("d"):
            if self._peek() != "_":
                self._number()
            self._take("_")
            name, template, cdtor = self._name()
            return total + name + PIECE, template, cdtor
        else:
            name, template, cdtor = self._name()
            total += name
            self._discriminator()
            return total + PIECE, template, cdtor
        self._discriminator()
        return total + PIECE, False, False

    def _discriminator(self) -> None:
        if self._take("__"):
            self._number()
            self._take("_")
        elif self._take("_"):
            if self._peek().isdigit():
                self.i += 1

    def _unqualified(self, last: int) -> tuple[int, bool]:
        """(bound, is a constructor, destructor or conversion operator); ``last``: the bound of the
        previous component (what a constructor prints again)."""
        if self._peek() == "L":  # internal linkage
            self.i += 1
        c, nxt = self._peek(), self._peek(1)
        cdtor = False
        if c.isdigit():
            total = self._source_name()
        elif (c == "C" and nxt in "12345I") or (c == "D" and nxt in "012345"):
            total, cdtor = self._cdtor(last), True
        elif c == "D" and nxt == "C":  # structured binding: DC <source-name>+ E
            self.i += 2
            total = PIECE
            while not self._take("E"):
                total += self._source_name() + 2
        elif c == "U" and nxt in ("t", "l"):
            total = self._unnamed()
        elif c.islower():
            total, cdtor = self._operator()
        else:
            raise _GiveUp
        while self._peek() == "B":  # ABI tags: "[abi:cxx11]"
            self.i += 1
            total += self._source_name() + 7
        return total, cdtor

    def _cdtor(self, last: int) -> int:
        """C1..C5, CI1/CI2 <base type> (an inheriting constructor), D0..D5: the class name again."""
        kind, self.i = self.s[self.i], self.i + 2
        if kind == "D":
            return last + 1  # "~"
        if self.s[self.i - 1] == "I":
            self.i += 1
            return last + self._type() + PIECE
        return last + PIECE

    def _unnamed(self) -> int:
        """Ut [<number>] _ (an unnamed type), Ul <parameter types> E [<number>] _ (a closure type)."""
        lambda_, self.i = self._peek(1) == "l", self.i + 2
        total = PIECE
        if lambda_:
            while not self._take("E"):
                total += self._type() + 2
        if self._peek() != "_":
            self._number()
        if not self._take("_"):
            raise _GiveUp
        return total

    def _source_name(self) -> int:
        n = self._number()
        if n <= 0 or self.i + n > len(self.s):
            raise _GiveUp
        anonymous = self.s.startswith("_GLOBAL_", self.i)  # "(anonymous namespace)"
        self.i += n
        return n + (21 if anonymous else 0)

    def _operator(self) -> tuple[int, bool]:
        """<operator-name>, after the "on" that libiberty's d_unqualified_name lets any operator name have
        (an unresolved name's base: sr ... on <operator-name>)."""
        self._take("on")
        if self._take("cv"):
            self.in_cv += 1
            try:
                return self._type() + PIECE, True
            finally:
                self.in_cv -= 1
        if self._take("li"):
            return self._source_name() + PIECE, False
        if self._peek() == "v" and self._peek(1).isdigit():
            self.i += 2
            return self._source_name() + PIECE, False
        if self.s[self.i : self.i + 2] not in OPERATOR_NAMES:
            raise _GiveUp  # not an operator the ABI names: no bound is claimed for what follows
        self.i += 2
        return PIECE, False

    def _template_param(self) -> int:
        """T_ or T<n>_: what the largest template argument that can be meant costs (see ``bound``)."""
        pos = self.i
        self.i += 1  # T
        self._seq()
        charge = self._charge(pos)
        self.refs.append((pos, charge))
        if self.in_cv:
            self.cv_refs = True
            charge = max(charge, self.cv_charge)
        return charge

    def _template_args(self) -> int:
        self._enter()
        self.i += 1  # I
        total = PIECE
        while not self._take("E"):
            total += self._name_arg() + 2
        self.depth -= 1
        return total

    def _name_arg(self) -> int:
        """One template argument, recorded with its extent when it is a name's."""
        start = self.i
        arg = self._template_arg()
        if not self.in_type:
            self.args.append((arg, start, self.i))
        self.any_arg = max(self.any_arg, arg)
        return arg

    def _template_arg(self) -> int:
        c = self._peek()
        if c == "L":
            return self._literal()
        if c in ("J", "I"):  # an argument pack (I...E: GCC's older spelling, which libiberty reads too)
            self.i += 1
            total, count = PIECE, 0
            while not self._take("E"):
                total += self._name_arg() + 2
                count += 1
            if not self.in_type:
                self.packs = max(self.packs, count)
            return total
        if c == "X":
            self.i += 1
            total = self._expression()
            if not self._take("E"):
                raise _GiveUp
            return total + PIECE
        return self._type()

    def _literal(self) -> int:
        self.i += 1  # L
        if self._take("_Z"):
            total = self._encoding()
        else:
            total = self._type()
            start = self.i
            while self._peek() not in ("E", "\0"):
                self.i += 1
            total += 2 * (self.i - start)
        if not self._take("E"):
            raise _GiveUp
        return total + PIECE

    def _type(self) -> int:
        self._enter()
        self.in_type += 1
        try:
            total, candidate = self._type_inner()
        finally:
            self.depth -= 1
            self.in_type -= 1
        if candidate:
            self.subs.append(total)
        return total

    def _type_inner(self) -> tuple[int, bool]:
        """(bound, whether the type is a substitution candidate)."""
        c = self._peek()
        if c in _BUILTIN:
            self.i += 1
            return 20, False
        if c in ("r", "V", "K") or (c == "D" and self._peek(1) in ("o", "x", "w", "O")):
            total = self._qualifiers()
            if self._peek() == "F":  # qualifiers of a member function's type: that type is no candidate
                return total + self._function(), True
            return total + self._type(), True
        if c.isdigit() or c in ("N", "Z"):
            return self._name()[0], True
        kind = _TYPE_KINDS.get(c)
        if kind is None:
            raise _GiveUp
        return kind(self)

    def _vendor_type(self) -> tuple[int, bool]:
        self.i += 1  # u
        return self._source_name(), True

    def _compound(self) -> tuple[int, bool]:
        self.i += 1  # P, R, O, C, G: pointer, references, complex, imaginary
        return self._type() + 12, True

    def _vendor_qualified(self) -> tuple[int, bool]:
        self.i += 1  # U <source-name> [<template-args>] <type>
        total = self._source_name()
        if self._peek() == "I":
            total += self._template_args()
        return total + self._type(), True

    def _function_type(self) -> tuple[int, bool]:
        return self._function(), True

    def _array(self) -> tuple[int, bool]:
        self.i += 1  # A [<number>] _ <type>
        total = 0
        if self._peek().isdigit():
            total = len(str(self._number()))
        elif self._peek() != "_":
            total = self._expression()  # a dimension given as an expression
        if not self._take("_"):
            raise _GiveUp
        return total + self._type() + PIECE, True

    def _member_pointer(self) -> tuple[int, bool]:
        self.i += 1  # M <class type> <member type>
        return self._type() + self._type() + PIECE, True

    def _param_type(self) -> tuple[int, bool]:
        total = self._template_param()
        if self._peek() == "I":  # a template template parameter: T_ and T_<args> are both candidates
            self.subs.append(total)
            total += self._template_args()
        return total, True

    def _s_type(self) -> tuple[int, bool]:
        """S_, S<seq>_ or Sa/Sb/Ss/...: a candidate only with template arguments; St <name>: always."""
        nxt = self._peek(1)
        if nxt == "t":
            return self._name()[0], True
        if not (nxt.isdigit() or nxt == "_" or nxt.isupper() or nxt in _STD):
            raise _GiveUp
        total = self._substitution()
        if self._peek() == "I":
            return total + self._template_args(), True
        return total, False

    def _qualifiers(self) -> int:
        """r, V, K, and the function qualifiers Do (noexcept), Dx (transaction_safe), Dw <type>* E (throw)."""
        total = 0
        while True:
            c = self._peek()
            if c in ("r", "V", "K"):
                self.i += 1
                total += 10
            elif c == "D" and self._peek(1) in ("o", "x"):
                self.i += 2
                total += 18
            elif c == "D" and self._peek(1) == "w":
                self.i += 2
                total += PIECE
                while not self._take("E"):
                    total += self._type() + 2
            elif c == "D" and self._peek(1) == "O":  # noexcept(expression)
                self.i += 2
                total += self._expression() + PIECE
                if not self._take("E"):
                    raise _GiveUp
            else:
                return total

    def _function(self) -> int:
        self.i += 1  # F
        self._take("Y")
        total = self._type() + PIECE  # the return type
        while not self._take("E"):
            if self._peek() in ("R", "O") and self._peek(1) == "E":
                self.i += 1
                total += 3
                continue
            total += self._type() + 2
        return total

    def _d_type(self) -> tuple[int, bool]:
        nxt = self._peek(1)
        if nxt in "dfehisuancn":
            self.i += 2
            return 20, False
        if nxt == "F":  # DF<N>_ / DF<N>x / DF16b
            self.i += 2
            self._number()
            if self._peek() in ("_", "x", "b"):
                self.i += 1
            return 20, False
        if nxt == "p":  # a pack expansion: the pattern once per element
            self.i += 2
            pattern = self._type()
            return (pattern + 2) * self.pack, True
        if nxt in ("T", "t"):
            return self._decltype()
        if nxt == "v":  # a vector type: "int __vector(4)"
            self.i += 2
            if not self._peek().isdigit():
                raise _GiveUp
            self._number()
            if not self._take("_"):
                raise _GiveUp
            return self._type() + PIECE, True
        raise _GiveUp


_TYPE_KINDS = {"u": _Walk._vendor_type, "P": _Walk._compound, "R": _Walk._compound, "O": _Walk._compound,
               "C": _Walk._compound, "G": _Walk._compound, "U": _Walk._vendor_qualified, "F": _Walk._function_type,
               "A": _Walk._array, "M": _Walk._member_pointer, "T": _Walk._param_type, "D": _Walk._d_type,
               "S": _Walk._s_type}
_SPECIAL = (("TV", (_Walk._type,)), ("TT", (_Walk._type,)), ("TI", (_Walk._type,)), ("TS", (_Walk._type,)),
            ("TC", (_Walk._type, _Walk._offset, _Walk._type)), ("TH", (_Walk._name_only,)),
            ("TW", (_Walk._name_only,)), ("GV", (_Walk._name_only,)), ("Th", (_Walk._offset, _Walk._encoding)),
            ("Tv", (_Walk._offset, _Walk._offset, _Walk._encoding)), ("GR", (_Walk._temporary,)),
            ("GTt", (_Walk._encoding,)), ("GTn", (_Walk._encoding,)))
