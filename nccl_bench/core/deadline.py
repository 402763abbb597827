"""A monotonic deadline shared by the steps of one bounded operation."""
from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Deadline:
    seconds: float
    start: float = field(default_factory=time.monotonic)

    @property
    def at(self) -> float:
        return self.start + self.seconds

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    @classmethod
    def never(cls) -> "Deadline":
        return cls(seconds=10 * 365 * 86400.0)
