"""The mechanical edits behind ``gpudoctor fix --code``, made with libcst so every comment, blank
line and quote style of the user's file stays as it was; only the keyword changes.

An edit (from a finding's evidence ``edit``): ``{"op", "file", "line", "old", "new"}``
  rename_kwarg    ``old=…`` -> ``new=…`` for the keyword at ``line``
  set_kwarg       the keyword ``old`` at ``line`` gets the value ``new`` (a Python literal)
  move_to_config  the keyword ``old`` at ``line`` leaves the trainer call and goes, as ``new``, into
                  the ``args=<config>(...)`` call written inline in that same call; when ``args``
                  is a variable the edit is not mechanical and is refused with the reason
  rename_key      a config file's top-level ``old:`` key at ``line`` becomes ``new:`` (YAML/JSON/TOML,
                  a text edit of that one line)"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


@dataclass(frozen=True)
class EditResult:
    new_text: str
    done: tuple[Mapping[str, Any], ...]
    refused: tuple[tuple[Mapping[str, Any], str], ...]  # (edit, why not)


class _Editor(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, edits: Sequence[Mapping[str, Any]]) -> None:
        super().__init__()
        self.pending = {(e["line"], e["old"]): e for e in edits}
        self.done: list[Mapping[str, Any]] = []
        self.refused: list[tuple[Mapping[str, Any], str]] = []

    def _edit_for(self, arg: cst.Arg):
        if arg.keyword is None:
            return None
        line = self.get_metadata(PositionProvider, arg).start.line
        return self.pending.get((line, arg.keyword.value))

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        edit = self._edit_for(original)
        if edit is None or edit["op"] == "move_to_config":
            return updated
        if edit["op"] == "rename_kwarg":
            updated = updated.with_changes(keyword=cst.Name(edit["new"]))
        elif edit["op"] == "set_kwarg":
            updated = updated.with_changes(value=cst.parse_expression(edit["new"]))
        else:
            return updated
        self.done.append(edit)
        del self.pending[(edit["line"], edit["old"])]
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        moving = []
        for index, arg in enumerate(original.args):
            edit = self._edit_for(arg)
            if edit is not None and edit["op"] == "move_to_config":
                moving.append((index, edit))
        if not moving:
            return updated
        target_index = next((i for i, a in enumerate(updated.args) if a.keyword and a.keyword.value == "args"), None)
        target = updated.args[target_index].value if target_index is not None else None
        if not (isinstance(target, cst.Call) and _callee_name(target.func) == moving[0][1]["config"]):
            for _, edit in moving:
                del self.pending[(edit["line"], edit["old"])]
                self.refused.append((edit, f"`args=` is not an inline {edit['config']}(...) call here; move "
                                           f"`{edit['old']}` into the {edit['config']} by hand"))
            return updated
        moved_indexes = {index for index, _ in moving}
        new_config_args = list(target.args)
        for index, edit in moving:
            arg = updated.args[index].with_changes(keyword=cst.Name(edit["new"]))
            if new_config_args:  # the previous last argument needs a comma now
                last = new_config_args[-1]
                if last.comma is cst.MaybeSentinel.DEFAULT:
                    new_config_args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            new_config_args.append(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT))
            del self.pending[(edit["line"], edit["old"])]
            self.done.append(edit)
        args = []
        for i, arg in enumerate(updated.args):
            if i in moved_indexes:
                # the line break after a removed argument now follows the argument before it
                if (args and isinstance(arg.comma, cst.Comma)
                        and isinstance(arg.comma.whitespace_after, cst.ParenthesizedWhitespace)
                        and isinstance(args[-1].comma, cst.Comma)
                        and isinstance(args[-1].comma.whitespace_after, cst.SimpleWhitespace)):  # keeps comments
                    args[-1] = args[-1].with_changes(comma=arg.comma)
                continue
            if i == target_index:
                arg = arg.with_changes(value=target.with_changes(args=new_config_args))
            args.append(arg)
        if args and updated.args and updated.args[-1].comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=args)


def _callee_name(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


def edit_python(text: str, edits: Iterable[Mapping[str, Any]]) -> EditResult:
    edits = list(edits)
    module = cst.parse_module(text)
    editor = _Editor(edits)
    new_module = MetadataWrapper(module).visit(editor)
    refused = list(editor.refused) + [(e, "the keyword is no longer where the scan saw it; scan again")
                                      for e in editor.pending.values()]
    return EditResult(new_module.code, tuple(editor.done), tuple(refused))


def edit_config(text: str, edits: Iterable[Mapping[str, Any]]) -> EditResult:
    lines = text.splitlines(keepends=True)
    done, refused = [], []
    for edit in edits:
        index = edit["line"] - 1
        if edit["op"] != "rename_key" or not 0 <= index < len(lines):
            refused.append((edit, "not an edit of a config file key"))
            continue
        pattern = re.compile(rf"^(\s*\"?){re.escape(edit['old'])}(\"?\s*[:=])")
        new_line, count = pattern.subn(lambda m: m.group(1) + edit["new"] + m.group(2), lines[index], count=1)
        if not count:
            refused.append((edit, "the key is no longer where the scan saw it; scan again"))
            continue
        lines[index] = new_line
        done.append(edit)
    return EditResult("".join(lines), tuple(done), tuple(refused))
