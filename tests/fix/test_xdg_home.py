"""Where gpudoctor's own directories are: the XDG rule, and a HOME that is not absolute."""

from __future__ import annotations

import os
import pwd

from gpudoctor.paths import GpudoctorDirs
from gpudoctor.xdg import CACHE, gpudoctor_dir


def test_absolute_xdg_variable_wins():
    assert gpudoctor_dir({"XDG_CACHE_HOME": "/x/cache", "HOME": "/h"}, *CACHE) == "/x/cache/gpudoctor"


def test_relative_xdg_variable_is_ignored():
    assert gpudoctor_dir({"XDG_CACHE_HOME": "rel/cache", "HOME": "/h"}, *CACHE) == "/h/.cache/gpudoctor"


def test_relative_or_empty_home_is_not_taken_from_the_working_directory(tmp_path, monkeypatch):
    """HOME=. (seen in containers) put the fixes' records under the working directory: a fix
    run from one directory could not be undone from another. The account's home is used."""
    account_home = pwd.getpwuid(os.getuid()).pw_dir
    monkeypatch.chdir(tmp_path)
    for home in (".", "some/dir", ""):
        dirs = GpudoctorDirs.from_env({"HOME": home})
        for path in (dirs.cache, dirs.config, dirs.state):
            assert os.path.isabs(path) and not path.startswith(str(tmp_path))
        assert dirs.state == os.path.join(account_home, ".local", "state", "gpudoctor")


def test_without_a_password_entry_a_relative_home_is_made_absolute(tmp_path, monkeypatch):
    def missing(uid):
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", missing)
    monkeypatch.chdir(tmp_path)
    assert gpudoctor_dir({"HOME": "."}, *CACHE) == os.path.join(str(tmp_path), ".cache", "gpudoctor")
