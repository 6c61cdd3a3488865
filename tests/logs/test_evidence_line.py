"""The evidence a finding shows is the line where the matched text is, whichever pass found it.

Held-out round 2 (docs/diagnosis.md) found the joined-lines second chance recording the line
*before* the match: a trigger on an earlier line (``_error_if_any_worker_fails()`` holds "rror")
joined that line with the next one, the regex matched the next line's text, and the earlier line
was kept; the direct match on the real line was then skipped because the signature had a hit.
"""

from __future__ import annotations

from gpudoctor.logs import diagnose_lines

# torch's DataLoader message (torch/csrc/DataLoader.cpp), as in Megatron-LM#878
BUS_ERROR = ("RuntimeError: DataLoader worker (pid 56811) is killed by signal: Bus error. It is possible "
             "that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.")


def evidence(lines):
    [finding] = diagnose_lines(lines)
    return finding.evidence


def test_a_trigger_on_the_line_before_does_not_take_the_evidence():
    found = evidence(["    _error_if_any_worker_fails()", BUS_ERROR])
    assert found["line_number"] == 2
    assert found["line"].startswith("RuntimeError: DataLoader worker (pid 56811)")
    assert found["matches"] == 1  # one line shows it: not counted once joined and once direct


def test_the_same_log_without_the_trigger_line_before():
    found = evidence(["    handler()", BUS_ERROR])
    assert (found["line_number"], found["matches"]) == (2, 1)


def test_a_direct_match_later_in_the_block_is_kept():
    # pip's resolver, as in triton#3359: 'Uninstalling triton-2.2.0:' holds the trigger "riton"
    # three lines before the conflict line itself.
    lines = ["  Attempting uninstall: triton",
             "    Found existing installation: triton 2.2.0",
             "    Uninstalling triton-2.2.0:",
             "      Successfully uninstalled triton-2.2.0",
             "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed.",
             "torch 2.2.1 requires triton==2.2.0; platform_system == \"Linux\", but you have triton 3.0.0 which is incompatible.",
             "Successfully installed triton-3.0.0"]
    found = evidence(lines)
    assert found["line_number"] == 6
    assert found["line"].startswith("torch 2.2.1 requires triton==2.2.0")


def test_a_message_only_the_joined_lines_show_is_attributed_to_where_it_starts():
    # torch.utils.cpp_extension's message wrapped by pip: no single line matches, the joined text
    # does; the evidence is the line the matched text starts on, not the trigger line above it.
    # Broken mid-phrase: the keyword ("... used to compile") and its trigger are on line 4 only
    # once joined; the matched text starts on line 3.
    lines = ["      Traceback (most recent call last):",
             "      RuntimeError:",
             "      The detected CUDA version (12.1) mismatches the version",
             "      that was used to compile PyTorch (11.8).",
             "      [end of output]"]
    found = evidence(lines)
    assert found["line_number"] == 3
    assert found["line"].startswith("The detected CUDA version (12.1)")


def test_line_numbers_count_newlines_not_progress_bar_carriage_returns():
    # tqdm redraws with '\r': they split lines for matching but are not numbered lines.
    lines = ["epoch 1\r 10%|#         |\r 20%|##        |", "    _error_if_any_worker_fails()", BUS_ERROR]
    assert evidence(lines)["line_number"] == 3
