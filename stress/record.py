"""One rank's record of one round: what it saw, kept as evidence for the round's verdict (stress.diagnose)
and written into the journal line under "ranks". Its JSON form is here alone (to_json, from_json); the
journal's schema is that form, so old journals read the same."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

# written only when set, as the journal has always had them
OPTIONAL = ("sample", "stop", "teardown_error")


@dataclass
class RankRecord:
    rank: int
    verdict: str = "ok"  # ok | hang | error | wrong | stale
    error: dict | None = None  # CommError.as_dict() of what ended the round here, with the phase
    wrong: int = 0  # result elements that differ from the table
    exchange_s: float | None = None  # the unique-ID exchange
    init_s: float | None = None  # the whole create call (exchange included), timed from outside it
    verify_s: float | None = None  # the checked collective
    teardown_s: float | None = None  # destroy (or abort); with --destroys-in-flight filled in later
    evidence: dict | None = None  # the fingerprints of the IDs this rank used (and published, as a root)
    phases: list[str] = field(default_factory=list)  # the phases it entered, in order
    late_s: float | None = None  # how late after the round's start it entered its bootstrap
    input_wrong: int = 0  # elements of its own input that differed from the table
    wrong_from: list[int] | None = None  # the ranks whose data arrived wrong here
    elapsed_s: float | None = None
    sample: dict | None = None  # --leak-every: its resources after this round's init
    stop: str | None = None  # why it was asked to stop before this round's records met
    teardown_error: dict | None = None  # a destroy behind the round that failed

    @property
    def last_phase(self) -> str | None:
        return self.phases[-1] if self.phases else None

    def to_json(self) -> dict:
        out = asdict(self)
        for k in OPTIONAL:
            if out[k] is None:
                del out[k]
        return out

    @classmethod
    def from_json(cls, d: dict) -> "RankRecord":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def record_or_none(d: dict | None) -> RankRecord | None:
    return None if d is None else RankRecord.from_json(d)
