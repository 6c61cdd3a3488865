"""The honest "unknown": the last exception of a log and where it was raised."""

from __future__ import annotations

from pathlib import Path

from gpudoctor.logs import diagnose_paths
from gpudoctor.logs.last_exception import last_exception

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def test_last_traceback_wins_and_names_its_innermost_frame():
    log = """step 1
Traceback (most recent call last):
  File "a.py", line 3, in <module>
    main()
ValueError: first
During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "train.py", line 10, in <module>
    main()
  File "/usr/lib/python3.10/site-packages/foo/bar.py", line 42, in step
    x = y[3]
    ~^^^
IndexError: list index out of range
wandb: Waiting for W&B process to finish... (failed 1).
""".splitlines()
    exc = last_exception(log)
    assert exc.type == "IndexError" and exc.message == "list index out of range"
    assert exc.where == "/usr/lib/python3.10/site-packages/foo/bar.py:42 in step"
    assert exc.line_number == 14


def test_rank_prefixed_traceback_from_torchrun():
    log = ["[rank1]: Traceback (most recent call last):",
           '[rank1]:   File "/w/train.py", line 7, in <module>',
           "[rank1]:     loss.backward()",
           "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    exc = last_exception(log)
    assert exc.type == "torch.OutOfMemoryError"
    assert exc.message.startswith("CUDA out of memory")
    assert exc.where == "/w/train.py:7 in <module>"


def test_message_on_the_next_line():
    log = ["Traceback (most recent call last):", '  File "setup.py", line 1, in <module>', "RuntimeError:",
           "Something odd happened"]
    assert last_exception(log).message == "Something odd happened"


def test_cpp_exception_and_bare_error_lines():
    log = ["terminate called after throwing an instance of 'c10::Error'", "  what():  unknown thing"]
    exc = last_exception(log)
    assert (exc.type, exc.message, exc.where) == ("c10::Error", "unknown thing", None)
    assert last_exception(["INFO ok", "OSError: [Errno 28] No space left on device", "bye"]).type == "OSError"


def test_nothing_to_report():
    assert last_exception(["epoch 1 loss 2.0", "Done."]) is None


def test_a_real_fixture_with_a_long_message():
    # A bare exception line whose message is longer than MAX_MESSAGE (torch's OOM text).
    log = FIXTURES / "cuda-oom" / "pytorch-16417.log"
    assert diagnose_paths([str(log)])
    exc = last_exception(log.read_text(errors="replace").splitlines())
    assert exc is not None and exc.type


def test_huge_lines_are_bounded():
    import time

    start = time.perf_counter()
    last_exception(["A" * 10_000_000, "Traceback (most recent call last):", "x" * 1_000_000, "Error: " + "e" * 100_000])
    assert time.perf_counter() - start < 1.0


def test_paths_are_read_like_diagnose_paths(tmp_path):
    import gzip

    from gpudoctor.logs.last_exception import last_exception_in_paths

    plain = tmp_path / "a.log"
    plain.write_text("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nKeyError: 'a'\n")
    zipped = tmp_path / "b.log.gz"
    zipped.write_bytes(gzip.compress(b"x" * 3_000_000 + b"\nRuntimeError: boom\nbye\n"))
    exc = last_exception_in_paths([str(plain), str(zipped)])
    assert (exc.type, exc.message) == ("RuntimeError", "boom")
    assert last_exception_in_paths([str(plain)]).where == "x.py:1 in <module>"
