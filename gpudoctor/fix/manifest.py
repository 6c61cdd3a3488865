"""The manifest: a JSON record (XDG state dir) of every change ``gpudoctor fix`` made, with
enough detail to undo exactly that change and nothing else.

Change records (``op``):
  mkdir        {"path", "purpose": "fix" | "manifest"}
  symlink      {"link", "target"}
  write_file   {"path", "content"}           a file gpudoctor created (env file excluded)
  env          {"entry": {...}, "replaced": {...} | null}
  env_file     {"path"}                      the env file itself was created by gpudoctor
  root_command {"argv", "undo_argv"}         run as root with --system
  packages     {"manager", "argv", "added"}  distro packages an install added (--system)
  append_line  {"path", "line", "added", "created"}  a line appended to a user's file (--profile)
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

SCHEMA = 1


@dataclass
class Manifest:
    path: str
    changes: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, path: str) -> "Manifest":
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return cls(path)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"{path}: unsupported manifest schema {data.get('schema')!r}")
        return cls(path, list(data.get("changes", [])))

    def record(self, op: str, **details: Any) -> None:
        self.changes.append({"op": op, "time": round(time.time(), 3), **details})

    def owns_dir(self, path: str) -> bool:
        return any(c["op"] == "mkdir" and c["path"] == path for c in self.changes)

    def owns_symlink(self, link: str) -> dict[str, Any] | None:
        for change in reversed(self.changes):
            if change["op"] == "symlink" and change["link"] == link:
                return change
        return None

    def save(self) -> None:
        """Atomic replace, mode 0600. The state directory must exist (apply makes it and
        records that, so undo can remove it too)."""
        fd, tmp = tempfile.mkstemp(prefix=".manifest.", dir=os.path.dirname(self.path))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"schema": SCHEMA, "changes": self.changes}, handle, indent=2)
                handle.write("\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
