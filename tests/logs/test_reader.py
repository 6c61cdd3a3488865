"""Input edge cases: ANSI colours, '\\r' progress bars, CRLF, non-UTF-8 bytes, gzip, stdin,
UTF-16, a 100 MB line, and constant memory while streaming."""

from __future__ import annotations

import gzip
import io
import sys
import tracemalloc

import pytest

from gpudoctor.logs import LogInputError, diagnose_lines, diagnose_paths
from gpudoctor.logs.matcher import MAX_PENDING

LCUDA = "/usr/bin/ld: cannot find -lcuda: No such file or directory"
GCC = "#error -- unsupported GNU version! gcc versions later than 12 are not supported!"


def ids(findings):
    return [f.id for f in findings]


def write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_ansi_colour_codes_are_stripped_before_matching(tmp_path):
    line = "\x1b[1;31mERROR\x1b[0m \x1b[33m#error -- unsupported GNU version! gcc versions later than \x1b[1m12\x1b[0m are not supported!\x1b[0m\n"
    [finding] = diagnose_paths([write(tmp_path, "a.log", line.encode())])
    assert finding.id == "nvcc-host-compiler-unsupported"
    assert finding.evidence["values"]["gcc_limit"] == "12"
    assert "\x1b" not in finding.evidence["line"]


def test_carriage_return_progress_bars_split_lines(tmp_path):
    bar = "".join(f"\r{i:3d}%|{'█' * (i // 10):<10}| {i}/100 [00:0{i % 10}<00:10]" for i in range(100))
    data = (bar + "\r" + LCUDA + "\r" + bar + "\n").encode()
    [finding] = diagnose_paths([write(tmp_path, "tqdm.log", data)])
    assert finding.id == "libcuda-unversioned-missing"
    assert finding.evidence["line"] == LCUDA  # not the whole redrawn bar


def test_crlf_line_endings(tmp_path):
    data = ("step 1\r\n" + GCC + "\r\n" + "step 2\r\n").encode()
    [finding] = diagnose_paths([write(tmp_path, "win.log", data)])
    assert finding.evidence["line_number"] == 2
    assert finding.evidence["values"]["gcc_limit"] == "12"


def test_non_utf8_bytes_are_replaced_not_fatal(tmp_path):
    data = b"\xff\xfe\x80 garbage \xc3\x28\n" + b"caf\xe9 " + LCUDA.encode() + b"\n" + b"\x00\x01\x02\n"
    assert ids(diagnose_paths([write(tmp_path, "latin1.log", data)])) == ["libcuda-unversioned-missing"]


def test_gzip_by_content_and_by_name(tmp_path):
    payload = ("warming up\n" + LCUDA + "\n").encode()
    gz = gzip.compress(payload)
    assert ids(diagnose_paths([write(tmp_path, "run.log.gz", gz)])) == ["libcuda-unversioned-missing"]
    assert ids(diagnose_paths([write(tmp_path, "no-suffix.log", gz)])) == ["libcuda-unversioned-missing"]


def test_truncated_gzip_is_a_one_line_error(tmp_path):
    gz = gzip.compress(("x" * 100000 + LCUDA).encode())[:-8]  # lose the trailer
    with pytest.raises(LogInputError) as exc:
        diagnose_paths([write(tmp_path, "cut.log.gz", gz)])
    assert "\n" not in str(exc.value) and "cut.log.gz" in str(exc.value)


def test_utf16_powershell_redirect(tmp_path):
    data = ("\ufeffEpoch 1\r\n" + LCUDA + "\r\n").encode("utf-16-le")
    assert ids(diagnose_paths([write(tmp_path, "ps.log", data)])) == ["libcuda-unversioned-missing"]


def test_stdin_dash(monkeypatch):
    fake = io.TextIOWrapper(io.BytesIO(("hello\n" + GCC + "\n").encode()))
    monkeypatch.setattr(sys, "stdin", fake)
    [finding] = diagnose_paths(["-"])
    assert finding.id == "nvcc-host-compiler-unsupported"
    assert finding.evidence["log"] == "<stdin>"


def test_unreadable_inputs_raise_one_line_errors(tmp_path):
    for path, reason in ((str(tmp_path / "missing.log"), "no such file"), (str(tmp_path), "is a directory")):
        with pytest.raises(LogInputError) as exc:
            diagnose_paths([path])
        assert reason in str(exc.value)


def test_diagnose_lines_with_and_without_newlines():
    assert ids(diagnose_lines(["a", LCUDA, "b"])) == ["libcuda-unversioned-missing"]
    assert ids(diagnose_lines(["a\n", LCUDA + "\n"])) == ["libcuda-unversioned-missing"]
    assert diagnose_lines([]) == []


