"""``deleteWhen`` of ``writeStream.format("ducklake")``: a strict subset of Spark SQL boolean expressions on Arrow.

PySpark's Python stream writer runs ``write()`` in executor Python workers and ``commit()`` in a driver-side Python
worker, neither with a SparkSession, so the expression cannot be handed to Spark as ``ducklake_sink`` does. This
module parses a documented subset and evaluates it with pyarrow compute exactly as Spark would (three-valued logic,
Spark's type coercion, NaN equal to NaN and above every number, -0.0 equal to 0.0, strings by UTF-8 bytes). Whatever
it cannot evaluate exactly as Spark does is refused when the query starts (``InvalidOptionError`` naming the option).

The subset: column references (bare ``[A-Za-z_][A-Za-z0-9_]*`` or backquoted, resolved case-insensitively as Spark's
default does), string literals (``'...'`` or ``"..."``, escapes ``\\' \\" \\\\ \\n \\t \\r``), integer, decimal and
exponent number literals (an optional leading ``-``), ``TRUE``/``FALSE``/``NULL``; ``= <> != < <= > >= <=>`` between
numbers, between strings or between booleans; ``[NOT] IN (...)`` with at most 10 items; ``IS [NOT] NULL``;
``AND``/``OR``/``NOT``; parentheses. Columns may be of integer, float, double, string (binary collation) or boolean
type; a column of another type only in ``IS [NOT] NULL``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Union

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.table.upsert import closest_name

# The kinds of column the subset compares; anything else is OTHER (only IS [NOT] NULL).
INTEGERS = ("int8", "int16", "int32", "int64")
FLOATS = ("float32", "float64")
STRING, BOOL, OTHER = "string", "bool", "other"
_NULL, _DECIMAL = "null", "decimal"  # the kinds of a NULL literal and of an exact (decimal) number literal

MAX_IN_ITEMS = 10  # above this Spark turns IN into InSet, whose hash lookup treats -0.0 and 0.0 as different
_INT64 = (-(2**63), 2**63 - 1)
_INT32 = (-(2**31), 2**31 - 1)
# a decimal literal Spark converts to double with one rounding, as Python does: few enough digits
_DECIMAL_DIGITS = 15
# decimal literals whose common type with a bigint or another such literal stays within Spark's 38 digits
_DECIMAL_INTEGER_DIGITS, _DECIMAL_SCALE = 20, 18

_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "true", "false"})
# words Spark's parser gives a meaning of their own (a bare one is refused: backquote a column of that name)
_RESERVED = _KEYWORDS | frozenset(
    {
        "all", "any", "as", "between", "by", "case", "cast", "collate", "current_date", "current_time",
        "current_timestamp", "current_user", "distinct", "div", "else", "end", "escape", "exists", "from", "ilike",
        "interval", "like", "over", "regexp", "rlike", "select", "session_user", "similar", "some", "then", "try_cast",
        "unknown", "user", "when", "where",
    }
)  # fmt: skip

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n]+)
    |(?P<comment>--|/\*)
    |(?P<quoted>`(?:[^`]|``)*`)
    |(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    |(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    |(?P<word>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op><=>|<=|>=|<>|!=|==|[=<>(),\-])""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
_FLIP = {"=": "=", "<=>": "<=>", "<>": "<>", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class Col:
    name: str  # the batch's own spelling
    kind: str


@dataclass(frozen=True)
class Lit:
    value: object  # None, bool, str, int, Decimal or float
    kind: str


@dataclass(frozen=True)
class Cmp:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class In:
    operand: Node
    items: tuple[Node, ...]
    negated: bool


@dataclass(frozen=True)
class IsNull:
    operand: Node
    negated: bool


@dataclass(frozen=True)
class Logic:
    op: str  # "and", "or", "not" (one argument)
    args: tuple[Node, ...]


Node = Union[Col, Lit, Cmp, In, IsNull, Logic]  # noqa: UP007  (a runtime alias: the dataclasses above use it)


@dataclass(frozen=True)
class DeleteWhen:
    """A parsed ``deleteWhen``: evaluate it with :meth:`flags` on a batch holding :attr:`columns`."""

    text: str
    tree: Node
    columns: tuple[str, ...]  # the batch columns it reads, in the batch's spelling

    def evaluate(self, batch: pa.Table | pa.RecordBatch) -> pa.Array:
        """Spark's three-valued result (true, false or NULL) for every row."""
        return _as_array(_eval(self.tree, batch), batch.num_rows, pa.bool_())

    def flags(self, batch: pa.Table | pa.RecordBatch) -> pa.Array:
        """True where the row deletes its key (NULL counts as false, as in ``ducklake_sink``)."""
        return pc.fill_null(self.evaluate(batch), False)


