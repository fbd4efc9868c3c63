"""The expressions of the Itanium C++ ABI grammar, for the bound walk of elfpatch.elf.mangled: ``decltype(...)``
types (``DT``/``Dt``), expression template arguments (``X...E``), array bounds and ``noexcept(...)``.

They follow libiberty's d_expression_1 (cp-demangle.c), which is what c++filt and ``__cxa_demangle`` run:
the same productions in the same order, so that the types inside an expression are registered as
substitution candidates where the demangler registers them. Each piece is charged an over-estimate of what
the demangler prints for it (an operator's spelling and parentheses: at most OPERATOR characters).
"""
from __future__ import annotations

TYPE_CHECKING = False  # for the checker only: nothing more is imported at run time

OPERATOR = 48  # "reinterpret_cast<", "(", ")", " ", "...": the text around one expression node

# Operator codes and their operand counts (libiberty's cplus_demangle_operators); cv, li and v<digit>
# (vendor operators) are read apart.
ARITY = {
    "aN": 2, "aS": 2, "aa": 2, "ad": 1, "an": 2, "at": 1, "aw": 1, "az": 1, "cc": 2, "cl": 2, "cm": 2,
    "co": 1, "dV": 2, "dX": 3, "da": 1, "dc": 2, "de": 1, "di": 2, "dl": 1, "ds": 2, "dt": 2, "dv": 2,
    "dx": 2, "eO": 2, "eo": 2, "eq": 2, "fL": 3, "fR": 3, "fl": 2, "fr": 2, "ge": 2, "gs": 1, "gt": 2,
    "ix": 2, "lS": 2, "le": 2, "ls": 2, "lt": 2, "mI": 2, "mL": 2, "mi": 2, "ml": 2, "mm": 1, "na": 3,
    "ne": 2, "ng": 1, "nt": 1, "nw": 3, "nx": 1, "oR": 2, "oo": 2, "or": 2, "pL": 2, "pl": 2, "pm": 2,
    "pp": 1, "ps": 1, "pt": 2, "qu": 3, "rM": 2, "rS": 2, "rc": 2, "rm": 2, "rs": 2, "sP": 1, "sZ": 1,
    "sc": 2, "ss": 2, "st": 1, "sz": 1, "te": 1, "ti": 1, "tr": 0, "tw": 1,
}
_FUNCTION_ADDRESS = ("adL_Z", "L_Z")  # &f, or f, as an expression: an encoding inside
_TYPE_OPERAND = frozenset(("st", "at", "ti"))  # sizeof, alignof, typeid of a type
_CASTS = frozenset(("dc", "sc", "cc", "rc"))  # the new-style casts: a type, then an expression


