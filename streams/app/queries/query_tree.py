"""What a user's own query may contain, judged on ClickHouse's syntax tree, not its text.

The tree is what ``parseQueryToJSON`` returns, so every quoting, comment and heredoc trick
has already been resolved by the same parser that would run the query. The judgement is an
allow-list: exactly one SELECT (UNION, INTERSECT and EXCEPT of SELECTs, WITH and subqueries
included) over the store's own tables, made of the node kinds listed here. Anything the list
does not name is refused, so a node kind added by a later ClickHouse is refused until it is
read and added, never run unjudged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass
from typing import Any

from streams.app.queries.named_queries import QueryError
from streams.app.queries.query_functions import FunctionCatalogue

__all__ = ["Allowed", "judge", "parameter_names", "statement_word"]

SELECT_NODES = frozenset(
    {
        "SelectWithUnionQuery",
        "SelectIntersectExceptQuery",
        "SelectQuery",
        "ExpressionList",
        "Identifier",
        "TableIdentifier",
        "Literal",
        "Function",
        "Asterisk",
        "QualifiedAsterisk",
        "ColumnsRegexpMatcher",
        "ColumnsListMatcher",
        "QualifiedColumnsRegexpMatcher",
        "QualifiedColumnsListMatcher",
        "ColumnsApplyTransformer",
        "ColumnsExceptTransformer",
        "ColumnsReplaceTransformer",
        "ColumnsReplaceTransformerReplacement",
        "ColumnsTransformerList",
        "TablesInSelectQuery",
        "TablesInSelectQueryElement",
        "TableExpression",
        "TableJoin",
        "ArrayJoin",
        "Subquery",
        "WithElement",
        "OrderByElement",
        "InterpolateElement",
        "WindowDefinition",
        "WindowListElement",
        "QueryParameter",
        "SampleRatio",
    }
)
"""Every node kind a read over tables needs; each was seen in the tree of a real query."""

STATEMENT_WORDS: Mapping[str, str] = {
    "InsertQuery": "INSERT",
    "CreateQuery": "CREATE",
    "DropQuery": "DROP or TRUNCATE",
    "AlterQuery": "ALTER",
    "SystemQuery": "SYSTEM",
    "SetQuery": "SET",
    "UseQuery": "USE",
    "ExplainQuery": "EXPLAIN",
    "OptimizeQuery": "OPTIMIZE",
    "RenameQuery": "RENAME",
    "ShowTablesQuery": "SHOW",
    "DescribeQuery": "DESCRIBE (gpufrag sql --schema lists every table and its columns)",
}

OUTPUT_CLAUSES: Mapping[str, str] = {
    "out_file": "INTO OUTFILE (gpufrag sql prints; redirect its output to keep it)",
    "format_ast": "a FORMAT clause (use --format table, csv or json)",
    "settings_ast": "a SETTINGS clause (the limits are gpufrag's settings: GPUFRAG_SQL__*)",
    "compression": "INTO OUTFILE ... COMPRESSION",
}

_IN_FAMILY = re.compile(r"^(global)?(not)?(null)?in(ignoreset)?$", re.IGNORECASE)
"""``x IN t`` reads table ``t``: the right side of these is judged as a table."""


@dataclass(frozen=True, slots=True)
class Allowed:
    """What the store holds: the only tables a query may name, and its database."""

    tables: Set[str]
    database: str
    functions: FunctionCatalogue
    """What each function name is: refused with a reason, known, or unknown."""


def judge(tree: Mapping[str, Any], allowed: Allowed) -> None:
    """Return when ``tree`` is one read of the store's tables; else a one-line QueryError."""
    kind = tree.get("type")
    if kind != "SelectWithUnionQuery":
        raise _refused(
            f"gpufrag sql runs one SELECT (or WITH ... SELECT), not {statement_word(kind)}"
        )
    names = _defined_names(tree)
    for node in _nodes(tree):
        _judge_node(node, allowed, names)