class _Refused(Exception):
    """Outside the subset; turned into an InvalidOptionError naming the option."""


def compile_delete_when(text: str, columns: Mapping[str, str], option: str = "deleteWhen") -> DeleteWhen:
    """Parse ``text`` over a batch whose columns have the given kinds (:data:`INTEGERS`, :data:`FLOATS`,
    ``"string"``, ``"bool"``, ``"other"``).

    Raises:
        InvalidOptionError: naming ``option``: the text is not a boolean expression of the subset over these
            columns (a function, subquery, arithmetic, unknown column, incomparable types...).
    """
    try:
        parser = _Parser(text, columns)
        tree = parser.parse()
        if _kind(tree) != BOOL:
            raise _Refused("it is not a boolean expression (true deletes the key); compare a column, e.g. \"op = 'd'\"")
    except _Refused as e:
        raise InvalidOptionError(
            f"option {option} {text!r} cannot be evaluated by writeStream.format('ducklake'): {e}. It takes a subset "
            "of Spark SQL (column names, string/number/TRUE/FALSE/NULL literals, = <> != < <= > >= <=>, [NOT] IN, "
            "IS [NOT] NULL, AND, OR, NOT, parentheses; see docs/streaming-sink.md); for any other Spark SQL "
            "expression use foreachBatch(ducklake_sink(..., delete_when=...)), which Spark evaluates"
        ) from None
    return DeleteWhen(text, tree, tuple(dict.fromkeys(parser.used)))


def arrow_kind(t: pa.DataType) -> str:
    """The kind of an Arrow column, for :func:`compile_delete_when`."""
    for name in (*INTEGERS, *FLOATS):
        if t == pa.type_for_alias(name):
            return name
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return STRING
    return BOOL if pa.types.is_boolean(t) else OTHER


# --- parsing ----------------------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str, columns: Mapping[str, str]) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0
        self.columns = dict(columns)
        self.used: list[str] = []

    def parse(self) -> Node:
        if not self.tokens:
            raise _Refused("it is empty")
        node = self._or()
        if self.pos < len(self.tokens):
            raise _Refused(f"unexpected {self.tokens[self.pos][1]!r}")
        return node

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _word(self, *words: str) -> bool:
        tok = self._peek()
        if tok is not None and tok[0] == "word" and tok[1].lower() in words:
            self.pos += 1
            return True
        return False

    def _op(self, *ops: str) -> str | None:
        tok = self._peek()
        if tok is not None and tok[0] == "op" and tok[1] in ops:
            self.pos += 1
            return tok[1]
        return None

    def _expect(self, op: str) -> None:
        if self._op(op) is None:
            tok = self._peek()
            raise _Refused(f"expected {op!r} but found {'the end' if tok is None else repr(tok[1])}")

    def _or(self) -> Node:
        args = [self._and()]
        while self._word("or"):
            args.append(self._and())
        return args[0] if len(args) == 1 else _logic("or", args)

    def _and(self) -> Node:
        args = [self._not()]
        while self._word("and"):
            args.append(self._not())
        return args[0] if len(args) == 1 else _logic("and", args)

    def _not(self) -> Node:
        if self._word("not"):
            return _logic("not", [self._not()])
        return self._predicate()

    def _predicate(self) -> Node:
        left = self._operand()
        op = self._op("=", "<=>", "<>", "!=", "<", "<=", ">", ">=", "==")
        if op == "==":
            raise _Refused("'==' is outside the subset; write '='")
        if op is not None:
            right = self._operand()
            _comparable([left, right], op)
            _not_folded(op, left, right)
            return Cmp(op, left, right)
        if self._word("is"):
            negated = self._word("not")
            if not self._word("null"):
                raise _Refused("only IS NULL and IS NOT NULL are in the subset")
            return IsNull(left, negated)
        negated = self._word("not")
        if self._word("in"):
            self._expect("(")
            items = [self._operand()]
            while self._op(","):
                items.append(self._operand())
            self._expect(")")
            if len(items) > MAX_IN_ITEMS:
                raise _Refused(f"an IN list of more than {MAX_IN_ITEMS} items is outside the subset")
            _comparable([left, *items], "IN")
            return In(left, tuple(items), negated)
        if negated:
            raise _Refused("NOT here must be followed by IN")
        return left

    def _operand(self) -> Node:
        tok = self._peek()
        if tok is None:
            raise _Refused("it ends where a value was expected")
        kind, text = tok
        self.pos += 1
        if kind == "op" and text == "(":
            inner = self._or()
            self._expect(")")
            return inner
        if kind == "op" and text == "-":
            nxt = self._peek()
            if nxt is None or nxt[0] != "number":
                raise _Refused("'-' is in the subset only before a number literal (no arithmetic)")
            self.pos += 1
            return _number("-" + nxt[1])
        if kind == "number":
            return _number(text)
        if kind == "string":
            return Lit(_unescape(text), STRING)
        if kind == "quoted":
            return self._column(text[1:-1].replace("``", "`"))
        if kind == "word":
            lower = text.lower()
            if lower == "null":
                return Lit(None, _NULL)
            if lower in ("true", "false"):
                return Lit(lower == "true", BOOL)
            nxt = self._peek()
            if nxt is not None and nxt == ("op", "("):
                raise _Refused(f"function calls ({text}(...)) are outside the subset")
            if lower == "select":
                raise _Refused("subqueries are outside the subset")
            if lower in _RESERVED:
                raise _Refused(f"{text!r} is an SQL keyword here; backquote a column of that name (`{text}`)")
            return self._column(text)
        raise _Refused(f"unexpected {text!r}")

    def _column(self, name: str) -> Col:
        # Spark's default resolver ignores case
        matches = [c for c in self.columns if c == name or c.lower() == name.lower() or c.upper() == name.upper()]
        if len(matches) > 1:
            raise _Refused(f"column {name!r} is ambiguous: {', '.join(matches)} (names are case-insensitive)")
        if matches and matches[0] != name and not (name.isascii() and matches[0].isascii()):
            # beyond ASCII Java's case rules are not Python's
            raise _Refused(f"column {name!r}: write it exactly as the stream names it ({matches[0]!r})")
        if not matches:
            names = list(self.columns)
            raise _Refused(
                f"column {name!r} is not in the stream's columns ({', '.join(names)}){closest_name(name, names)}"
            )
        self.used.append(matches[0])
        return Col(matches[0], self.columns[matches[0]])


