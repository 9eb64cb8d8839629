"""Reading a recipe's YAML as untrusted input: bounded in size, depth and alias expansion, and
plain data only.

`yaml.safe_load` constructs no arbitrary Python object, but it still expands aliases without
bound (a 1 KiB "billion laughs" file becomes gigabytes), recurses once per nesting level, and
turns tags and timestamps into sets, bytes and dates. A recipe needs none of that: mappings,
lists, strings, numbers, booleans and null. Each limit is checked on the parser's event stream
or the composed node graph (aliases still shared) before anything is built, so a hostile file
is refused in milliseconds, naming the file and the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "UnsafeYaml", "load_yaml", "load_yaml_file"]

#: A recipe is a few KiB; a file far past that is not one (and would take seconds to parse).
MAX_BYTES = 256 * 1024
#: Nesting of mappings and lists; recipes use four or five levels.
MAX_DEPTH = 64
#: Values after every alias is expanded; recipes have a few hundred.
MAX_NODES = 100_000


class UnsafeYaml(ValueError):
    """The text is refused before it is built: too large, too deep, too many values once
    aliases are expanded, or a tag. The message says which and where."""


class _PlainLoader(yaml.SafeLoader):
    """SafeLoader without the timestamp resolver: `2026-01-01` stays the string it reads as."""


_PlainLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}" if mark is not None else "somewhere"


def _check_events(text: str) -> None:
    """Depth and tags from the parser's events: the parser keeps its own stack, so a file
    nested a million levels deep is read without recursion and refused at level MAX_DEPTH."""
    depth = 0
    for event in yaml.parse(text, Loader=_PlainLoader):
        tag = getattr(event, "tag", None)  # None unless the text wrote one (`!!set`, `!x`)
        if tag is not None:
            raise UnsafeYaml(f"{_where(event.start_mark)}: the tag {tag!r} is not allowed "
                             "(a recipe holds plain values: no tags)")  # fmt: skip
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise UnsafeYaml(
                    f"{_where(event.start_mark)}: nested more than {MAX_DEPTH} levels deep"
                )
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1


def _check_expansion(node: yaml.Node) -> None:
    """Count values as the constructor would build them (an alias counts each time it is
    used), stopping at MAX_NODES; shared nodes are not walked twice per use beyond that."""
    count = 0
    stack: list[yaml.Node] = [node]
    while stack:
        current = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise UnsafeYaml(
                f"{_where(current.start_mark)}: more than {MAX_NODES:,} values once its aliases "
                "are expanded (an alias bomb?)"
            )
        if isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
        elif isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack += (key, value)


def _check_size(n_bytes: int) -> None:
    if n_bytes > MAX_BYTES:
        raise UnsafeYaml(f"larger than {MAX_BYTES // 1024} KiB; a recipe is a few KiB")


def load_yaml_file(path: Path) -> Any:
    """`load_yaml` of a file, of which at most MAX_BYTES + 1 bytes (enough to tell) are read;
    UnicodeDecodeError for a file that is not UTF-8."""
    with path.open("rb") as f:
        raw = f.read(MAX_BYTES + 1)
    _check_size(len(raw))
    return load_yaml(raw.decode("utf-8"))


def load_yaml(text: str) -> Any:
    """Plain data (dicts, lists, str, int, float, bool, None) from YAML `text`, or UnsafeYaml;
    malformed YAML raises yaml.YAMLError as usual."""
    _check_size(len(text.encode("utf-8", "surrogatepass")))
    _check_events(text)
    loader = _PlainLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
