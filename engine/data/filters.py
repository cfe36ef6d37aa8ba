"""The filter language of `[[source.filters]] where = "…"`: a small SQL condition over the source's own
columns, parsed here into a Polars expression. Nothing of it reaches an SQL engine.

    condition  := or
    or         := and (OR and)*
    and        := not (AND not)*
    not        := NOT not | predicate
    predicate  := sum [ cmp sum | [NOT] IN (literal, …) | [NOT] BETWEEN sum AND sum
                      | [NOT] LIKE 'pattern' | [NOT] ILIKE 'pattern' | IS [NOT] NULL ]
    sum        := product ((+ | -) product)*
    product    := unary ((* | / | %) unary)*
    unary      := - unary | atom
    atom       := number | 'text' | TRUE | FALSE | NULL | column | "quoted column"
                | function(condition, …) | CAST(condition AS type) | (condition)

cmp is one of = == <> != < <= > >=; functions are those of FUNCTIONS. A name is a column reference:
`parse` checks the grammar alone (an answers file is refused before any data is read), `compile_filter`
also checks every name against the source's columns. A table function (read_csv('/path'), …), a
subquery, a name that is not a column or anything outside the grammar is refused with a message that
quotes only the condition and the source's own column names, never a file's content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from claimcheck.engine.pipeline.context import StageInputError

if TYPE_CHECKING:
    import polars as pl

MAX_LENGTH = 4000  # characters of one condition
MAX_DEPTH = 40  # nested parentheses, NOTs and unary minuses
MAX_TREE = 200  # levels of the parsed condition (a chain a + b + c + … is one level per operator)

# name -> (fewest, most) arguments
FUNCTIONS = {
    "lower": (1, 1),
    "upper": (1, 1),
    "trim": (1, 1),
    "length": (1, 1),
    "char_length": (1, 1),
    "abs": (1, 1),
    "round": (1, 2),
    "floor": (1, 1),
    "ceil": (1, 1),
    "coalesce": (1, 16),
}
CAST_TYPES = {
    "int": "Int64",
    "integer": "Int64",
    "bigint": "Int64",
    "smallint": "Int64",
    "float": "Float64",
    "double": "Float64",
    "real": "Float64",
    "text": "String",
    "varchar": "String",
    "string": "String",
    "boolean": "Boolean",
    "bool": "Boolean",
    "date": "Date",
    "timestamp": "Datetime",
    "datetime": "Datetime",
}
KEYWORDS = {"and", "or", "not", "in", "is", "null", "between", "like", "ilike", "true", "false", "cast", "as"}
# Words that start a query or a set operation: a filter is one condition on one row, never a query.
QUERY_WORDS = {"select", "from", "with", "union", "exists", "join", "values", "table", "where", "limit"}
SUBSET = (
    "a filter is a condition on the source's own columns: column names, literals, = <> < <= > >=, "
    "AND/OR/NOT, IN (literals), BETWEEN, LIKE, IS NULL, + - * / % and " + ", ".join(FUNCTIONS) + ", CAST"
)
COMPARISONS = {"=": "eq", "==": "eq", "<>": "ne", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?)"
    r"|(?P<str>'(?:[^']|'')*')|(?P<qid>\"(?:[^\"]|\"\")*\")|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op><=|>=|<>|!=|==|[=<>+\-*/%(),]))"
)


class FilterError(ValueError):
    """The condition is outside the filter language; the message says what and never quotes data."""


@dataclass(frozen=True)
class Tok:
    kind: str  # num, str, qid, id, op, end
    text: str


@dataclass(frozen=True)
class Node:
    kind: str  # col, lit, fn, cast, neg, bin, cmp, not, and, or, in, between, like, isnull
    value: Any = None
    args: tuple[Node, ...] = ()
    negated: bool = False


def tokens(where: str) -> list[Tok]:
    out, pos = [], 0
    text = where.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            bad = text[pos:].lstrip()[:1]
            raise FilterError(
                f"'{bad}' at character {len(text) - len(text[pos:].lstrip()) + 1} is not allowed"
            )
        kind = m.lastgroup or "op"
        out.append(Tok(kind, m.group(kind)))
        pos = m.end()
    return [*out, Tok("end", "")]


class _Parser:
    def __init__(self, where: str):
        if len(where) > MAX_LENGTH:
            raise FilterError(f"the condition has {len(where):,} characters; at most {MAX_LENGTH:,}")
        self.toks, self.i, self.depth = tokens(where), 0, 0

    def peek(self, ahead: int = 0) -> Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def word(self, ahead: int = 0) -> str:
        t = self.peek(ahead)
        return t.text.lower() if t.kind == "id" else ""

    def take(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, *words: str) -> bool:
        t = self.peek()
        if (t.kind == "id" and t.text.lower() in words) or (t.kind == "op" and t.text in words):
            self.i += 1
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.accept(word):
            raise FilterError(f"expected '{word.upper() if word.isalpha() else word}' {self.at()}")

    def at(self) -> str:
        t = self.peek()
        return "at the end" if t.kind == "end" else f"before '{t.text[:40]}'"

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterError(f"the condition nests deeper than {MAX_DEPTH} levels")

    def condition(self) -> Node:
        self.nest()
        node = self.conj()
        while self.accept("or"):
            node = Node("or", args=(node, self.conj()))
        self.depth -= 1
        return node

    def conj(self) -> Node:
        node = self.negation()
        while self.accept("and"):
            node = Node("and", args=(node, self.negation()))
        return node

    def prefixed(self, kind: str, operand: Any) -> Node:
        """A prefix operator (NOT, unary minus) applied to `operand()`, one nesting level deeper."""
        self.nest()
        node = Node(kind, args=(operand(),))
        self.depth -= 1
        return node

    def negation(self) -> Node:
        return self.prefixed("not", self.negation) if self.accept("not") else self.predicate()

    def predicate(self) -> Node:
        left = self.sum()
        t = self.peek()
        if t.kind == "op" and t.text in COMPARISONS:
            self.take()
            return Node("cmp", COMPARISONS[t.text], (left, self.sum()))
        if self.accept("is"):
            negated = self.accept("not")
            self.expect("null")
            return Node("isnull", args=(left,), negated=negated)
        negated = self.accept("not")
        if self.accept("in"):
            return Node("in", args=(left, *self.literal_list()), negated=negated)
        if self.accept("between"):
            low = self.sum()
            self.expect("and")
            return Node("between", args=(left, low, self.sum()), negated=negated)
        if self.word() in ("like", "ilike"):
            ci = self.take().text.lower() == "ilike"
            pattern = self.take()
            if pattern.kind != "str":
                raise FilterError("LIKE needs a quoted pattern ('abc%')")
            return Node("like", (_unquote(pattern.text), ci), (left,), negated)
        if negated:
            raise FilterError(f"NOT must be followed by IN, BETWEEN or LIKE here, {self.at()}")
        return left

    def literal_list(self) -> tuple[Node, ...]:
        self.expect("(")
        if self.word() in QUERY_WORDS:
            raise FilterError("a subquery is not allowed; " + SUBSET)
        items = [self.literal()]
        while self.accept(","):
            items.append(self.literal())
        self.expect(")")
        return tuple(items)

    def literal(self) -> Node:
        node = self.unary()
        if node.kind != "lit" and not (node.kind == "neg" and node.args[0].kind == "lit"):
            raise FilterError("IN (…) takes literal values only (numbers, 'text', TRUE, FALSE)")
        return node

    def sum(self) -> Node:
        node = self.product()
        while self.peek().kind == "op" and self.peek().text in "+-":
            node = Node("bin", self.take().text, (node, self.product()))
        return node

    def product(self) -> Node:
        node = self.unary()
        while self.peek().kind == "op" and self.peek().text in ("*", "/", "%"):
            node = Node("bin", self.take().text, (node, self.unary()))
        return node

    def unary(self) -> Node:
        return self.prefixed("neg", self.unary) if self.accept("-") else self.atom()

    def atom(self) -> Node:
        t = self.take()
        if t.kind == "num":
            return Node("lit", float(t.text) if re.search(r"[.eE]", t.text) else int(t.text))
        if t.kind == "str":
            return Node("lit", _unquote(t.text))
        if t.kind == "qid":
            return Node("col", t.text[1:-1].replace('""', '"'))
        if t.kind == "op" and t.text == "(":
            if self.word() in QUERY_WORDS:
                raise FilterError("a subquery is not allowed; " + SUBSET)
            node = self.condition()
            self.expect(")")
            return node
        if t.kind == "id":
            return self.named(t.text)
        raise FilterError(f"expected a value {'at the end' if t.kind == 'end' else f'before {t.text!r}'}")

    def named(self, name: str) -> Node:
        low = name.lower()
        if low in ("true", "false"):
            return Node("lit", low == "true")
        if low == "null":
            return Node("lit", None)
        if low in QUERY_WORDS:
            raise FilterError(f"'{name}' starts a query; a subquery is not allowed; " + SUBSET)
        if self.peek().text == "(":
            return self.call(name)
        if low in KEYWORDS:
            raise FilterError(f"'{name}' is misplaced; quote a column with this name as \"{name}\"")
        return Node("col", name)

    def call(self, name: str) -> Node:
        low = name.lower()
        self.expect("(")
        if low == "cast":
            inner = self.condition()
            self.expect("as")
            kind = self.take()
            if kind.kind != "id" or kind.text.lower() not in CAST_TYPES:
                raise FilterError(f"CAST to '{kind.text[:40]}' is not supported; use {', '.join(CAST_TYPES)}")
            self.expect(")")
            return Node("cast", CAST_TYPES[kind.text.lower()], (inner,))
        if low not in FUNCTIONS:
            what = "table function" if low.startswith(("read_", "scan_")) else "function"
            raise FilterError(f"the {what} '{name}' is not allowed; " + SUBSET)
        if self.word() in QUERY_WORDS:
            raise FilterError("a subquery is not allowed; " + SUBSET)
        args = [] if self.peek().text == ")" else [self.condition()]
        while self.accept(","):
            args.append(self.condition())
        self.expect(")")
        fewest, most = FUNCTIONS[low]
        if not fewest <= len(args) <= most:
            raise FilterError(f"{low}() takes {fewest}..{most} argument(s), not {len(args)}")
        return Node("fn", low, tuple(args))


def _unquote(text: str) -> str:
    return text[1:-1].replace("''", "'")


def parse(where: str) -> Node:
    """The condition's syntax tree; raises FilterError for anything outside the language."""
    p = _Parser(where)
    if p.peek().kind == "end":
        raise FilterError("the condition is empty")
    node = p.condition()
    if _depth(node) > MAX_TREE:
        raise FilterError(
            f"the condition chains more than {MAX_TREE} operators; split it into several filters"
        )
    if p.peek().kind != "end":
        t = p.peek().text
        if t.lower() in QUERY_WORDS:
            raise FilterError(f"'{t}' starts a query; a subquery is not allowed; " + SUBSET)
        raise FilterError(f"unexpected '{t[:40]}' after a complete condition")
    return node