def test_100_mb_line_in_bounded_memory(tmp_path):
    """A 100 MB line with no newline (a runaway progress bar) with failures in the middle and at
    the end: both are found, and memory stays far below the line's size."""
    path = tmp_path / "huge.log"
    piece = b"\r 42%|####      | 4200/10000 [01:02<01:30, 3.3it/s]" * 2000  # ~100 KB, no newline
    with open(path, "wb") as f:
        for i in range(1000):
            f.write(piece)
            if i == 500:
                f.write(GCC.encode())
        f.write(b" " + LCUDA.encode())
    assert path.stat().st_size > 100_000_000
    tracemalloc.start()
    found = ids(diagnose_paths([str(path)]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert sorted(found) == ["libcuda-unversioned-missing", "nvcc-host-compiler-unsupported"]
    assert peak < 16 * MAX_PENDING, f"peak {peak / 1e6:.1f} MB"


@pytest.mark.parametrize("offset", [0, 1, 17, 4095, 4096, 8191, 8192, 9000])
def test_a_match_straddling_long_line_pieces_is_found_once(offset):
    from gpudoctor.logs import default_matcher

    scanner = default_matcher().scanner()
    before = b"x" * (MAX_PENDING + offset)
    data = before + LCUDA.encode() + b"y" * (MAX_PENDING // 2)
    for i in range(0, len(data), 65536):  # fed in chunks, as the reader does
        scanner.feed(data[i : i + 65536])
    scanner.close()
    assert scanner.hits["ld-cannot-find-lcuda"].count == 1


def test_memory_is_flat_as_the_stream_grows():
    from gpudoctor.logs import default_matcher

    line = b"{'loss': 1.2345, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.5}\n" * 14000  # ~1 MB
    scanner = default_matcher().scanner()
    tracemalloc.start()
    for _ in range(5):
        scanner.feed(line)
    small = tracemalloc.get_traced_memory()[1]
    for _ in range(45):
        scanner.feed(line)
    large = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert large <= small * 1.2 + 65536


# -- the gated literal search the scanner uses (gpudoctor/logs/gated_find.py) -----------------

def _plain_line_starts(block: bytes, literal: bytes, start: int) -> list[int]:
    found, pos = [], block.find(literal, start)
    while pos != -1:
        found.append(pos)
        line_end = block.find(b"\n", pos)
        if line_end == -1:
            break
        pos = block.find(literal, line_end)
    return found


def test_gated_search_finds_exactly_what_a_plain_find_loop_finds():
    import random

    from gpudoctor.logs.gated_find import gate_of, line_starts
    from gpudoctor.logs.matcher import Matcher
    from gpudoctor.logs.signatures import load_signatures

    rng = random.Random(15)
    literals = list(Matcher(load_signatures()).by_trigger)
    alphabet = b"abcdefVXqQzx `\n\r:;/.-_ CUDA rror NCCL"
    for _ in range(300):
        literal = rng.choice(literals)
        pieces = [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(rng.randint(1, 30))]
        # literals planted whole, cut short, twice on one line, at the edges
        block = b"".join(piece + rng.choice([literal, literal[:-1], literal + literal, b""]) for piece in pieces)
        start = rng.randint(0, max(0, len(block) - 1))
        assert line_starts(block, literal, gate_of(literal), start) == _plain_line_starts(block, literal, start)


def test_gated_search_falls_back_when_the_gate_byte_is_common():
    from gpudoctor.logs.gated_find import gate_of, line_starts

    literal = b"NVML/RM version mismatch"
    offset, byte = gate_of(literal)
    block = (bytes([byte]) * 50_000 + b"\n") * 40 + b"x " + literal + b"\n" + bytes([byte]) * 1000 + literal
    assert line_starts(block, literal, (offset, byte), 0) == _plain_line_starts(block, literal, 0)


# nvidia-smi's message as qixuema/envs#4 pasted it: U+2018 for the apostrophe
SMI_TYPOGRAPHIC = "NVIDIA-SMI has failed because it couldn\u2018t communicate with the NVIDIA driver."


@pytest.mark.parametrize("text, rule", [
    (SMI_TYPOGRAPHIC, "no-nvidia-driver"),
    (SMI_TYPOGRAPHIC.replace("\u2018", "\u2019"), "no-nvidia-driver"),
    ("ModuleNotFoundError: No module named \u2018triton\u2019", "triton-missing"),
    # a keyword whose trigger literal itself holds the quote ("mport name '"): folded before the byte search
    ("ImportError: cannot import name \u2018EncoderDecoderCache\u2019 from \u2018transformers\u2019",
     "peft-transformers-incompatible"),
])
def test_typographic_quotes_are_read_as_ascii(text, rule):
    assert ids(diagnose_lines([text]))[:1] == [rule]


def test_a_typographic_quote_split_between_chunks_is_folded():
    from gpudoctor.logs import LogDiagnoser

    data = (SMI_TYPOGRAPHIC + "\n").encode("utf-8")
    cut = data.index("\u2018".encode("utf-8"))
    for split in (cut + 1, cut + 2):  # after the first byte of the three, after the second
        diagnoser = LogDiagnoser()
        diagnoser.feed(data[:split])
        diagnoser.feed(data[split:])
        assert ids(diagnoser.findings()) == ["no-nvidia-driver"], split


def test_folding_changes_only_the_four_quotes():
    from gpudoctor.logs.cleaning import fold_quotes

    text = "\u2018a\u2019 \u201cb\u201d \u2026 \u2014 \u2588\u258f 100%|\u2588\u2588| \u00e9 \u4e2d"
    assert fold_quotes(text) == "'a' \"b\" \u2026 \u2014 \u2588\u258f 100%|\u2588\u2588| \u00e9 \u4e2d"
    assert fold_quotes("plain ASCII 'x'") == "plain ASCII 'x'"


def test_no_trigger_literal_holds_a_quote():
    # Quotes are folded on the decoded lines, after the byte search for triggers: a trigger with a
    # quote in it would miss the line a typographic quote was pasted into.
    from gpudoctor.logs import default_matcher

    assert [t for t in default_matcher().by_trigger if set(t.decode()) & set("'\"\u2018\u2019\u201c\u201d")] == []
