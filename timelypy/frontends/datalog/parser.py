"""Parse Datalog text into a :class:`~.syntax.Program`; syntax errors become DatalogError.

``parse(text, source)`` runs the LALR parser of :mod:`.grammar` and turns lark's tree into the
frozen nodes of :mod:`.syntax`, keeping each node's line and column and each rule's text. A
syntax error names the line, the column, the token found and what was expected there.
"""

from __future__ import annotations

import ast as python_ast
from typing import Any, List, Sequence, Tuple

import lark
from lark import Token, Transformer, v_args

from ...errors import DatalogError
from . import syntax as s
from .grammar import parser

__all__ = ["parse"]

_TOKEN_WORDS = {
    "DOT": '"."',
    "COMMA": '","',
    "LPAR": '"("',
    "RPAR": '")"',
    "LBRACE": '"{"',
    "RBRACE": '"}"',
    "COLON": '":"',
    "IF": '":-"',
    "BANG": '"!"',
    "NAME": "a name",
    "INT": "a number",
    "FLOAT": "a float",
    "STRING": "a string",
    "COMPARE": "a comparison",
    "AGGREGATE": "an aggregate",
    "DIRECTIVE": "a directive",
    "PLUS": '"+"',
    "MINUS": '"-"',
    "TIMES": '"*"',
    "DIVIDE": '"/"',
    "MODULO": '"%"',
    "EQUAL": '"="',
    "UNDERSCORE": '"_"',
    "$END": "the end of the program",
}


def _words(expected: Sequence[str]) -> str:
    names = sorted({_TOKEN_WORDS.get(e, e) for e in expected if not e.startswith("__")})
    return ", ".join(names) if names else "something else"


def parse(text: str, source: str = "<program>") -> s.Program:
    """The program ``text`` as a syntax tree; ``source`` names it in error messages.

    Raises :class:`~timelypy.errors.DatalogError` (with line and column) on a syntax error."""
    try:
        tree = parser().parse(text)
    except lark.UnexpectedToken as e:
        found = "end of the program" if e.token.type == "$END" else repr(str(e.token))
        rest = text[e.token.end_pos :] if e.token.end_pos is not None else ""
        words = rest.split("(", 1)[0].split(None, 1)
        word = words[0] if words and not rest[:1].isspace() else ""
        if str(e.token) == "." and word.isidentifier():
            expected = f"(the directive .{word} is not supported; .decl, .input, .output are)"
        else:
            expected = f"expected {_words(list(e.expected))}"
        raise DatalogError(
            f"syntax error: unexpected {found}; {expected}",
            source=source,
            line=e.line if e.line and e.line > 0 else _last_line(text),
            column=e.column if e.column and e.column > 0 else 1,
        ) from None
    except lark.UnexpectedCharacters as e:
        at = e.pos_in_stream or 0
        char = text[at] if at < len(text) else ""
        raise DatalogError(
            f"syntax error: unexpected character {char!r}",
            source=source,
            line=e.line,
            column=e.column,
        ) from None
    except lark.UnexpectedEOF as e:
        raise DatalogError(
            f"syntax error: the program ends early; expected {_words(list(e.expected))}",
            source=source,
            line=_last_line(text),
            column=1,
        ) from None
    try:
        return _Build(text, source).transform(tree)
    except lark.exceptions.VisitError as e:  # a check inside a callback: its own error
        if isinstance(e.orig_exc, DatalogError):
            raise e.orig_exc from None
        raise


def _last_line(text: str) -> int:
    return text.count("\n") + 1


def _pos(meta: Any) -> Tuple[int, int]:
    return (getattr(meta, "line", 0) or 0, getattr(meta, "column", 0) or 0)