def _depth(node: Node) -> int:
    """Levels of the syntax tree, counted without recursion (a long chain of operators is deep)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        cur, level = stack.pop()
        deepest = max(deepest, level)
        stack += [(arg, level + 1) for arg in cur.args]
    return deepest


def columns_of(node: Node) -> set[str]:
    """Every column the condition names."""
    found = {node.value} if node.kind == "col" else set()
    for arg in node.args:
        found |= columns_of(arg)
    return found


def compile_filter(where: str, schema: Any) -> pl.Expr:
    """The condition as a Polars expression over a frame with `schema` (name -> dtype); every name
    must be one of its columns. Raises FilterError."""
    node = parse(where)
    unknown = sorted(columns_of(node) - set(schema))
    if unknown:
        shown = ", ".join(list(schema)[:30]) + (", …" if len(schema) > 30 else "")
        raise FilterError(f"{unknown[0]!r} is not a column of the source (its columns: {shown})")
    return _Compiler(schema).expr(node)


class _Compiler:
    def __init__(self, schema: Any):
        self.schema = schema

    def expr(self, node: Node) -> pl.Expr:
        import polars as pl

        kind, a = node.kind, node.args
        if kind == "col":
            return pl.col(node.value)
        if kind == "lit":
            return pl.lit(node.value)
        if kind == "neg":
            return -self.expr(a[0])
        if kind == "not":
            return ~self.expr(a[0])
        if kind in ("and", "or"):
            left, right = self.expr(a[0]), self.expr(a[1])
            return (left & right) if kind == "and" else (left | right)
        if kind == "bin":
            return _ARITH[node.value](self.expr(a[0]), self.expr(a[1]))
        if kind == "cmp":
            left, right = self.pair(a[0], a[1])
            return getattr(left, node.value)(right)
        return self.special(node)

    def special(self, node: Node) -> pl.Expr:
        import polars as pl

        kind, a = node.kind, node.args
        if kind == "cast":
            return self.expr(a[0]).cast(getattr(pl, node.value), strict=True)
        if kind == "fn":
            return _FUNCS[node.value]([self.expr(x) for x in a])
        if kind == "isnull":
            e = self.expr(a[0])
            return e.is_not_null() if node.negated else e.is_null()
        if kind == "in":
            out = pl.any_horizontal([self.eq(a[0], x) for x in a[1:]])
        elif kind == "between":
            low, high = self.pair(a[0], a[1])[1], self.pair(a[0], a[2])[1]
            out = self.expr(a[0]).is_between(low, high)
        else:  # like
            pattern, ci = node.value
            out = self.expr(a[0]).cast(pl.String).str.contains(_like_regex(pattern, ci))
        return ~out if node.negated else out

    def eq(self, left: Node, right: Node) -> pl.Expr:
        lhs, rhs = self.pair(left, right)
        return lhs == rhs

    def pair(self, left: Node, right: Node) -> tuple[pl.Expr, pl.Expr]:
        """Both sides of a comparison; a text literal against a date or datetime column is read as one,
        a number against a text column (or text against a number column) is refused."""
        import polars as pl

        lhs, rhs = self.expr(left), self.expr(right)
        for col, lit, flip in ((left, right, False), (right, left, True)):
            if col.kind != "col" or lit.kind != "lit" or lit.value is None:
                continue
            dtype = self.schema[col.value]
            text = isinstance(lit.value, str)
            if text and (dtype == pl.Date or isinstance(dtype, pl.Datetime)):
                conv = (
                    pl.lit(lit.value).str.to_date()
                    if dtype == pl.Date
                    else pl.lit(lit.value).str.to_datetime()
                )
                if flip:
                    lhs = conv.cast(dtype)
                else:
                    rhs = conv.cast(dtype)
            elif text == dtype.is_numeric() and not isinstance(lit.value, bool):
                kind = "text" if text else "a number"
                raise FilterError(
                    f"compares column {col.value!r} ({dtype}) with {kind}; compare like with like"
                )
        return lhs, rhs


def _like_regex(pattern: str, ci: bool) -> str:
    body = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return ("(?is)" if ci else "(?s)") + "^" + body + "$"


_ARITH = {
    "+": lambda x, y: x + y,
    "-": lambda x, y: x - y,
    "*": lambda x, y: x * y,
    "/": lambda x, y: x / y,
    "%": lambda x, y: x % y,
}


def _fn_table() -> dict[str, Any]:
    def coalesce(args: list[pl.Expr]) -> pl.Expr:
        import polars as pl

        return pl.coalesce(args)

    return {
        "lower": lambda a: a[0].str.to_lowercase(),
        "upper": lambda a: a[0].str.to_uppercase(),
        "trim": lambda a: a[0].str.strip_chars(),
        "length": lambda a: a[0].str.len_chars(),
        "char_length": lambda a: a[0].str.len_chars(),
        "abs": lambda a: a[0].abs(),
        "round": lambda a: a[0].round(int(_const(a[1])) if len(a) > 1 else 0),
        "floor": lambda a: a[0].floor(),
        "ceil": lambda a: a[0].ceil(),
        "coalesce": coalesce,
    }


def _const(expr: pl.Expr) -> Any:
    import polars as pl

    try:
        return pl.select(expr).item()
    except Exception:  # noqa: BLE001 - any failure means it was not a constant
        raise FilterError("round()'s second argument must be a whole number") from None


_FUNCS = _fn_table()


def filter_error(where: str, reason: str, exc: FilterError) -> StageInputError:
    """The one message of a refused filter: which filter, and why (never data from outside the source)."""
    return StageInputError(f"filter '{reason or where[:80]}': {exc}")