def _tokenize(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _Refused(f"unexpected character {text[pos]!r} at position {pos}")
        kind = m.lastgroup or ""
        value = m.group()
        if kind == "comment":
            raise _Refused("comments are outside the subset")
        if kind == "quoted" and value == "``":
            raise _Refused("an empty backquoted name")
        pos = m.end()
        if kind == "number" and pos < len(text) and (text[pos].isalnum() or text[pos] == "_"):
            raise _Refused(f"number {value + text[pos]!r}...: typed literals (1L, 1D, 1BD...) are outside the subset")
        if kind != "ws":
            out.append((kind, value))
    return out


def _unescape(literal: str) -> str:
    body = literal[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise _Refused(f"the escape \\{nxt} is outside the subset (only \\' \\\" \\\\ \\n \\t \\r)")
            out.append(_ESCAPES[nxt])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _number(text: str) -> Lit:
    if "e" in text.lower():
        value = float(text)
        if math.isinf(value):
            raise _Refused(f"number {text} is out of the range of a double")
        return Lit(value, "float64")
    if "." in text:
        return _decimal(text, Decimal(text))
    n = int(text)
    if _INT32[0] <= n <= _INT32[1]:
        return Lit(n, "int32")
    if _INT64[0] <= n <= _INT64[1]:
        return Lit(n, "int64")
    return _decimal(text, Decimal(n))  # Spark: a decimal(n, 0) literal


def _decimal(text: str, d: Decimal) -> Lit:
    """A decimal literal small enough that Spark compares it exactly with any integer or other such literal (their
    common decimal type fits Spark's 38 digits without rounding)."""
    _, digits, exponent = d.as_tuple()
    scale = max(0, -exponent) if isinstance(exponent, int) else 0
    if scale > _DECIMAL_SCALE or len(digits) - scale > _DECIMAL_INTEGER_DIGITS:
        raise _Refused(
            f"number {text} has more than {_DECIMAL_INTEGER_DIGITS} digits before the point or {_DECIMAL_SCALE} after "
            "it (Spark would round it)"
        )
    return Lit(d, _DECIMAL)


def _logic(op: str, args: list[Node]) -> Logic:
    for a in args:
        if _kind(a) not in (BOOL, _NULL):
            raise _Refused(f"{op.upper()} takes boolean operands, not {_describe(a)}")
    return Logic(op, tuple(args))


def _kind(node: Node) -> str:
    if isinstance(node, (Col, Lit)):
        return node.kind
    return BOOL


def _describe(node: Node) -> str:
    if isinstance(node, Col):
        return f"column {node.name!r} ({node.kind})"
    if isinstance(node, Lit):
        return f"literal {node.value!r}"
    return "a condition"


def _family(kind: str) -> str:
    if kind in INTEGERS or kind in FLOATS or kind == _DECIMAL:
        return "number"
    return kind


def _comparable(nodes: list[Node], op: str) -> None:
    """Spark compares these without a cast that may fail or lose more than Spark's own (else refused)."""
    typed = [n for n in nodes if _kind(n) != _NULL]
    for n in typed:
        if _kind(n) == OTHER:
            raise _Refused(f"{_describe(n)} is of a type the subset compares only with IS [NOT] NULL")
    families = {_family(_kind(n)) for n in typed}
    if len(families) > 1:
        raise _Refused(
            f"{op} between {' and '.join(sorted(families))} values is outside the subset (Spark would cast them)"
        )
    target = _common([_kind(n) for n in typed])
    if target in FLOATS:
        for n in typed:
            if isinstance(n, Lit) and isinstance(n.value, Decimal):
                exponent, digits = n.value.as_tuple().exponent, len(n.value.as_tuple().digits)
                if digits > _DECIMAL_DIGITS or (isinstance(exponent, int) and -exponent > _DECIMAL_DIGITS):
                    raise _Refused(
                        f"number {n.value} compared with a floating-point value has more than {_DECIMAL_DIGITS} "
                        "digits; write it as a double (1.5e0)"
                    )


def _not_folded(op: str, left: Node, right: Node) -> None:
    """Spark's analyzer folds an integer compared by order with a decimal literal beyond the bigint range into a
    constant, NULL rows included (``i < 9223372036854775808`` is true where ``i`` is NULL): refused."""
    if op not in ("<", "<=", ">", ">="):
        return
    for a, b in ((left, right), (right, left)):
        if _kind(a) in INTEGERS and isinstance(b, Lit) and isinstance(b.value, Decimal):
            if not _INT64[0] <= b.value <= _INT64[1]:
                raise _Refused(
                    f"comparing integers by order with {b.value}, beyond the bigint range, is outside the subset "
                    "(Spark makes it a constant, even for NULL)"
                )


def _common(kinds: list[str]) -> str:
    """The type Spark compares these kinds in: float64, float32, exact (integers and decimals), or the one kind."""
    if not kinds:
        return _NULL
    if any(k in INTEGERS or k in FLOATS or k == _DECIMAL for k in kinds):
        if "float64" in kinds or ("float32" in kinds and _DECIMAL in kinds):
            return "float64"
        if "float32" in kinds:
            return "float32"
        return "exact"
    return kinds[0]


# --- evaluation -------------------------------------------------------------------------------------------------

Value = Union[pa.Array, pa.ChunkedArray, object]  # noqa: UP007  (an array, or a constant for a literal)


def _as_array(value: Value, n: int, type_: pa.DataType) -> pa.Array:
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks() if value.num_chunks != 1 else value.chunk(0)
    if isinstance(value, pa.Array):
        return value
    return pa.nulls(n, type_) if value is None else pa.repeat(pa.scalar(value, type_), n)


def _eval(node: Node, batch: pa.Table | pa.RecordBatch) -> Value:
    n = batch.num_rows
    if isinstance(node, Col):
        return _as_array(batch.column(node.name), n, pa.null())
    if isinstance(node, Lit):
        return node.value
    if isinstance(node, Logic):
        args = [_as_array(_eval(a, batch), n, pa.bool_()) for a in node.args]
        if node.op == "not":
            return pc.invert(args[0])
        out = args[0]
        for a in args[1:]:
            out = pc.and_kleene(out, a) if node.op == "and" else pc.or_kleene(out, a)
        return out
    if isinstance(node, IsNull):
        value = _eval(node.operand, batch)
        if not isinstance(value, pa.Array):
            return pa.repeat(pa.scalar((value is None) != node.negated), n)
        nulls = pc.is_null(value)
        return pc.invert(nulls) if node.negated else nulls
    if isinstance(node, In):
        target = _common([_kind(x) for x in (node.operand, *node.items) if _kind(x) != _NULL])
        left = _eval(node.operand, batch)
        out = None
        for item in node.items:
            eq = _compare("=", left, _eval(item, batch), target, n)
            out = eq if out is None else pc.or_kleene(out, eq)
        assert out is not None
        return pc.invert(out) if node.negated else out
    assert isinstance(node, Cmp)
    target = _common([_kind(x) for x in (node.left, node.right) if _kind(x) != _NULL])
    return _compare(node.op, _eval(node.left, batch), _eval(node.right, batch), target, n)


def _compare(op: str, left: Value, right: Value, target: str, n: int) -> pa.Array:
    """``left op right`` as Spark compares them in ``target``; NULL when either is NULL (``<=>``: never NULL)."""
    lnull, rnull = _nulls(left, n), _nulls(right, n)
    if op == "<=>":
        both = pc.and_(lnull, rnull)
        either = pc.or_(lnull, rnull)
        if target == _NULL:
            return both
        eq = pc.fill_null(_compare("=", left, right, target, n), False)
        return pc.or_(both, pc.and_(pc.invert(either), eq))
    if target == _NULL or left is None or right is None:
        return pa.nulls(n, pa.bool_())
    if op in ("<>", "!="):
        return pc.invert(_compare("=", left, right, target, n))
    if target == "exact":
        return _compare_exact(op, left, right, n)
    if target in FLOATS:
        return _compare_floats(op, _floats(left, target, n), _floats(right, target, n))
    if target == BOOL:
        left, right = _as_array(left, n, pa.bool_()), _as_array(right, n, pa.bool_())
        if op != "=":
            left, right = pc.cast(left, pa.int8()), pc.cast(right, pa.int8())
    else:
        left, right = _as_array(left, n, pa.string()), _as_array(right, n, pa.string())
    return _plain(op, left, right)


def _nulls(value: Value, n: int) -> pa.Array:
    if isinstance(value, pa.Array):
        return pc.is_null(value)
    return pa.repeat(pa.scalar(value is None), n)


def _plain(op: str, left: pa.Array, right: pa.Array) -> pa.Array:
    fn = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}[op]
    return fn(left, right)


def _floats(value: Value, target: str, n: int) -> pa.Array:
    type_ = pa.float32() if target == "float32" else pa.float64()
    if isinstance(value, pa.Array):
        return value if value.type == type_ else pc.cast(value, type_, safe=False)
    if target == "float32":  # only integers meet float32 here: one rounding, as the JVM's long-to-float
        return pa.repeat(pc.cast(pa.scalar(value, pa.int64()), type_, safe=False), n)
    return pa.repeat(pa.scalar(float(value), type_), n)  # type: ignore[arg-type]


def _compare_floats(op: str, left: pa.Array, right: pa.Array) -> pa.Array:
    """Spark's order of floating-point values: NaN equals NaN and is above everything; -0.0 equals 0.0."""
    lnan, rnan = pc.is_nan(left), pc.is_nan(right)
    if op == "=":
        return pc.or_(pc.equal(left, right), pc.and_(lnan, rnan))
    if op in (">", ">="):
        return _compare_floats("<" if op == ">" else "<=", right, left)
    less = pc.or_(pc.less(left, right), pc.and_(pc.invert(lnan), rnan))
    if op == "<":
        return less
    return pc.or_(less, _compare_floats("=", left, right))


def _compare_exact(op: str, left: Value, right: Value, n: int) -> pa.Array:
    """Integers and decimal literals compared exactly (Spark widens them to a decimal that holds both)."""
    if not isinstance(left, pa.Array) and isinstance(right, pa.Array):
        return _compare_exact(_FLIP[op], right, left, n)
    if not isinstance(left, pa.Array):  # two literals
        a, b = Decimal(left), Decimal(right)  # type: ignore[arg-type]
        result = {"=": a == b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        return pa.repeat(pa.scalar(result), n)
    left = pc.cast(left, pa.int64())
    if isinstance(right, pa.Array):
        return _plain(op, left, pc.cast(right, pa.int64()))
    d = Decimal(right)  # type: ignore[arg-type]
    valid = pc.is_valid(left)
    if op == "=":
        if d != d.to_integral_value() or not _INT64[0] <= d <= _INT64[1]:
            return _constant(False, valid)
        return pc.equal(left, int(d))
    # x < d: x < ceil(d); x <= d: x <= floor(d); x > d: x > floor(d); x >= d: x >= ceil(d)
    bound = math.ceil(d) if op in ("<", ">=") else math.floor(d)
    if bound > _INT64[1]:
        return _constant(op in ("<", "<="), valid)
    if bound < _INT64[0]:
        return _constant(op in (">", ">="), valid)
    return _plain(op, left, pa.repeat(pa.scalar(bound, pa.int64()), len(left)))


def _constant(value: bool, valid: pa.Array) -> pa.Array:
    """``value`` where ``valid``, NULL elsewhere."""
    return pc.if_else(valid, pa.scalar(value), pa.scalar(None, pa.bool_()))
