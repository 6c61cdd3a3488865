"""HostError: unusable input to gpudoctor itself (a corrupt or unsafe snapshot)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class HostError(Exception):
    """Raised only for unusable input to gpudoctor itself (a corrupt snapshot), never for
    trouble on the machine being examined."""

    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message
