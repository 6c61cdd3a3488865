"""Formatters behind one interface: terminal (rich), JSON (the contract), Markdown."""

from .json import render_json, report_dict
from .markdown import render_markdown

__all__ = ["render_json", "report_dict", "render_markdown", "print_report", "print_findings"]


def __getattr__(name):
    # rich is imported only when a terminal report is printed.
    if name in ("print_report", "print_findings"):
        from . import terminal

        return getattr(terminal, name)
    raise AttributeError(name)
