"""Ops in the API's JSON encoding (docs/api.md "JSON encoding"), as `bwctl submit` reads
them one per line, turned into the generated `Op` messages the client sends."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from typing import Any

from .v1.bulkwrite_pb2 import Field, Op, OpType, Value

_OP_TYPES = {"create": OpType.CREATE, "update": OpType.UPDATE, "upsert": OpType.UPSERT, "delete": OpType.DELETE}
_OP_MEMBERS = {"op", "object_type", "id", "shard_key", "fields"}
_U64_MAX = (1 << 64) - 1
_I64 = (-(1 << 63), (1 << 63) - 1)


class OpError(ValueError):
    """An op that cannot be encoded; `line` is its line in the file (1-based) when read
    from one."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


def _value(name: str, v: Any) -> tuple[Value, bool]:
    """A column's JSON value as a Value, and whether it is an increment."""
    if isinstance(v, dict):
        if set(v) == {"increment"}:
            inc, _ = _value(name, v["increment"])
            if inc.WhichOneof("kind") not in ("int_value", "double_value"):
                raise OpError(f"fields.{name}: an increment is a number")
            return inc, True
        if set(v) == {"base64"} and isinstance(v["base64"], str):
            s = v["base64"].replace("-", "+").replace("_", "/")
            try:  # standard or URL-safe alphabet, padding optional, as the proxy takes it
                return Value(bytes_value=base64.b64decode(s + "=" * (-len(s) % 4), validate=True)), False
            except binascii.Error as e:
                raise OpError(f"fields.{name}: bad base64 ({e})") from None
        raise OpError(f'fields.{name}: an object value is {{"increment": n}} or {{"base64": "..."}}')
    if v is None:
        return Value(null_value=True), False
    if isinstance(v, bool):  # before int: a bool is an int in Python
        return Value(bool_value=v), False
    if isinstance(v, int):
        if not _I64[0] <= v <= _I64[1]:
            raise OpError(f"fields.{name}: {v} is beyond 64 bits")
        return Value(int_value=v), False
    if isinstance(v, float):
        return Value(double_value=v), False
    if isinstance(v, str):
        return Value(string_value=v.encode("utf-8")), False
    if isinstance(v, bytes):
        return Value(bytes_value=v), False
    raise OpError(f"fields.{name}: a {type(v).__name__} is not a column value")


def op_from_json(d: dict[str, Any]) -> Op:
    """One op as a dict of the API's JSON encoding (`{"op": "create", "object_type":
    "pin", "id": 7, "shard_key": "42", "fields": {"title": "x", "likes": {"increment":
    1}}}`) as an `Op`. Raises OpError on what the proxy would refuse as malformed."""
    if not isinstance(d, dict):
        raise OpError("an op is a JSON object")
    extra = set(d) - _OP_MEMBERS
    if extra:
        raise OpError(f'unknown member "{sorted(extra)[0]}"')
    word = d.get("op")
    if not isinstance(word, str) or word.lower() not in _OP_TYPES:
        raise OpError(f"op: {word!r} is not create, update, upsert or delete")
    kw: dict[str, Any] = {"op": _OP_TYPES[word.lower()]}
    if "object_type" in d:
        if not isinstance(d["object_type"], str):
            raise OpError("object_type is a string")
        kw["object_type"] = d["object_type"]
    if "id" in d:
        i = d["id"]
        if isinstance(i, str) and i.isdigit() and i.isascii():
            i = int(i)
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i <= _U64_MAX:
            raise OpError("id: not an unsigned 64-bit integer")
        kw["id"] = i
    if "shard_key" in d:
        if not isinstance(d["shard_key"], str):
            raise OpError("shard_key is a string")
        kw["shard_key"] = d["shard_key"]
    fields = d.get("fields", {})
    if not isinstance(fields, dict):
        raise OpError("fields is an object: column name -> value")
    kw["fields"] = [Field(name=name, value=value, increment=inc)
                    for name, (value, inc) in ((n, _value(n, v)) for n, v in fields.items())]
    return Op(**kw)  # built in one call: a file of a million ops is read in seconds


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise OpError("a duplicate key")
    return d


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)  # one, not one a line


def read_ops(path: str, on_error=None) -> Iterator[Op]:
    """The ops of a JSON-lines file, one per non-blank line, in file order. A line that
    does not parse raises OpError naming it, or, with `on_error(err)` given, is passed to
    it and skipped (as `bwctl submit` does)."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield op_from_json(_DECODER.decode(line))
            except (ValueError, OpError) as e:
                err = e if isinstance(e, OpError) and e.line else OpError(str(e), n)
                if on_error is None:
                    raise err from None
                on_error(err)
