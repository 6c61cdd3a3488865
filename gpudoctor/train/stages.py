"""Runs the child's stages one by one: each is timed, announced to the parent (progress events),
and caught, so one failing stage becomes data and the next still runs. After an illegal memory
access or another sticky CUDA error the context is unusable, so the remaining GPU stages are
skipped with that reason instead of failing confusingly."""

from __future__ import annotations

import time
from typing import Any, Callable

from .errors import FATAL_KINDS, classify
from .protocol import emit


class StageRunner:
    def __init__(self) -> None:
        self.stages: list[dict[str, Any]] = []
        self.fatal: str | None = None

    def run(self, stage_id: str, title: str, fn: Callable[[], Any],
            problems: Callable[[Any], list[str]] = lambda value: []) -> Any:
        if self.fatal:
            record = {"id": stage_id, "title": title, "status": "skip", "duration_ms": 0.0,
                      "reason": f"skipped: the CUDA context is unusable after {self.fatal}"}
            self.stages.append(record)
            emit("stage-end", **record)
            return None
        emit("stage-start", id=stage_id, title=title)
        start = time.perf_counter()
        record: dict[str, Any] = {"id": stage_id, "title": title}
        value = None
        try:
            value = fn()
            found = problems(value)
            record.update(status="fail" if found else "pass", problems=found)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a diagnosis
            failure = classify(exc)
            record.update(status="error", failure=failure)
            if failure["kind"] in FATAL_KINDS:
                self.fatal = f"{failure['kind']} in stage {stage_id}"
        record["duration_ms"] = round((time.perf_counter() - start) * 1000, 1)
        if value is not None:
            record["detail"] = value
        self.stages.append(record)
        emit("stage-end", **{k: v for k, v in record.items() if k != "detail"},
             summary=_summary(stage_id, value))
        return value


def _summary(stage_id: str, value: Any) -> str:
    """One line for the progress display."""
    if not isinstance(value, dict):
        return ""
    if stage_id == "training" and value.get("losses"):
        losses = value["losses"]
        return f"loss {losses[0]} -> {losses[-1]}"
    if stage_id.endswith("-backends") and value.get("fastest"):
        return f"fastest: {value['fastest']}"
    if stage_id == "compile" and "graph_breaks" in value:
        return f"{value['graph_breaks']} graph breaks"
    return ""
