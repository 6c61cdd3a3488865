"""Rule ids named by ``--only`` / ``--skip`` (check, fix, explain) and ``preflight(skip=...)``:
one grammar and one validation. Items may repeat and may be comma-separated; an unknown id is
an error that lists the valid ones, since a misspelt ``--skip`` would otherwise silently check
everything and a misspelt ``--only`` would check nothing and pass."""

from __future__ import annotations

from typing import Iterable


class SelectionError(ValueError):
    """An id that is not in the catalogue, or a selection that cannot do what it says."""


def split_ids(items: Iterable[str]) -> list[str]:
    """``['a,b', 'c']`` -> ``['a', 'b', 'c']``, order kept, duplicates dropped."""
    ids: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if part and part not in ids:
                ids.append(part)
    return ids


def rule_ids(items: Iterable[str], detector: str | None = None, option: str = "--only") -> list[str]:
    """The ids in ``items``, each checked against the catalogue. With ``detector`` ("static",
    "log"), an id that detector never reports is an error too, saying where it is reported."""
    ids = split_ids(items)
    if not ids:
        return ids  # nothing to validate: no catalogue parse (preflight's first call pays it otherwise)
    from .knowledge import load_catalogue

    catalogue = load_catalogue()
    unknown = [i for i in ids if i not in catalogue]
    if unknown:
        raise SelectionError(f"unknown rule id(s) for {option}: {', '.join(unknown)}; "
                             f"valid: {', '.join(catalogue)}")
    if detector is not None:
        elsewhere = [i for i in ids if detector not in catalogue[i].detected_by]
        if elsewhere:
            where = "; ".join(f"{i} is reported by: {', '.join(catalogue[i].detected_by)}" for i in elsewhere)
            raise SelectionError(f"{option} {', '.join(elsewhere)}: not decided by the {detector} checks ({where}); "
                                 + ("use `gpudoctor explain LOG` or `check --log LOG`" if detector == "static"
                                    else "use `gpudoctor check`"))
    return ids


def selection(only: Iterable[str], skip: Iterable[str], detector: str | None = None) -> tuple[list[str], list[str]]:
    """``(only, skip)`` for one command, both validated: ``--only`` also against the detector
    that command runs (``fix`` acts on static findings, ``explain`` on log ones), ``--skip``
    against the catalogue only, since skipping what a command never reports is harmless."""
    return rule_ids(only, detector=detector, option="--only"), rule_ids(skip, option="--skip")
