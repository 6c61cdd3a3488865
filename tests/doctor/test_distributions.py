"""host/distributions.py reads dist-info folders itself; importlib.metadata is the reference."""

from __future__ import annotations

import os
import sys
from importlib import metadata

from gpudoctor.host.distributions import DETAILED, INTERESTING_FILE_PREFIXES, installed_distributions, metadata_headers


def _reference(path: list[str]) -> list[tuple]:
    """What importlib.metadata says about the same entries, in the fields gpudoctor keeps."""
    cwd = os.path.realpath(os.getcwd())
    found = []
    for dist in metadata.distributions(path=path):
        location = str(dist.locate_file(""))
        if not location.startswith("/") or os.path.realpath(location) == cwd:
            continue
        name = dist.metadata["Name"]
        key = name.lower().replace("_", "-").replace(".", "-")
        detailed = key in DETAILED
        found.append((
            key,
            dist.version or "",  # a metadata without a version: ours says "" (Distribution.version is a str)
            location,
            tuple(dist.requires or ()) if key == "torch" else (),
            tuple(str(f) for f in (dist.files or ()) if str(f).startswith(INTERESTING_FILE_PREFIXES))
            if detailed and key != "torch" else (),
            dist.read_text("direct_url.json") if detailed else None,
        ))
    return found


def _ours(path: list[str]) -> list[tuple]:
    return [(d.name.lower().replace("_", "-").replace(".", "-"), d.version, d.location, d.requires, d.files,
             d.direct_url) for d in installed_distributions(path)]


def test_this_interpreter_matches_importlib_metadata():
    path = [p for p in sys.path if p.startswith("/")]
    ours, reference = _ours(path), _reference(path)
    assert len(ours) > 5  # pytest, packaging, rich, ... are installed
    assert sorted(ours) == sorted(reference)


def _dist_info(site, folder, metadata_text, record=None, direct_url=None):
    path = site / folder
    path.mkdir(parents=True)
    (path / "METADATA").write_bytes(metadata_text if isinstance(metadata_text, bytes) else metadata_text.encode())
    if record is not None:
        (path / "RECORD").write_text(record)
    if direct_url is not None:
        (path / "direct_url.json").write_text(direct_url)


def test_layouts_match_importlib_metadata(tmp_path):
    site, other = tmp_path / "site-packages", tmp_path / "other site"
    _dist_info(
        site, "torch-2.11.0+cu130.dist-info",
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n"
        "Requires-Dist: triton==3.6.0; platform_system == \"Linux\"\n"
        "Requires-Dist: cuda-toolkit[cublas,cudart]==13.0.2\nSummary: x\n\nRequires-Dist: not-a-header\n",
        direct_url='{"url": "file:///wheels/torch.whl"}',
    )
    _dist_info(
        site, "bitsandbytes-0.50.2.dist-info", "Metadata-Version: 2.1\nName: bitsandbytes\nVersion: 0.50.2\n\n",
        record='bitsandbytes/__init__.py,sha256=x,10\n'
               'bitsandbytes/libbitsandbytes_cuda130.so,sha256=y,20\n'
               '"bitsandbytes/libbitsandbytes_cuda,odd.so",sha256=z,30\n'
               '"other,file.py",,\n',
    )
    # importlib.metadata drops RECORD entries missing on disk since Python 3.12: make them real
    (site / "bitsandbytes").mkdir()
    for name in ("__init__.py", "libbitsandbytes_cuda130.so", "libbitsandbytes_cuda,odd.so"):
        (site / "bitsandbytes" / name).write_bytes(b"")
    (site / "other,file.py").write_bytes(b"")
    (site / "flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so").write_bytes(b"")
    _dist_info(site, "Flash_Attn-2.8.3.dist-info", "Name: flash_attn\nVersion: 2.8.3\n\n",
               record="flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so,,\n",
               direct_url='{"url": "https://x/flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312.whl"}')
    _dist_info(site, "plain_pkg-1.0.dist-info", "Name: plain-pkg\nVersion: 1.0\n\n")
    _dist_info(site, "noversion.dist-info", "Name: noversion\nVersion: 0.1\n\n")  # folder name does not parse
    egg = site / "legacy_pkg-3.2-py3.12.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy-pkg\nVersion: 3.2\n\n")
    _dist_info(other, "bitsandbytes-0.45.0.dist-info", "Name: bitsandbytes\nVersion: 0.45.0\n\n")
    (tmp_path / "not-a-dir.zip").write_bytes(b"not a zip")
    path = [str(site) + "/", str(other), str(tmp_path / "missing"), str(tmp_path / "not-a-dir.zip")]

    ours, reference = _ours(path), _reference(path)
    assert sorted(ours) == sorted(reference)
    by_name = {(d.name, d.version): d for d in installed_distributions(path)}
    assert by_name[("torch", "2.11.0+cu130")].requires == (
        'triton==3.6.0; platform_system == "Linux"', "cuda-toolkit[cublas,cudart]==13.0.2")
    assert by_name[("bitsandbytes", "0.50.2")].files == (
        "bitsandbytes/libbitsandbytes_cuda130.so", "bitsandbytes/libbitsandbytes_cuda,odd.so")
    assert by_name[("bitsandbytes", "0.45.0")].location == str(other)
    assert ("legacy-pkg", "3.2") in by_name and ("noversion", "0.1") in by_name


