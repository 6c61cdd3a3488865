"""Reporters behind one interface (``base.Reporter``: render a report to text): terminal (rich),
JSON (the contract, one envelope: ``report_dict``), Markdown, explain, the training pass and the
preflight summary. Everything is imported lazily: preflight's cached path imports
``report.preflight`` alone, and rich only loads when a terminal report is rendered."""

import importlib

_WHERE = {
    "render_json": "json", "report_dict": "json", "finding_to_json": "json", "JsonReporter": "json",
    "render_markdown": "markdown", "MarkdownReporter": "markdown",
    "print_report": "terminal", "print_findings": "terminal", "TerminalReporter": "terminal",
    "ExplainReporter": "explain",
    "ReportView": "base", "Reporter": "base",
    "PreflightReporter": "preflight",
    "RunReporter": "run",
    "machine_summary": "summary",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(name)
