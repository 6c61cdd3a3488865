"""What the user sees: a live progress display while the child works, and the backend matrix
("what works on this machine, and how fast") after the report. rich only; no torch."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

_MARK = {"pass": "[green]✓[/]", "fail": "[red]✗[/]", "error": "[red]✗[/]", "skip": "[dim]-[/]"}


class LiveProgress:
    """Follows the child's stage events: a spinner on the running stage, a mark and time on done ones."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.rows: dict[str, dict] = {}
        self.header = "training pass: starting the child process"
        self.live: Live | None = None

    def __enter__(self):
        self.live = Live(self._render(), console=self.console, refresh_per_second=8, transient=False)
        self.live.__enter__()
        return self

    def __exit__(self, *exc):
        self.live.update(self._render())
        self.live.__exit__(*exc)

    def update(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "info":
            mode = "GPU" if event.get("mode") == "gpu" else "Triton interpreter mode (no GPU; TRITON_INTERPRET=1)"
            self.header = f"training pass: preset {event.get('preset')} on {event.get('device')}, {mode}"
            if event.get("note"):
                self.header += f" ({event['note']})"
        elif kind == "stage-start":
            self.rows[event["id"]] = {"title": event.get("title", event["id"]), "started": time.perf_counter()}
        elif kind == "stage-end":
            row = self.rows.setdefault(event["id"], {"title": event.get("title", event["id"])})
            row.update(status=event.get("status"), ms=event.get("duration_ms"), summary=event.get("summary", ""))
        if self.live:
            self.live.update(self._render())

    def _render(self) -> Table:
        table = Table.grid(padding=(0, 1))
        table.add_row(f"[bold]{escape(self.header)}[/]")
        for row in self.rows.values():
            if "status" in row:
                mark = _MARK.get(row["status"], "?")
                extra = f" [dim]{row['ms'] / 1000:.1f} s[/]" if row.get("ms") is not None else ""
                summary = f" — {escape(row['summary'])}" if row.get("summary") else ""
                table.add_row(f"  {mark} {escape(row['title'])}{extra}{summary}")
            else:
                elapsed = time.perf_counter() - row["started"]
                table.add_row(f"  [cyan]…[/] {escape(row['title'])} [dim]{elapsed:.0f} s[/]")
        return table


def _ms(value) -> str:
    return "" if value is None else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def matrix_table(capability: str, block: dict, interpreted: bool) -> Table:
    title = f"{capability}: what works here, and how fast" + (" (interpreted: times are not speeds)" if interpreted else "")
    table = Table(title=title, title_justify="left")
    for column in ("backend", "status", "fwd ms", "bwd ms", "max err", "tolerance"):
        table.add_column(column, no_wrap=True)
    for row in block.get("rows", []):
        fastest = row["backend"] == block.get("fastest")
        name = f"[bold green]{row['backend']}*[/]" if fastest else row["backend"]
        style = {"works": "green", "mismatch": "red", "fails": "yellow", "unavailable": "dim"}.get(row["status"], "")
        errors = row.get("errors") or {}
        worst = f"{max(errors.values()):.1e}" if errors else ""
        table.add_row(name, f"[{style}]{row['status']}[/]", _ms(row.get("forward_ms")), _ms(row.get("backward_ms")),
                      worst, f"{row['tolerance']:.0e}" if row.get("tolerance") else "")
    table.caption = "* fastest working (forward + backward)"
    table.caption_justify = "left"
    return table


def print_matrix(console: Console, capability: str, block: dict, interpreted: bool) -> None:
    console.print(matrix_table(capability, block, interpreted))
    for row in block.get("rows", []):
        if row["status"] != "works":
            console.print(f"  [dim]{escape(row['backend'])} ({row['stage']}): {escape(row['reason'][:240])}[/]",
                          highlight=False)


def print_train_summary(console: Console, data: dict) -> None:
    if data.get("status") == "skipped":
        console.print(f"[yellow]Training pass skipped:[/] {escape(data.get('reason', ''))}", highlight=False)
        return
    interpreted = data.get("mode") == "interpreter"
    label = "Triton interpreter mode (TRITON_INTERPRET=1, CPU): proves the code path, times mean nothing" \
        if interpreted else f"GPU: {(data.get('device') or {}).get('name')}"
    console.print(f"[bold]Training pass[/] — preset {data.get('preset')}, {label}", highlight=False)
    for capability, block in (data.get("matrix") or {}).items():
        print_matrix(console, {"nf4": "NF4 dequant", "attention": "Attention"}.get(capability, capability),
                     block, interpreted)
    training = data.get("training") or {}
    if training.get("losses"):
        console.print(f"  loss {training['losses'][0]} -> {training['losses'][-1]} over {len(training['losses'])} steps, "
                      f"median step {training.get('median_step_ms', '?')} ms, first-step overhead "
                      f"{training.get('first_step_overhead_ms', '?')} ms (JIT compiles)", highlight=False)
    compiled = data.get("compile")
    if compiled:
        console.print(f"  torch.compile: {compiled.get('graph_breaks')} graph breaks, {compiled.get('graphs')} graph(s)"
                      + (f": {compiled['break_reasons'][:3]}" if compiled.get("break_reasons") else ""), highlight=False)
    peft = data.get("peft")
    if peft and peft.get("unsloth"):
        console.print(f"  Unsloth would log: {escape(peft['unsloth']['would_log'])}", highlight=False)
    timings = data.get("timings_ms") or {}
    child = data.get("child") or {}
    console.print(f"  [dim]child wall {child.get('wall_s', 0):.1f} s (torch+triton import "
                  f"{timings.get('import_torch_triton', 0) / 1000:.1f} s)[/]", highlight=False)


def print_child_result(result: dict) -> None:
    """``python -m gpudoctor.train`` without --json: the raw result, readable."""
    console = Console()
    for stage in result.get("stages", []):
        reason = stage.get("problems") or (stage.get("failure") or {}).get("message", "")
        console.print(f"{_MARK.get(stage['status'], '?')} {escape(stage['title'])} "
                      f"[dim]{stage.get('duration_ms', 0) / 1000:.1f} s[/] {escape(str(reason or ''))}", highlight=False)
        detail = stage.get("detail") or {}
        if stage["id"].endswith("-backends") and detail:
            print_matrix(console, stage["id"].replace("-backends", ""), detail, result.get("mode") == "interpreter")


class TrainReporter:
    """The training pass's final report (``view.extra["train"]``) as text; terminal styling only
    when ``tty``, and never wrapped or auto-highlighted (see ``report.terminal``)."""

    def __init__(self, tty: bool = False) -> None:
        self.tty = tty

    def render(self, report) -> str:
        from ..report.terminal import rendered

        data = dict(report.extra).get("train")
        if data is None:
            return ""
        return rendered(lambda console: print_train_summary(console, data), self.tty)
