"""The grammar of the Datalog subset (Soufflé's syntax), for lark's LALR parser.

Statements: ``.decl name(attr: type, ...)``, ``.input name, ...`` and ``.output name, ...``
(optionally with Soufflé's ``(key=value, ...)`` parameters), facts ``r(1, "a").`` and rules
``h(x) :- b1(x, _), !b2(x), x < 3, y = x + 1, c = count : { b3(x, _) }.`` (several heads
``h1(x), h2(x) :- ...`` give one rule each). Comments are ``//`` to the end of the line and
``/* ... */``. See Soufflé's documentation, "Rules" and "Aggregates"
(https://souffle-lang.github.io/rules, https://souffle-lang.github.io/aggregates).
"""

from __future__ import annotations

import functools

import lark

__all__ = ["GRAMMAR", "parser"]

GRAMMAR = r"""
start: statement*

?statement: declaration
          | directive
          | clause

declaration: ".decl" NAME "(" [attribute ("," attribute)*] ")"
attribute: NAME ":" NAME

directive: DIRECTIVE NAME ("," NAME)* [parameters]
parameters: "(" [parameter ("," parameter)*] ")"
parameter: NAME COMPARE (STRING | NAME | INT)

clause: heads "."                      -> fact
      | heads ":-" body "."            -> rule
heads: atom ("," atom)*
body: literal ("," literal)*

?literal: atom
        | "!" atom                     -> negation
        | expr COMPARE expr            -> comparison

atom: NAME "(" [expr ("," expr)*] ")"

?expr: sum
?sum: product
    | sum PLUS product                 -> binop
    | sum MINUS product                -> binop
?product: unary
        | product TIMES unary          -> binop
        | product DIVIDE unary         -> binop
        | product MODULO unary         -> binop
?unary: primary
      | "-" unary                      -> negative
?primary: NAME                         -> var
        | "_"                          -> wildcard
        | INT                          -> integer
        | FLOAT                        -> float
        | STRING                       -> string
        | "(" expr ")"
        | aggregate
aggregate: AGGREGATE [expr] ":" aggregate_body
aggregate_body: atom
              | "{" body "}"

DIRECTIVE.2: ".input" | ".output"
AGGREGATE.2: /(count|sum|min|max)(?![A-Za-z0-9_])/
COMPARE: "!=" | "<=" | ">=" | "=" | "<" | ">"
PLUS: "+"
MINUS: "-"
TIMES: "*"
DIVIDE: "/"
MODULO: "%"
NAME: /[A-Za-z_][A-Za-z0-9_?]*/
FLOAT.2: /\d+\.\d+([eE][-+]?\d+)?/
INT: /\d+/
STRING: /"([^"\\\n]|\\.)*"/

COMMENT: /\/\/[^\n]*/
BLOCK_COMMENT: /\/\*(.|\n)*?\*\//
%import common.WS
%ignore WS
%ignore COMMENT
%ignore BLOCK_COMMENT
"""
"""The lark grammar (LALR(1))."""


@functools.lru_cache(maxsize=1)
def parser() -> lark.Lark:
    """The LALR parser of :data:`GRAMMAR`, built once (with line and column on every node)."""
    return lark.Lark(
        GRAMMAR,
        parser="lalr",
        lexer="basic",  # ".decl" is one token everywhere: a missing "." is reported before it
        propagate_positions=True,
        maybe_placeholders=True,
    )