def test_unreadable_metadata_is_skipped_not_fatal(tmp_path):
    site = tmp_path / "site"
    _dist_info(site, "torch-2.5.0.dist-info", "Name: torch\nVersion: 2.5.0\nRequires-Dist: x\n\n")
    _dist_info(site, "fine-1.0.dist-info", "Name: fine\nVersion: 1.0\n\n")
    # Unreadable even for root (tests run as root on CI): METADATA is a directory.
    (site / "torch-2.5.0.dist-info" / "METADATA").unlink()
    (site / "torch-2.5.0.dist-info" / "METADATA").mkdir()
    found = {d.name: d for d in installed_distributions([str(site)])}
    assert found["fine"].version == "1.0"
    assert found["torch"].version == "2.5.0" and found["torch"].requires == ()  # name from the folder


def test_non_utf8_metadata_is_read(tmp_path):
    # importlib.metadata raises UnicodeDecodeError on this one (and the old code then lost it).
    site = tmp_path / "site"
    _dist_info(site, "torch-2.5.0.dist-info", b"Name: torch\nVersion: 2.5.0\nSummary: \xff\xfe\nRequires-Dist: x\n\n")
    (found,) = installed_distributions([str(site)])
    assert (found.name, found.version, found.requires) == ("torch", "2.5.0", ("x",))


def test_metadata_headers_stop_at_the_body(tmp_path):
    path = tmp_path / "METADATA"
    path.write_text("Name: a\nKeywords: x,\n\ty\n\nName: body\n")
    assert metadata_headers(str(path)) == {"name": ["a"], "keywords": ["x, y"]}
    assert metadata_headers(str(tmp_path / "missing")) == {}


def test_egg_info_in_every_form_matches_importlib_metadata(tmp_path):
    """setuptools' older layout (conda and distribution Pythons carry many): a folder with PKG-INFO,
    the PKG-INFO file itself, one without a version (left to importlib.metadata), and a DETAILED
    package's (its files come from importlib.metadata)."""
    site = tmp_path / "site"
    site.mkdir()
    folder = site / "six-1.16.0-py3.12.egg-info"
    folder.mkdir()
    (folder / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\nSummary: x\n\nbody\n")
    (site / "distro_info-1.1-py3.12.egg-info").write_text("Metadata-Version: 1.2\nName: distro-info\nVersion: 1.1\n\n")
    broken = site / "noversion-0.egg-info"
    broken.mkdir()
    (broken / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: noversion\n\n")
    detailed = site / "bitsandbytes-0.41.0-py3.12.egg-info"
    detailed.mkdir()
    (detailed / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: bitsandbytes\nVersion: 0.41.0\n\n")
    (detailed / "SOURCES.txt").write_text("bitsandbytes/libbitsandbytes_cuda118.so\n")
    path = [str(site)]
    assert sorted(_ours(path)) == sorted(_reference(path))
    found = {d.name: d.version for d in installed_distributions(path)}
    assert found["six"] == "1.16.0" and found["distro-info"] == "1.1" and found["bitsandbytes"] == "0.41.0"


def test_plain_egg_info_is_read_without_importlib_metadata(tmp_path):
    """importlib.metadata's import is 12-18 ms of preflight's first call: a site-packages with
    only plain egg-info folders does not need it."""
    import subprocess

    site = tmp_path / "site"
    folder = site / "six-1.16.0-py3.12.egg-info"
    folder.mkdir(parents=True)
    (folder / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n\n")
    code = ("import sys; from gpudoctor.host.distributions import installed_distributions as d; "
            f"print([x.version for x in d([{str(site)!r}])], 'importlib.metadata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))).stdout
    assert out.split() == ["['1.16.0']", "False"]


def test_an_unzipped_egg_on_sys_path_is_listed(tmp_path):
    """`python setup.py install` builds (flash-attn, apex, xformers from source) leave an egg directory
    on sys.path holding EGG-INFO; importlib.metadata lists it, and so must we."""
    egg = tmp_path / "flash_attn-2.5.6-py3.12-linux-x86_64.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.5.6\n\n")
    path = [str(egg)]
    assert sorted(_ours(path)) == sorted(_reference(path))
    assert [(d.name, d.version) for d in installed_distributions(path)] == [("flash-attn", "2.5.6")]


def test_headers_are_read_to_the_blank_line_only(tmp_path):
    path = tmp_path / "PKG-INFO"
    path.write_bytes(b"Name: big\nVersion: 1\n\n" + b"x" * (2 << 20))  # a long description after the headers
    assert metadata_headers(str(path)) == {"name": ["big"], "version": ["1"]}
