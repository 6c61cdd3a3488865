"""Undo of ``InstallPackage``: the package database is read before and after the install, and
undo removes exactly what the install added, with the low-level tool that refuses rather than
taking down packages that came to depend on it.

The real-package tests build tiny .deb packages with dpkg-deb and install them with dpkg (what
apt-get does after downloading; a test has no repository to download from). They need root
and dpkg, run only with GPUDOCTOR_TEST_SYSTEM_PACKAGES=1, and clean up after themselves."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpudoctor.fix import packages
from gpudoctor.fix.manifest import Manifest
from gpudoctor.fix.plan import build_plan
from gpudoctor.fix.script import render_script
from gpudoctor.fix.system import packages_before, record_system_changes
from gpudoctor.fix.undo import KEPT, MANUAL, UNDONE, undo
from gpudoctor.model import Finding, Fix, InstallPackage, Severity

PREFIX = "gpudoctor-selftest"
NAMES = (f"{PREFIX}-tool", f"{PREFIX}-dep", f"{PREFIX}-user")


def _plan(manager: str, *names: str):
    finding = Finding("nvcc-host-compiler-unsupported", Severity.ERROR, "gcc too new", "test",
                      fixes=(Fix("system", "install a compiler", actions=(InstallPackage(manager, names),)),))
    return build_plan([finding], "system")


def test_script_installs_with_the_distro_tool_and_names_the_undo(home):
    script = render_script(_plan("apt", "gcc-12", "g++-12"), home)
    assert "apt-get install -y --no-install-recommends gcc-12 g++-12" in script
    assert "# undo: gpudoctor fix --undo removes what this install added, with dpkg --remove" in script


@pytest.mark.parametrize("manager, expected", [
    ("apt", ("dpkg", "--remove")), ("dnf", ("rpm", "--erase")), ("yum", ("rpm", "--erase")),
    ("zypper", ("rpm", "--erase")), ("pacman", ("pacman", "--remove", "--noconfirm")),
])
def test_removal_never_uses_the_high_level_tool_that_cascades(manager, expected):
    assert packages.remove_argv(manager, ["b", "a"]) == (*expected, "a", "b")


def test_unknown_manager_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown package manager"):
        packages.remove_argv("brew", ["gcc"])
    assert packages.installed_packages("brew") is None


def test_unreadable_database_gives_no_undo_record_rather_than_a_wrong_one(home, monkeypatch):
    plan = _plan("apt", "gcc-12")
    monkeypatch.setattr(packages, "_LIST_COMMANDS", {"apt": ("/nonexistent/dpkg-query",)})
    before = packages_before(plan)
    assert before == {"apt": None}
    count, notes = record_system_changes(plan, home, set(), before)
    assert count == 0 and "no undo record" in notes[0]
    assert not os.path.exists(home.manifest_file)


def test_dpkg_status_parsing_counts_only_installed():
    text = "bash\tii \nold-thing\trc \nhalf\tiU \nlibc6:amd64\tii \nmarked\tri \ngone\tpn \n"
    assert packages._dpkg_installed(text) == {"bash", "half", "libc6:amd64", "marked"}


# -- real packages ---------------------------------------------------------------------------

# These tests change the host's package database (install, then purge, real .deb packages), so
# they run only when asked: .ci/run sets the variable in its throwaway machine (issue 13 item 12).
# tests/fix/test_package_manager_gate.py fails for any test module that calls a package manager
# without reading this variable.
SYSTEM_PACKAGES_OPT_IN = "GPUDOCTOR_TEST_SYSTEM_PACKAGES"


def _system_package_tests_skip_reason() -> str | None:
    if os.environ.get(SYSTEM_PACKAGES_OPT_IN) != "1":
        return (f"installs and purges real .deb packages in this machine's dpkg database; "
                f"opt in with {SYSTEM_PACKAGES_OPT_IN}=1 (as root, on a throwaway machine)")
    if not (shutil.which("dpkg-deb") and shutil.which("dpkg") and os.geteuid() == 0):
        return "needs root and dpkg to install test packages"
    return None


needs_dpkg_root = pytest.mark.skipif(_system_package_tests_skip_reason() is not None,
                                     reason=_system_package_tests_skip_reason() or "")


def _build_deb(tmp_path, name: str, depends: str = "") -> str:
    root = tmp_path / name
    (root / "DEBIAN").mkdir(parents=True)
    control = f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: gpudoctor tests <t@example.invalid>\n"
    control += f"Depends: {depends}\n" if depends else ""
    control += "Description: gpudoctor undo test package\n"
    (root / "DEBIAN" / "control").write_text(control)
    (root / "usr" / "share" / "doc" / name).mkdir(parents=True)
    (root / "usr" / "share" / "doc" / name / "marker").write_text(name)
    deb = str(tmp_path / f"{name}.deb")
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), deb], check=True, capture_output=True)
    return deb


def _dpkg(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["dpkg", *argv], capture_output=True, text=True, timeout=120)


@pytest.fixture
def debs(tmp_path):
    if reason := _system_package_tests_skip_reason():  # also for a test that forgot the mark
        pytest.skip(reason)
    if any(name in (packages.installed_packages("apt") or ()) for name in NAMES):
        pytest.skip("test packages are already installed on this machine")
    built = {
        "tool": _build_deb(tmp_path, NAMES[0], depends=NAMES[1]),
        "dep": _build_deb(tmp_path, NAMES[1]),
        "user": _build_deb(tmp_path, NAMES[2], depends=NAMES[0]),
    }
    yield built
    _dpkg("--purge", *NAMES)


def _root(argv: tuple[str, ...]) -> int:
    return subprocess.call(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _install_and_record(home, debs) -> tuple[int, list[str]]:
    """What `gpudoctor fix --system` does around the script: read the package database, install
    (here with dpkg: the tool pulls in its dependency), record what was added."""
    plan = _plan("apt", NAMES[0])
    before = packages_before(plan)
    assert "dpkg" in before["apt"]  # the database really was read
    assert _dpkg("--install", debs["dep"], debs["tool"]).returncode == 0
    return record_system_changes(plan, home, set(), before)


@needs_dpkg_root
def test_undo_removes_what_the_install_added_and_nothing_that_was_there(home, debs):
    assert _install_and_record(home, debs) == (1, [])
    (change,) = [c for c in Manifest.load(home.manifest_file).changes if c["op"] == "packages"]
    assert change["added"] == sorted(NAMES[:2]) and change["manager"] == "apt"

    outcomes = undo(home, _root)
    assert [(o.status, o.message) for o in outcomes if o.change["op"] == "packages"] == [
        (UNDONE, f"dpkg --remove {' '.join(sorted(NAMES[:2]))}")]
    after = packages.installed_packages("apt")
    assert not set(NAMES) & after and "dpkg" in after
    assert not os.path.exists(home.manifest_file)


@needs_dpkg_root
def test_package_installed_before_gets_no_undo(home, debs):
    assert _dpkg("--install", debs["dep"], debs["tool"]).returncode == 0  # the user had it already
    plan = _plan("apt", NAMES[0])
    before = packages_before(plan)
    # `apt-get install` of an installed package changes nothing
    assert record_system_changes(plan, home, set(), before) == (0, [])
    assert not os.path.exists(home.manifest_file)


@needs_dpkg_root
def test_undo_refuses_when_something_came_to_depend_on_it(home, debs):
    _install_and_record(home, debs)
    assert _dpkg("--install", debs["user"]).returncode == 0  # later, the user installs a dependent

    outcomes = undo(home, _root)
    (outcome,) = [o for o in outcomes if o.change["op"] == "packages"]
    assert outcome.status == KEPT and "other packages now depend on them" in outcome.message
    assert set(NAMES) <= packages.installed_packages("apt")  # nothing was taken down
    selections = subprocess.run(["dpkg-query", "--show", "--showformat", "${db:Status-Abbrev}\n", *NAMES],
                                capture_output=True, text=True).stdout.split()
    assert selections == ["ii"] * 3  # not even marked for removal


@needs_dpkg_root
def test_undo_without_root_leaves_the_change_for_a_later_sudo_undo(home, debs):
    _install_and_record(home, debs)
    (outcome,) = [o for o in undo(home, None) if o.change["op"] == "packages"]
    assert outcome.status == MANUAL and outcome.message == f"run as root: dpkg --remove {' '.join(sorted(NAMES[:2]))}"
    assert [c["op"] for c in Manifest.load(home.manifest_file).changes if c["op"] == "packages"] == ["packages"]
    (outcome,) = [o for o in undo(home, _root) if o.change["op"] == "packages"]
    assert outcome.status == UNDONE and not set(NAMES) & packages.installed_packages("apt")
