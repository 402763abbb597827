"""The record every health check returns: pass, warn, fail or skip, with the evidence it read
and the action an operator should take."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

STATUSES = ("pass", "warn", "fail", "skip")


@dataclass
class Check:
    name: str
    status: str  # pass | warn | fail | skip
    evidence: str
    action: str = ""
    rank: int | None = None
    host: str = ""
    data: dict = field(default_factory=dict)  # numbers behind the evidence (JSON)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name}: status must be one of {STATUSES}, got {self.status!r}")

    def as_dict(self) -> dict:
        return asdict(self)