@v_args(meta=True)
class _Build(Transformer):
    """lark tree -> syntax nodes."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__()
        self.text = text
        self.source = source

    def _text(self, meta: Any) -> str:
        if getattr(meta, "empty", True):
            return ""
        return " ".join(self.text[meta.start_pos : meta.end_pos].split())

    def start(self, meta: Any, items: List[Any]) -> s.Program:
        decls, dirs, facts, rules = [], [], [], []
        for item in items:
            if isinstance(item, s.Declaration):
                decls.append(item)
            elif isinstance(item, list) and item and isinstance(item[0], s.Directive):
                dirs.extend(item)
            elif isinstance(item, list) and item and isinstance(item[0], s.Fact):
                facts.extend(item)
            else:
                rules.extend(item)
        return s.Program(
            tuple(decls), tuple(dirs), tuple(facts), tuple(rules), self.source, self.text
        )

    def declaration(self, meta: Any, items: List[Any]) -> s.Declaration:
        name, *attrs = items
        attributes = tuple(a for a in attrs if a is not None)
        return s.Declaration(str(name), attributes, *_pos(meta))

    def attribute(self, meta: Any, items: List[Any]) -> Tuple[str, str]:
        name, type_ = items
        if str(type_) not in s.TYPES:
            raise DatalogError(
                f"unknown type {str(type_)!r} of attribute {str(name)!r} (one of "
                f"{', '.join(s.TYPES)})",
                source=self.source,
                line=type_.line,
                column=type_.column,
            )
        return (str(name), str(type_))

    def directive(self, meta: Any, items: List[Any]) -> List[s.Directive]:
        kind = str(items[0])[1:]
        params = items[-1] if isinstance(items[-1], tuple) else ()
        names = [t for t in items[1:] if isinstance(t, Token)]
        return [s.Directive(kind, str(n), params, n.line or 0, n.column or 0) for n in names]

    def parameters(self, meta: Any, items: List[Any]) -> Tuple[Tuple[str, Any], ...]:
        return tuple(p for p in items if p is not None)

    def parameter(self, meta: Any, items: List[Any]) -> Tuple[str, Any]:
        key, sign, value = items
        if str(sign) != "=":
            raise DatalogError(
                f"a directive's parameter is key=value, got {str(sign)!r}",
                source=self.source,
                line=sign.line,
                column=sign.column,
            )
        if value.type == "STRING":
            return (str(key), python_ast.literal_eval(str(value)))
        if value.type == "INT":
            return (str(key), int(value))
        return (str(key), str(value))

    def fact(self, meta: Any, items: List[Any]) -> List[s.Fact]:
        (heads,) = items
        text = self._text(meta)
        return [s.Fact(h, text, h.line, h.column) for h in heads]

    def rule(self, meta: Any, items: List[Any]) -> List[s.Rule]:
        heads, body = items
        text = self._text(meta)
        return [s.Rule(h, tuple(body), text, h.line, h.column) for h in heads]

    def heads(self, meta: Any, items: List[Any]) -> List[s.Atom]:
        return list(items)

    def body(self, meta: Any, items: List[Any]) -> List[Any]:
        return list(items)

    def negation(self, meta: Any, items: List[Any]) -> s.Negation:
        return s.Negation(items[0], *_pos(meta))

    def comparison(self, meta: Any, items: List[Any]) -> s.Comparison:
        left, op, right = items
        return s.Comparison(str(op), left, right, *_pos(meta))

    def atom(self, meta: Any, items: List[Any]) -> s.Atom:
        name, *args = items
        return s.Atom(str(name), tuple(a for a in args if a is not None), *_pos(meta))

    def binop(self, meta: Any, items: List[Any]) -> s.Term:
        left, op, right = items
        return s.BinOp(str(op), left, right, *_pos(meta))

    def negative(self, meta: Any, items: List[Any]) -> s.Term:
        (term,) = items
        if isinstance(term, s.Const) and term.type != "symbol":
            return s.Const(-term.value, term.type, *_pos(meta))
        return s.Negative(term, *_pos(meta))

    def var(self, meta: Any, items: List[Any]) -> s.Var:
        return s.Var(str(items[0]), *_pos(meta))

    def wildcard(self, meta: Any, items: List[Any]) -> s.Wildcard:
        return s.Wildcard(*_pos(meta))

    def integer(self, meta: Any, items: List[Any]) -> s.Const:
        return s.Const(int(items[0]), "number", *_pos(meta))

    def float(self, meta: Any, items: List[Any]) -> s.Const:
        return s.Const(float(items[0]), "float", *_pos(meta))

    def string(self, meta: Any, items: List[Any]) -> s.Const:
        return s.Const(python_ast.literal_eval(str(items[0])), "symbol", *_pos(meta))

    def aggregate(self, meta: Any, items: List[Any]) -> s.AggregateTerm:
        kind, value, body = items
        kind = str(kind)
        if kind == "count" and value is not None:
            raise DatalogError(
                "count takes no value expression (count : { body })",
                source=self.source,
                line=meta.line,
                column=meta.column,
            )
        if kind != "count" and value is None:
            raise DatalogError(
                f"{kind} needs a value expression ({kind} x : {{ body }})",
                source=self.source,
                line=meta.line,
                column=meta.column,
            )
        return s.AggregateTerm(kind, value, tuple(body), *_pos(meta))

    def aggregate_body(self, meta: Any, items: List[Any]) -> List[Any]:
        (inner,) = items
        return inner if isinstance(inner, list) else [inner]
