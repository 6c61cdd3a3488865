"""The mechanical edits behind ``gpudoctor fix --code``, made with libcst so every comment, blank
line and quote style of the user's file stays as it was; only the keyword changes.

An edit (from a finding's evidence ``edit``): ``{"op", "file", "line", "old", "new"}``
  rename_kwarg    ``old=…`` -> ``new=…`` for the keyword at ``line``
  set_kwarg       the keyword ``old`` at ``line`` gets the value ``new`` (a Python literal)
  move_to_config  the keyword ``old`` at ``line`` leaves the trainer call and goes, as ``new``, into
                  the ``args=<config>(...)`` call written inline in that same call; when ``args``
                  is a variable the edit is not mechanical and is refused with the reason
  remove_kwarg    the keyword ``old`` at ``line`` is removed from its call
  add_kwarg       the call at ``line`` (named ``callee``) gets the keyword ``old`` with the value ``new``
                  (a Python expression), in the call's own layout: same line, or a line of its own
  rename_key      a config file's top-level ``old:`` key at ``line`` becomes ``new:`` (YAML/JSON/TOML,
                  a text edit of that one line)
  remove_key      a config file's top-level ``old:`` line is deleted (YAML/TOML; only when its value
                  is on that line)"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


@dataclass(frozen=True)
class EditResult:
    """The text after the mechanical edits, the edits made, and those refused with the reason."""

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

    def visit_Call(self, node: cst.Call) -> bool:
        # a rename onto a keyword the call already passes would pass it twice (a SyntaxError)
        present = {a.keyword.value for a in node.args if a.keyword is not None}
        for arg in node.args:
            edit = self._edit_for(arg)
            if edit is not None and edit["op"] == "rename_kwarg" and edit["new"] in present:
                del self.pending[(edit["line"], edit["old"])]
                self.refused.append((edit, f"the call already passes `{edit['new']}`; keep one of the two by hand"))
        return True

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        edit = self._edit_for(original)
        if edit is None or edit["op"] in ("move_to_config", "remove_kwarg"):
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
        # removals first: an added keyword takes its layout from the arguments that stay
        return self._add_keyword(original, self._move_and_remove(original, updated))

    def _move_and_remove(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        moving, removing = [], []
        for index, arg in enumerate(original.args):
            edit = self._edit_for(arg)
            if edit is not None and edit["op"] == "move_to_config":
                moving.append((index, edit))
            elif edit is not None and edit["op"] == "remove_kwarg":
                removing.append((index, edit))
        if not moving and not removing:
            return updated
        target_index = next((i for i, a in enumerate(updated.args) if a.keyword and a.keyword.value == "args"), None)
        target = updated.args[target_index].value if target_index is not None else None
        if moving and not (isinstance(target, cst.Call) and _callee_name(target.func) == moving[0][1]["config"]):
            for _, edit in moving:
                del self.pending[(edit["line"], edit["old"])]
                self.refused.append((edit, f"`args=` is not an inline {edit['config']}(...) call here; move "
                                           f"`{edit['old']}` into the {edit['config']} by hand"))
            moving = []
        if moving:
            present = {a.keyword.value for a in target.args if a.keyword is not None}
            for index, edit in list(moving):
                if edit["new"] in present:  # the config has it already: moving would pass it twice
                    moving.remove((index, edit))
                    del self.pending[(edit["line"], edit["old"])]
                    self.refused.append((edit, f"{edit['config']}(...) already has `{edit['new']}`; keep one of the "
                                               "two by hand"))
        gone = {index for index, _ in moving} | {index for index, _ in removing}
        if not gone:
            return updated
        new_config_args = list(target.args) if moving else []
        for index, edit in moving:
            arg = updated.args[index].with_changes(keyword=cst.Name(edit["new"]))
            if new_config_args:  # the previous last argument needs a comma now
                last = new_config_args[-1]
                if last.comma is cst.MaybeSentinel.DEFAULT:
                    new_config_args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            new_config_args.append(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        for _, edit in moving + removing:
            del self.pending[(edit["line"], edit["old"])]
            self.done.append(edit)
        args = []
        for i, arg in enumerate(updated.args):
            if i in gone:
                # the line break after a removed argument now follows the argument before it
                if (args and isinstance(arg.comma, cst.Comma)
                        and isinstance(arg.comma.whitespace_after, cst.ParenthesizedWhitespace)
                        and isinstance(args[-1].comma, cst.Comma)
                        and isinstance(args[-1].comma.whitespace_after, cst.SimpleWhitespace)):  # keeps comments
                    args[-1] = args[-1].with_changes(comma=arg.comma)
                continue
            if i == target_index and moving:
                arg = arg.with_changes(value=target.with_changes(args=new_config_args))
            args.append(arg)
        if args and updated.args and updated.args[-1].comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if args and len(gone) and (len(updated.args) - 1) in gone and args[-1].comma is cst.MaybeSentinel.DEFAULT:
            # the removed last argument carried the space before ")": keep it
            args[-1] = args[-1].with_changes(whitespace_after_arg=updated.args[-1].whitespace_after_arg)
        return updated.with_changes(args=args)

    def _add_keyword(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        line = self.get_metadata(PositionProvider, original).start.line
        for key, edit in list(self.pending.items()):
            if edit["op"] != "add_kwarg" or edit["line"] != line or _callee_name(original.func) != edit.get("callee"):
                continue
            del self.pending[key]
            if any(a.keyword is not None and a.keyword.value == edit["old"] for a in updated.args):
                self.refused.append((edit, f"the call already passes `{edit['old']}`; set it by hand"))
                continue
            updated = updated.with_changes(args=_appended(updated, cst.Arg(
                keyword=cst.Name(edit["old"]), value=cst.parse_expression(edit["new"]),
                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                      whitespace_after=cst.SimpleWhitespace("")))))
            self.done.append(edit)
        return updated


def _appended(call: cst.Call, new: cst.Arg) -> list[cst.Arg]:
    """The call's arguments with ``new`` last, laid out as the others are: on the same line, or on
    a line of its own with their indentation, keeping a trailing comma if the call had one."""
    args = list(call.args)
    if not args:
        return [new]
    between = (args[-2].comma.whitespace_after if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma)
               else call.whitespace_before_args if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace)
               else cst.SimpleWhitespace(" "))
    if isinstance(between, cst.ParenthesizedWhitespace):  # the line break and indent, not a comment of theirs
        between = between.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    last = args[-1]
    if (isinstance(last.comma, cst.Comma) and isinstance(last.comma.whitespace_after, cst.ParenthesizedWhitespace)
            and isinstance(between, cst.ParenthesizedWhitespace)):
        closing = last.comma.whitespace_after  # its comment stays on its line; its indent goes before ")"
        new = new.with_changes(comma=last.comma.with_changes(
            whitespace_after=closing.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())))
        last = last.with_changes(comma=last.comma.with_changes(
            whitespace_after=between.with_changes(first_line=closing.first_line, empty_lines=closing.empty_lines)))
    elif isinstance(last.comma, cst.Comma):
        new = new.with_changes(comma=last.comma)
        last = last.with_changes(comma=cst.Comma(whitespace_after=between))
    else:
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        last = last.with_changes(comma=cst.Comma(whitespace_after=between), whitespace_after_arg=cst.SimpleWhitespace(""))
    return args[:-1] + [last, new]


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


def edit_config(text: str, edits: Iterable[Mapping[str, Any]], path: str = "") -> EditResult:
    if path.lower().endswith(".json"):
        return _edit_json(text, edits)
    lines = text.splitlines(keepends=True)
    done, refused = [], []
    removed = set()
    for edit in edits:
        index = edit["line"] - 1
        if edit["op"] not in ("rename_key", "remove_key") or not 0 <= index < len(lines):
            refused.append((edit, "not an edit of a config file key"))
            continue
        pattern = re.compile(rf"^(\s*\"?){re.escape(edit['old'])}(\"?\s*[:=])")
        if not pattern.match(lines[index]):
            refused.append((edit, "the key is no longer where the scan saw it; scan again"))
            continue
        if edit["op"] == "remove_key":
            why = _not_removable(lines, index, path)
            if why:
                refused.append((edit, why))
                continue
            removed.add(index)
        else:
            lines[index] = pattern.sub(lambda m: m.group(1) + edit["new"] + m.group(2), lines[index], count=1)
        done.append(edit)
    return EditResult("".join(l for i, l in enumerate(lines) if i not in removed), tuple(done), tuple(refused))


def _not_removable(lines: list[str], index: int, path: str) -> str:
    value = lines[index].split(":", 1)[-1].split("=", 1)[-1].split("#", 1)[0].strip()
    following = next((l for l in lines[index + 1:] if l.strip() and not l.lstrip().startswith("#")), "")
    if not value or value in ("|", ">", "[", "{") or following[:1] in (" ", "\t", "-"):
        return "its value spans several lines; remove the key by hand"
    return ""


def _edit_json(text: str, edits: Iterable[Mapping[str, Any]]) -> EditResult:
    """A top-level key renamed or removed in JSON, wherever it stands on its line (a one-line
    object too): the edited text must parse to the same object with only that key changed."""
    done, refused = [], []
    for edit in sorted(edits, key=lambda e: -int(e["line"])):  # from the bottom: the lines above stay put
        if edit["op"] not in ("rename_key", "remove_key"):
            refused.append((edit, "not an edit of a config file key"))
            continue
        new_text, why = _json_key_edit(text, edit)
        if new_text is None:
            refused.append((edit, why))
            continue
        text = new_text
        done.append(edit)
    return EditResult(text, tuple(done), tuple(refused))


def _json_key_edit(text: str, edit: Mapping[str, Any]) -> tuple[str | None, str]:
    old, index = edit["old"], edit["line"] - 1
    try:
        before = json.loads(text)
    except ValueError:
        return None, "the file is no longer valid JSON; scan again"
    lines = text.splitlines(keepends=True)
    if not isinstance(before, dict) or old not in before or not 0 <= index < len(lines):
        return None, "the key is no longer where the scan saw it; scan again"
    if edit["op"] == "rename_key":
        expected = {(edit["new"] if k == old else k): v for k, v in before.items()}
    else:
        expected = {k: v for k, v in before.items() if k != old}
    start = sum(len(line) for line in lines[:index])
    for match in re.finditer(rf'"{re.escape(old)}"\s*:\s*', lines[index]):
        key_at, value_at = start + match.start(), start + match.end()
        try:
            _, value_end = json.JSONDecoder().raw_decode(text, value_at)
        except ValueError:
            continue
        if edit["op"] == "rename_key":
            new_text = text[:key_at] + json.dumps(edit["new"]) + text[key_at + len(old) + 2:]
        else:  # the key, its value and one comma: the one after it, else the one before it
            after = re.match(r"\s*,\s*", text[value_end:])
            before_comma = re.search(r",\s*$", text[:key_at])
            cut_from, cut_to = key_at, value_end
            if after:
                cut_to += after.end()
            elif before_comma:
                cut_from = before_comma.start()
            new_text = text[:cut_from] + text[cut_to:]
        try:
            parsed = json.loads(new_text)
        except ValueError:
            continue
        if parsed == expected and list(parsed) == list(expected):  # a nested key of that name is not it
            return new_text, ""
    return None, "the key is not where the scan saw it, or not as a top-level key; edit it by hand or scan again"