def statement_word(kind: object) -> str:
    """A parser node kind in the user's words: ``ShowCreateTableQuery__runs`` -> ``SHOW CREATE
    TABLE``."""
    name = str(kind).split("__", 1)[0]
    if name in STATEMENT_WORDS:
        return STATEMENT_WORDS[name]
    words = re.findall(r"[A-Z][a-z0-9]*", name.removesuffix("Query"))
    return " ".join(words).upper() or name


def parameter_names(tree: Mapping[str, Any]) -> set[str]:
    """The ``{name:Type}`` placeholders of the query (only real ones: not text in a string)."""
    return {str(n["name"]) for n in _nodes(tree) if n.get("type") == "QueryParameter"}


def _judge_node(node: Mapping[str, Any], allowed: Allowed, names: Set[str]) -> None:
    kind = node.get("type")
    if kind == "SetQuery":
        raise _refused(OUTPUT_CLAUSES["settings_ast"])
    if kind not in SELECT_NODES:
        raise _refused(f"it holds {statement_word(kind)}, which gpufrag sql does not run")
    for key, what in OUTPUT_CLAUSES.items():
        if node.get(key) is not None:
            raise _refused(what)
    if node.get("is_into_outfile_with_stdout"):
        raise _refused(OUTPUT_CLAUSES["out_file"])
    if kind == "TableExpression" and node.get("table_function") is not None:
        name = node["table_function"].get("name", "?")
        raise _refused(
            f"table function {name}() reads outside gpufrag's tables (table functions such "
            "as file, url, remote, s3 and executable are all refused)"
        )
    if kind == "TableIdentifier":
        _judge_table(node, allowed, names)
    elif kind == "Function":
        _judge_function(str(node.get("name", "")), node, allowed, names)
    elif kind == "ColumnsApplyTransformer":
        _judge_function(str(node.get("func_name", "")), {}, allowed, names)


def _judge_function(name: str, node: Mapping[str, Any], allowed: Allowed, names: Set[str]) -> None:
    why = allowed.functions.refusal(name)
    if why is not None:
        raise _refused(f"function {name}() {why}")
    if _IN_FAMILY.match(name):
        args = (node.get("arguments") or {}).get("children") or []
        if len(args) == 2 and args[1].get("type") == "Identifier":
            _judge_table(args[1], allowed, names)


def _judge_table(node: Mapping[str, Any], allowed: Allowed, names: Set[str]) -> None:
    parts = [str(p) for p in node.get("name_parts") or str(node.get("name", "")).split(".")]
    if not any(parts):
        raise _refused("a table cannot be a query parameter: name one of gpufrag's tables")
    if len(parts) == 1 and (parts[0] in allowed.tables or parts[0] in names):
        return
    if len(parts) == 2 and parts[0] == allowed.database and parts[1] in allowed.tables:
        return
    shown = ".".join(parts)
    raise _refused(
        f"{shown} is not one of gpufrag's tables (gpufrag sql --schema lists them; system "
        "tables and other databases are not read)"
    )


def _defined_names(tree: Mapping[str, Any]) -> set[str]:
    """The CTE names the query defines (``WITH t AS (SELECT ...)``): ``FROM t`` and ``x IN t``
    may name them. Not aliases: ``FROM x AS x`` would otherwise pass any ``x`` (a file name,
    in a database whose engine reads files by name)."""
    return {
        str(node["name"])
        for node in _nodes(tree)
        if node.get("type") == "WithElement" and node.get("name")
    }


def _nodes(tree: Any) -> Iterator[Mapping[str, Any]]:
    """Every dict in the tree that names a node kind, depth first (iterative: a deep tree
    must not hit Python's recursion limit; the parser already bounds its depth)."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "type" in item:
                yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _refused(why: str) -> QueryError:
    return QueryError(f"--query refused: {why}")