class ExpressionWalk:
    """Mixed into the bound walk, whose cursor (``s``, ``i``), grammar (``_type``, ``_unqualified``,
    ``_template_args``, ...) and ``_GiveUp`` it uses. Every method returns a bound on the printed length."""

    s: str
    i: int
    GiveUp: type[Exception]
    subs: list[int]
    pack: int
    depth: int
    expressions: bool
    in_type: int
    respelled: bool
    templated_unresolved: int

    if TYPE_CHECKING:  # the host walk's grammar (elfpatch.elf.mangled._Walk), declared for the type checker only
        def _peek(self, k: int = 0) -> str: ...
        def _take(self, text: str) -> bool: ...
        def _number(self) -> int: ...
        def _enter(self) -> None: ...
        def _unqualified(self, last: int) -> tuple[int, bool]: ...
        def _source_name(self) -> int: ...
        def _template_param(self) -> int: ...
        def _template_args(self) -> int: ...
        def _template_arg(self) -> int: ...
        def _literal(self) -> int: ...
        def _type(self) -> int: ...

    def _expression(self) -> int:
        self._enter()
        # A function's address as a template argument (&f: ad L _Z <encoding> E) registers the candidates of
        # an encoding, as a whole name does: the walk's order is the demangler's there, and charging every
        # later reference the largest candidate would put names such as at::functorch's plumbing past 1 MiB.
        if not self.s.startswith(_FUNCTION_ADDRESS, self.i):
            self.expressions = True
        try:
            return self._expression_inner()
        finally:
            self.depth -= 1

    def _expression_inner(self) -> int:
        c, nxt = self._peek(), self._peek(1)
        if c == "L":
            return self._literal()
        if c == "T":
            return self._template_param()
        if c.isdigit():  # a name: decltype(f(t))
            return self._name_with_args()
        special = _LEADS.get(c + nxt)
        if special is not None:
            return special(self)
        if c == "u":
            return self._vendor_expression()
        return self._operation()

    def _pack_expansion(self) -> int:
        """sp <expression>: the pattern once per element."""
        self.i += 2
        return (self._expression() + OPERATOR) * self.pack

    def _operator_name(self) -> int:
        """on <operator-name> [<template-args>]: operator+(t)."""
        self.i += 2
        return self._name_with_args()

    def _braced(self) -> int:
        """il <expression>* E, tl <type> <expression>* E: a braced initializer list, typed or not."""
        typed = self._peek() == "t"
        self.i += 2
        total = self._type() if typed else 0
        return total + self._list("E")

    def _vendor_expression(self) -> int:
        """u <source-name> <template-arg>* E."""
        self.i += 1
        total = self._source_name()
        while not self._take("E"):
            total += self._template_arg() + OPERATOR
        return total + OPERATOR

    def _list(self, end: str) -> int:
        """<expression>* ``end``."""
        total = OPERATOR
        while not self._take(end):
            total += self._expression() + OPERATOR
        return total

    def _name_with_args(self) -> int:
        total = self._unqualified(0)[0]
        if self._peek() == "I":
            total += self._template_args()
        return total

    def _function_param(self) -> int:
        """fp T (this), fp [<cv>] [<number>] _: printed "{parm#N}" or "this"."""
        self.i += 2
        if self._take("T"):
            return OPERATOR
        while self._peek() in ("r", "V", "K"):
            self.i += 1
        if self._peek() != "_":
            self._number()
        if not self._take("_"):
            raise self.GiveUp
        return OPERATOR

    def _unresolved(self) -> int:
        """sr <qualifier>+ E <base name> (A::x is sr1AE1x), else the older sr <type> <base name> (sr1A1x):
        libiberty tries them in that order. A qualifier ending in E is no candidate there."""
        start = self.i
        self.i += 2
        c = self._peek()
        total = self._qualifier_levels()
        if total is None:
            if c.isdigit() or c.islower() or c in ("C", "U", "L"):
                # The older spelling, which libiberty reads only after the newer failed: releases differ
                # in where the newer fails (and then in what they print), so no spelling can be trusted.
                self.respelled = True
            before = len(self.subs)
            total = self._type()
            if self._take("E") and len(self.subs) > before:
                self.subs.pop()
        total += self._unqualified(0)[0]
        if self._peek() == "I":
            total += self._template_args()
            self.templated_unresolved = start
        return total + OPERATOR

    def _qualifier_levels(self) -> int | None:
        """<unresolved-qualifier-level>+ E (source names, each with its template arguments), when an E ends
        them and a base name follows; None (nothing read) otherwise, and for levels other than source names
        (operator names, C/U/L forms, which compilers do not emit there). Each level is registered as a
        candidate, more than the demangler may register: in an expression every reference is charged the
        largest candidate anyway, and a candidate too many keeps a later reference from looking invalid."""
        if not self._peek().isdigit():  # levels of other kinds are read the older way (see _unresolved)
            return None
        pos, subs = self.i, len(self.subs)
        total = 0
        self.in_type += 1  # their template arguments are no name's own
        try:
            while self._peek() != "E":
                if self._peek() == "I":
                    total += self._template_args()
                elif self._peek().isdigit():
                    total += self._source_name() + 2
                else:
                    raise self.GiveUp
                self.subs.append(total)
            self.i += 1  # E
            if self._peek().isdigit() or self.s.startswith(("on", "dn"), self.i):  # a base name follows
                return total
        except self.GiveUp:
            pass
        finally:
            self.in_type -= 1
        self.i = pos
        del self.subs[subs:]
        return None

    def _operand(self) -> int:
        """An operand the demangler prints through d_print_subexpr: in parentheses unless it is a plain or
        qualified name. libiberty before GCC 13 builds A::f<T> (sr ... I ... E) as a qualified name, later
        releases as a template: bare in one spelling, "(A::f<T>)" in the other (``respelled``)."""
        start = self.i
        total = self._expression()
        if self.templated_unresolved == start:
            self.respelled = True
        return total

    def _operation(self) -> int:
        code = self.s[self.i : self.i + 2]
        if code == "cv":  # a cast: one operand, or _ <expression>* E
            self.i += 2
            total = self._type() + OPERATOR
            return total + (self._list("E") if self._take("_") else self._operand())
        if code == "li":  # a literal operator: operator"" <source-name>, then its operand
            self.i += 2
            return self._source_name() + self._operand() + OPERATOR
        if code[:1] == "v" and code[1:].isdigit():  # a vendor operator: v <digit> <source-name>, N operands
            self.i += 2
            total = self._source_name() + OPERATOR
            return total + sum(self._operand() for _ in range(int(code[1])))
        arity = ARITY.get(code)
        if arity is None:
            raise self.GiveUp
        self.i += 2
        if code in _TYPE_OPERAND:
            return self._type() + OPERATOR
        return (self._unary, self._binary, self._ternary)[arity - 1](code) if arity else OPERATOR

    def _unary(self, code: str) -> int:
        if code in ("pp", "mm"):
            self._take("_")  # the prefix form, pp_ and mm_
        if code == "sP":  # sizeof...(<template-arg>* E)
            total = OPERATOR
            while not self._take("E"):
                total += self._template_arg() + OPERATOR
            return total
        if code == "gs":  # ::name: printed without parentheses
            return self._expression() + OPERATOR
        return self._operand() + OPERATOR

    def _binary(self, code: str) -> int:
        if code in _CASTS:
            left = self._type()
        elif code[0] == "f":  # a fold: its operator, then the operand
            left = self._fold_operator()
        elif code == "di":  # a designated initializer: .name = expr
            left = self._unqualified(0)[0]
        else:
            left = self._operand()
        if code == "cl":
            right = self._list("E")
        elif code in ("dt", "pt") and self.s[self.i : self.i + 2] not in ("gs", "sr"):
            right = self._name_with_args()  # a member name
        elif code in _CASTS or code == "ix":  # static_cast<T>(e), a[i]: printed without parentheses
            right = self._expression()
        else:
            right = self._operand()
        return left + right + OPERATOR

    def _ternary(self, code: str) -> int:
        if code in ("qu", "dX"):
            return self._operand() + self._operand() + self._operand() + OPERATOR
        if code[0] == "f":
            return self._fold_operator() + self._operand() + self._operand() + OPERATOR
        # new and new[]: <expression>* _ <type> (E | pi <expression>* E | <initializer list>)
        total = self._list("_") + self._type()
        if self._take("E"):
            return total + OPERATOR
        if self._take("pi"):
            return total + self._list("E")
        if self.s.startswith("il", self.i):
            return total + self._expression()
        raise self.GiveUp

    def _fold_operator(self) -> int:
        code = self.s[self.i : self.i + 2]
        if code not in ARITY:
            raise self.GiveUp
        self.i += 2
        return OPERATOR

    def _decltype(self) -> tuple[int, bool]:
        """DT <expression> E, Dt <expression> E: "decltype (...)", a substitution candidate."""
        self.i += 2
        total = self._expression()
        if not self._take("E"):
            raise self.GiveUp
        return total + OPERATOR, True


_LEADS = {"sr": ExpressionWalk._unresolved, "sp": ExpressionWalk._pack_expansion,
          "fp": ExpressionWalk._function_param, "on": ExpressionWalk._operator_name,
          "il": ExpressionWalk._braced, "tl": ExpressionWalk._braced}
