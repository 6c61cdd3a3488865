"""One fix action -> the bash lines that perform it, guarded so that re-running is harmless and
nothing that already exists is overwritten. Dispatch is an explicit dict keyed by action type."""

from __future__ import annotations

from typing import Callable

from ..model import (
    Action,
    AppendLine,
    CodeEdit,
    InstallPackage,
    MakeDir,
    RemoveFromPathVar,
    RootCommand,
    SetEnv,
    Symlink,
    WriteFile,
)
from .envfile import EnvEntry, entry_lines
from .packages import install_argv, remove_argv
from .shellquote import comment, sh, sh_argv

ENV_FILE_VAR = "GPUDOCTOR_ENV_FILE"  # the script defines it once at the top

def env_entry_for(action: SetEnv | RemoveFromPathVar) -> EnvEntry:
    if isinstance(action, RemoveFromPathVar):
        return EnvEntry(action.name, action.entry, "remove")
    return EnvEntry(action.name, action.value, "prepend" if action.prepend else "set")


def _fail(message: str) -> str:
    return f"{{ printf '%s\\n' {sh('gpudoctor: ' + message)} >&2; exit 1; }}"


def _make_dir(action: MakeDir) -> list[str]:
    # umask applies to every directory mkdir -p creates, not only the last one (unlike -m)
    umask = f"{0o777 & ~action.mode:03o}"
    return [f"( umask {umask} && mkdir -p -- {sh(action.path)} )"]


def _symlink(action: Symlink) -> list[str]:
    link, target = sh(action.link), sh(action.target)
    return [
        f"if [ -L {link} ]; then",
        f'  [ "$(readlink -- {link})" = {target} ] || ' + _fail(f"{action.link} already points elsewhere; leaving it alone"),
        f"elif [ -e {link} ]; then",
        "  " + _fail(f"{action.link} exists and is not a symlink; refusing to replace it"),
        "else",
        f"  ln -s -- {target} {link}",
        "fi",
    ]


def _env(action: SetEnv | RemoveFromPathVar) -> list[str]:
    marker, shell_line = entry_lines(env_entry_for(action))
    return [
        f'grep -qxF -- {sh(marker)} "${ENV_FILE_VAR}" 2>/dev/null || '
        f'( umask 077 && printf \'%s\\n\' {sh(marker)} {sh(shell_line)} >> "${ENV_FILE_VAR}" )'
    ]


def _write_file(action: WriteFile) -> list[str]:
    path, content = sh(action.path), sh(action.content)
    return [
        f"if [ -e {path} ] || [ -L {path} ]; then",
        f"  printf '%s' {content} | cmp -s - {path} || " + _fail(f"{action.path} exists with other content; refusing to replace it"),
        "else",
        f"  printf '%s' {content} > {path}",
        "fi",
    ]


def _root_command(action: RootCommand) -> list[str]:
    lines = [sh_argv(action.argv)]
    if action.undo_argv:
        lines.insert(0, comment("undo: " + sh_argv(action.undo_argv)))
    return lines


def _install(action: InstallPackage) -> list[str]:
    # `gpudoctor fix --system` compares the package database before and after, and records only
    # what this install added; that is what `gpudoctor fix --undo` removes.
    remover = sh_argv(remove_argv(action.manager, ()))
    return [comment(f"undo: gpudoctor fix --undo removes what this install added, with {remover}"),
            sh_argv(install_argv(action.manager, action.packages))]


def _append_line(action: AppendLine) -> list[str]:
    path, line = sh(action.path), sh(action.line)
    return [
        f"if ! grep -qxF -- {line} {path} 2>/dev/null; then",
        # a file that does not end in a newline gets one first, so the line stands alone
        f"  if [ -s {path} ] && [ -n \"$(tail -c 1 -- {path})\" ]; then printf '\\n' >> {path}; fi",
        f"  printf '%s\\n' {line} >> {path}",
        "fi",
    ]


def _code_edit(action: CodeEdit) -> list[str]:
    lines = [comment("change in your code (not done by this script): " + action.description)]
    if action.before:
        lines.append(comment(action.before, prefix="#   - "))
    if action.after:
        lines.append(comment(action.after, prefix="#   + "))
    return lines


RENDERERS: dict[type, Callable[..., list[str]]] = {
    MakeDir: _make_dir,
    Symlink: _symlink,
    SetEnv: _env,
    RemoveFromPathVar: _env,
    WriteFile: _write_file,
    RootCommand: _root_command,
    InstallPackage: _install,
    AppendLine: _append_line,
    CodeEdit: _code_edit,
}


def render_action(action: Action) -> list[str]:
    try:
        renderer = RENDERERS[type(action)]
    except KeyError:
        raise TypeError(f"no shell rendering for {type(action).__name__}") from None
    return renderer(action)


def describe(action: Action) -> str:
    """One line for humans (CLI output), no shell quoting games."""
    if isinstance(action, MakeDir):
        return f"make directory {action.path} (mode {action.mode:o})"
    if isinstance(action, Symlink):
        return f"symlink {action.link} -> {action.target}"
    if isinstance(action, SetEnv):
        return f"{'prepend to' if action.prepend else 'set'} {action.name}={action.value}"
    if isinstance(action, RemoveFromPathVar):
        return f"remove {action.entry} from {action.name}"
    if isinstance(action, WriteFile):
        return f"write {action.path}"
    if isinstance(action, RootCommand):
        return "run as root: " + sh_argv(action.argv)
    if isinstance(action, InstallPackage):
        return "install: " + sh_argv(install_argv(action.manager, action.packages))
    if isinstance(action, AppendLine):
        return f"add to {action.path}: {action.line}"
    if isinstance(action, CodeEdit):
        return "code change: " + action.description
    return repr(action)


def needs_root(action: Action) -> bool:
    return isinstance(action, (RootCommand, InstallPackage)) or (isinstance(action, WriteFile) and action.needs_root)

