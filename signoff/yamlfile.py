"""YAML as the operator's files are read (profiles, inventories, intent files): safe_load, but a
key written twice in one mapping is an error naming it and its line, not the last one silently
kept (a threshold's second `source:` once replaced the first, and its rule with it)."""

from __future__ import annotations

import yaml


class _UniqueKeys(yaml.SafeLoader):
    pass


def _mapping(loader: _UniqueKeys, node: yaml.MappingNode, deep: bool = False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    f"found the key {key!r} twice (first at line {seen[key] + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        except TypeError:  # an unhashable key: SafeLoader's own error says so
            break
    return loader.construct_mapping(node, deep)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load(stream):
    """yaml.safe_load, refusing a key written twice in one mapping (a yaml.YAMLError)."""
    return yaml.load(stream, Loader=_UniqueKeys)  # noqa: S506 - a SafeLoader subclass
