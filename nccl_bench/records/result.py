"""One result file as every reader sees it: its kind, its metadata block and its flat rows."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Result:
    path: Path
    given: str  # the name as the user typed it (the report names inputs this way)
    kind: str
    meta: dict
    rows: list[dict]
    notes: list[dict] = field(default_factory=list)  # stress journal: baseline, resume and end lines
    damaged: list[int] = field(default_factory=list)  # stress journal: lines a kill cut short (1-based)
    top: dict = field(default_factory=dict)  # keys beside the rows (a stress summary's failures, rounds)
    cycles: list[dict] | None = None  # bench -N: every cycle's rows (`rows` holds their medians)
    said: list[str] = field(default_factory=list)  # what reading it found worth saying (bench: sizes reordered)

    def every_cycle(self) -> list[dict]:
        """A bench file's rows of every cycle (other kinds: the rows)."""
        return self.rows if self.cycles is None else self.cycles

    def reading(self) -> list[str]:
        """What reading this file found worth saying: lines cut short, the rounds read, sizes reordered."""
        if self.kind != "stress":
            return list(self.said)
        return [f"{self.given} line {n}: cut short (a write interrupted), skipped" for n in self.damaged] + [
            f"{self.given}: {len(self.rows)} round(s) read"] + self.said

    @property
    def machine(self) -> str:
        return self.meta.get("machine") or "?"

    @property
    def hosts(self) -> list[str]:
        return list(self.meta.get("hosts") or [])

    @property
    def backend(self) -> str | None:
        return self.meta.get("backend")

    @property
    def nranks(self) -> int | None:
        for block in ("bench", "params", "options"):
            n = (self.meta.get(block) or {}).get("nranks")
            if n:
                return n
        return None

    def block(self, name: str) -> dict:
        """A named block of the metadata ({} where absent): `replay`, `sequence`, `measurements`, ..."""
        got = self.meta.get(name)
        return got if isinstance(got, dict) else {}

    def versions(self) -> str:
        """'torch 2.11.0+cu130, NCCL 2.28.9' (what is known)."""
        v = self.block("versions")
        parts = [f"torch {v['torch']}" if v.get("torch") else None,
                 f"NCCL {v['nccl']}" if v.get("nccl") else None,
                 f"nccl4py {v['nccl4py']}" if v.get("nccl4py") else None,
                 f"driver {v['driver']}" if v.get("driver") else None]
        return ", ".join(p for p in parts if p) or "versions unknown"

    def title(self) -> str:
        """Machine, backend x ranks and versions, for plot titles."""
        who = self.machine + (f" ({self.backend} x{self.nranks})" if self.backend and self.nranks
                              else f" ({self.backend})" if self.backend else "")
        return f"{who} · {self.versions()}"
