"""Fast loading of multi-document YAML into plain Python objects (the state dir).

PyYAML's C loader parses in C but builds every value through its Python node graph and
constructor, which costs more than the parsing. Here the C parser's events are turned
into dicts, lists and scalars directly, with PyYAML's own resolver and safe constructors
for every scalar that is not a plain string, so the result is what `yaml.safe_load_all`
returns. Anything unusual (anchors and aliases, merge keys, explicit collection tags,
non-scalar keys) is left to the full loader, which also reports every error.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode

#: libyaml's loader when PyYAML was built with it, else the pure-Python one: both build
#: the same safe types.
LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)
_STR = "tag:yaml.org,2002:str"
_NO_KEY = object()


class _Unusual(Exception):
    """A construct the direct builder leaves to the full loader."""


def load_all(text: str) -> list[Any]:
    """Every document of a YAML stream, as `yaml.safe_load_all` would give them."""
    try:
        return _build(text)
    except _Unusual:
        return list(yaml.load_all(text, Loader=LOADER))


def _scalar(loader: Any, event: ScalarEvent) -> Any:
    """A scalar that may not be a string: resolved and constructed as PyYAML does."""
    tag = event.tag
    value = event.value
    if tag is None or tag == "!":
        plain, quoted = event.implicit
        if quoted and not plain:
            return value  # a quoted scalar without a tag is a string
        tag = loader.resolve(ScalarNode, value, event.implicit)
    if tag == _STR:
        return value
    construct = loader.yaml_constructors.get(tag)
    if construct is None:
        raise _Unusual
    # libyaml's events carry its own Mark class, which the stubs' ScalarNode does not name.
    node = ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)  # type: ignore[arg-type]
    return construct(loader, node)


def _build(text: str) -> list[Any]:
    loader = LOADER(text)
    try:
        resolvers = loader.yaml_implicit_resolvers
        if None in resolvers or loader.yaml_path_resolvers:
            raise _Unusual  # resolvers that apply to any first character or path
        plain_firsts = frozenset(resolvers)
        typed: dict[str, Any] = {}
        documents: list[Any] = []
        # The open collections, each with the key waiting for its value (mappings).
        stack: list[tuple[Any, Any]] = []
        current: Any = None
        key: Any = _NO_KEY
        document: Any = None
        while True:
            # Dispatched on its exact class through `kind`, which mypy cannot narrow on.
            event: Any = loader.get_event()
            kind = type(event)
            if kind is ScalarEvent:
                if event.anchor is not None:
                    raise _Unusual
                value = event.value
                if event.tag is None and event.implicit[0]:
                    # A plain scalar whose first character starts no implicit type (int,
                    # float, bool, null, timestamp) is a string, the common case; the others
                    # repeat a lot (quantities, counts) and are immutable: typed once.
                    if value[:1] in plain_firsts:
                        found = typed.get(value, _NO_KEY)
                        if found is _NO_KEY:
                            found = typed[value] = _scalar(loader, event)
                        value = found
                else:
                    value = _scalar(loader, event)
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if event.anchor is not None or event.tag not in (None, "!"):
                    raise _Unusual
                stack.append((current, key))
                current, key = ({} if kind is MappingStartEvent else []), _NO_KEY
                continue
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                value = current
                current, key = stack.pop()
            elif kind is DocumentStartEvent:
                document = None
                continue
            elif kind is DocumentEndEvent:
                documents.append(document)
                continue
            elif kind is StreamEndEvent:
                return documents
            elif kind is AliasEvent:
                raise _Unusual
            else:
                continue  # StreamStartEvent
            if not stack:
                document = value
            elif type(current) is list:
                current.append(value)
            elif key is _NO_KEY:
                if isinstance(value, (dict, list)):
                    raise _Unusual  # a collection as a key: the full loader refuses it
                key = value
            else:
                current[key] = value
                key = _NO_KEY
    finally:
        loader.dispose()
