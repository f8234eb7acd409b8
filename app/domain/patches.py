"""A compact difference between two JSON documents, as JSON Patch operations (RFC 6902).

The audit log keeps what an edit changed, not the whole card document before and after it: a
small wording change is one ``replace`` of one text, whatever the size of the card. Objects are
compared key by key and arrays element by element (elements added or removed at the end are
``add`` and ``remove``), so ``apply_patch(before, json_patch(before, after)) == after``.
"""

from __future__ import annotations

import copy
from typing import Any

Patch = list[dict[str, Any]]


def _pointer(path: tuple[str | int, ...]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def json_patch(before: Any, after: Any) -> Patch:
    """The operations that turn ``before`` into ``after`` (none when they are equal)."""
    operations: Patch = []
    _diff(before, after, (), operations)
    return operations


def _diff(before: Any, after: Any, path: tuple[str | int, ...], out: Patch) -> None:
    if type(before) is type(after) and before == after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for key in before:
            if key not in after:
                out.append({"op": "remove", "path": _pointer((*path, key))})
        for key, value in after.items():
            if key in before:
                _diff(before[key], value, (*path, key), out)
            else:
                out.append({"op": "add", "path": _pointer((*path, key)), "value": value})
        return
    if isinstance(before, list) and isinstance(after, list):
        common = min(len(before), len(after))
        for index in range(common):
            _diff(before[index], after[index], (*path, index), out)
        for index in range(common, len(after)):
            out.append({"op": "add", "path": _pointer((*path, index)), "value": after[index]})
        for index in reversed(range(common, len(before))):
            out.append({"op": "remove", "path": _pointer((*path, index))})
        return
    out.append({"op": "replace", "path": _pointer(path), "value": after})


def _parts(pointer: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]


def apply_patch(document: Any, patch: Patch) -> Any:
    """``document`` with ``patch`` applied (a copy: the argument is left as it is)."""
    result = copy.deepcopy(document)
    for operation in patch:
        parts = _parts(operation["path"])
        if not parts:
            result = copy.deepcopy(operation.get("value"))
            continue
        parent = result
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            index = int(last)
            if operation["op"] == "remove":
                del parent[index]
            elif operation["op"] == "add":
                parent.insert(index, copy.deepcopy(operation["value"]))
            else:
                parent[index] = copy.deepcopy(operation["value"])
        elif operation["op"] == "remove":
            del parent[last]
        else:
            parent[last] = copy.deepcopy(operation["value"])
    return result
