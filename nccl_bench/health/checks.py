"""Node health checks for `doctor` (and the error counters `accept` reads before and after).

Each check is a small function returning a Check: pass, warn, fail or skip, with the
evidence it read and the action an operator should take. GPU checks read NVML through
nvidia-ml-py (`pynvml`), imported lazily: without it, or without a driver or a GPU for
this rank, every GPU check is a skip that says why and the host checks still run.

NVLink error counters come from NVML field values (NVML_FI_DEV_NVLINK_ERROR_DL_*, one
scope per link); the older per-link error-counter call reports misleading numbers on
Hopper. XIDs are explained with the field guide's table (shared/seeds/
debugging-nccl-failures-in-production.txt, section 5), corrected where NVIDIA's Xid
catalog says otherwise.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

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


# --- XIDs: the field guide's table, with NVIDIA's catalog where the guide is off ---------------
# (meaning, action); "guide" marks the rows taken from the field guide as written.
XID_TABLE = {
    13: ("graphics engine exception (often an application bug)", "rerun; if it repeats on one GPU, run field diagnostics"),
    31: ("GPU memory page fault (usually an application bug)", "check the application; replace only if it follows the GPU"),
    43: ("GPU stopped processing (guide: 'NVLink error'; NVIDIA's catalog: channel reset, usually an application fault)",
         "guide: check nvidia-smi nvlink --errorcounters and cables; restart the application"),
    45: ("preemptive cleanup after an earlier error", "look at the XID logged before it"),
    48: ("uncorrected (double-bit) ECC error: GPU memory failing", "guide: replace GPU; drain the node now"),
    63: ("row remapping recorded (ECC)", "reset the GPU to apply the remap"),
    64: ("row remapping failed", "drain the node; replace the GPU"),
    74: ("NVLink error", "check nvidia-smi nvlink --errorcounters, reseat/check cables; reset the GPU"),
    79: ("GPU hang / fallen off the bus (guide: 'GPU hang detected')",
         "guide: driver or kernel bug, update driver; NVIDIA: drain, reset or reboot, check PCIe/power"),
    92: ("high single-bit ECC error rate", "watch the counters; replace if it keeps rising"),
    94: ("contained ECC error (guide: 'container error')",
         "guide: check CUDA/Docker compatibility; NVIDIA: restart the application, reset the GPU"),
    95: ("uncontained ECC error", "drain the node; reset the GPU"),
    119: ("GSP RPC timeout: driver-firmware communication failure", "guide: reload the driver or reboot"),
}
XID_SEVERE = {48, 64, 74, 79, 95, 119}  # hardware-side: fail when seen while doctor runs
_XID_RE = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def explain_xid(xid: int) -> str:
    meaning, action = XID_TABLE.get(xid, ("not in the guide's table", "see NVIDIA's Xid catalog"))
    return f"Xid {xid}: {meaning} -> {action}"


# --- NVML session -------------------------------------------------------------------------------
class NoGpu(Exception):
    """Why GPU checks cannot run here (becomes every GPU check's skip reason)."""


@contextlib.contextmanager
def nvml():
    """Yield the pynvml module, initialised; NoGpu says why not."""
    try:
        import pynvml as nv
    except ImportError:
        raise NoGpu("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
    try:
        nv.nvmlInit()
    except Exception as e:
        raise NoGpu(f"NVML unavailable: {e}") from None
    try:
        yield nv
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def device_handle(nv, local_rank: int):
    """This rank's GPU: CUDA_VISIBLE_DEVICES[local_rank] (index or UUID), else index local_rank."""
    count = nv.nvmlDeviceGetCount()
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if "CUDA_VISIBLE_DEVICES" in os.environ and not visible:
        raise NoGpu("CUDA_VISIBLE_DEVICES hides every GPU")
    pick = visible[local_rank] if local_rank < len(visible) else (None if visible else str(local_rank))
    if pick is None or (pick.isdigit() and int(pick) >= count):
        raise NoGpu(f"no GPU for local rank {local_rank} ({count} GPU(s) visible to NVML)")
    if pick.isdigit():
        return nv.nvmlDeviceGetHandleByIndex(int(pick)), int(pick)
    h = nv.nvmlDeviceGetHandleByUUID(pick)
    return h, nv.nvmlDeviceGetIndex(h)


def _not_supported(nv, e: Exception) -> bool:
    return isinstance(e, nv.NVMLError) and getattr(e, "value", None) == nv.NVML_ERROR_NOT_SUPPORTED


def _field_values(nv, h, ids: list[tuple[int, int]]) -> list[int | None]:
    """NVML field values (field id, scope id) -> ints; None where that field is unsupported."""
    out = []
    for v in nv.nvmlDeviceGetFieldValues(h, ids):
        if v.nvmlReturn != nv.NVML_SUCCESS:
            out.append(None)
            continue
        member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
            v.valueType, "ullVal")
        out.append(int(getattr(v.value, member)))
    return out


# --- counters: what accept reads before and after -----------------------------------------------
COUNTERS = ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "remapped_uncorrectable",
            "remap_pending", "remap_failure", "nvlink_replay", "nvlink_recovery", "nvlink_crc")


def _ecc(nv, h) -> dict:
    out = {}
    for name, kind in (("ecc_uncorrected_volatile", nv.NVML_VOLATILE_ECC),
                       ("ecc_uncorrected_aggregate", nv.NVML_AGGREGATE_ECC)):
        out[name] = int(nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, kind))
    return out


def _remap(nv, h) -> dict:
    _corr, unc, pending, failure = nv.nvmlDeviceGetRemappedRows(h)
    return {"remapped_uncorrectable": int(unc), "remap_pending": int(pending), "remap_failure": int(failure)}


def _nvlink(nv, h) -> dict:
    """Links, their state, and DL replay/recovery/CRC summed over active links (field values)."""
    total = _field_values(nv, h, [(nv.NVML_FI_DEV_NVLINK_LINK_COUNT, 0)])[0]
    states = []
    for link in range(total if total is not None else getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            states.append(nv.nvmlDeviceGetNvLinkState(h, link) == nv.NVML_FEATURE_ENABLED)
        except nv.NVMLError:
            if total is None:
                break
            states.append(False)
    active = [i for i, up in enumerate(states) if up]
    sums = {"nvlink_replay": 0, "nvlink_recovery": 0, "nvlink_crc": 0}
    fields = (("nvlink_replay", nv.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY),
              ("nvlink_recovery", nv.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY),
              ("nvlink_crc", nv.NVML_FI_DEV_NVLINK_ERROR_DL_CRC))
    if active:
        values = _field_values(nv, h, [(fid, link) for link in active for _, fid in fields])
        for i, v in enumerate(values):
            sums[fields[i % len(fields)][0]] += v or 0
    return {"links": len(states), "active": len(active), "inactive": [i for i, up in enumerate(states) if not up],
            **sums}


def read_counters(local_ranks: list[int] | None = None) -> dict:
    """Flat {"gpu<i>/<counter>": value} for every GPU NVML sees (or the given local ranks).

    Unsupported counters are left out; {} without NVML. accept reads this before and after
    its runs and judges the difference (acceptance.judge_counters).
    """
    out: dict[str, int] = {}
    try:
        with nvml() as nv:
            indices = local_ranks if local_ranks is not None else range(nv.nvmlDeviceGetCount())
            for lr in indices:
                h, idx = device_handle(nv, lr)
                for reader in (_ecc, _remap, _nvlink):
                    try:
                        values = reader(nv, h)
                    except Exception:
                        continue
                    out.update({f"gpu{idx}/{k}": v for k, v in values.items() if k in COUNTERS})
    except NoGpu:
        return {}
    return out


# --- GPU checks: each takes (nv, handle) and returns a Check --------------------------------------
def check_ecc(nv, h) -> Check:
    name = "ecc"
    with contextlib.suppress(Exception):
        current, _pending = nv.nvmlDeviceGetEccMode(h)
        if not current:
            return Check(name, "warn", "ECC is disabled", "enable it: nvidia-smi -e 1, then reboot")
    c = _ecc(nv, h)
    ev = f"uncorrected ECC volatile {c['ecc_uncorrected_volatile']}, aggregate {c['ecc_uncorrected_aggregate']}"
    if c["ecc_uncorrected_volatile"]:
        return Check(name, "fail", ev, "uncorrected errors since the last driver load: drain the node, "
                     "check remapped rows, replace the GPU if they repeat (Xid 48)", data=c)
    if c["ecc_uncorrected_aggregate"]:
        return Check(name, "warn", ev, "errors in the GPU's lifetime: watch for new ones; check remapped rows", data=c)
    return Check(name, "pass", ev, data=c)


def check_remapped_rows(nv, h) -> Check:
    name = "remapped_rows"
    c = _remap(nv, h)
    ev = f"uncorrectable remaps {c['remapped_uncorrectable']}, pending {c['remap_pending']}, failure {c['remap_failure']}"
    if c["remap_failure"]:
        return Check(name, "fail", ev, "row remapping failed: drain the node and replace the GPU", data=c)
    if c["remap_pending"]:
        return Check(name, "fail", ev, "a remap waits for a GPU reset: drain, nvidia-smi -r (or reboot)", data=c)
    if c["remapped_uncorrectable"]:
        return Check(name, "warn", ev, "rows were remapped after uncorrectable errors; replace if the count grows",
                     data=c)
    return Check(name, "pass", ev, data=c)


def check_nvlink(nv, h) -> Check:
    name = "nvlink"
    c = _nvlink(nv, h)
    if not c["links"]:
        return Check(name, "skip", "this GPU reports no NVLinks")
    errors = {k: c[k] for k in ("nvlink_replay", "nvlink_recovery", "nvlink_crc")}
    ev = (f"{c['active']}/{c['links']} links active; DL replay {errors['nvlink_replay']}, "
          f"recovery {errors['nvlink_recovery']}, CRC {errors['nvlink_crc']}")
    if c["inactive"]:
        return Check(name, "fail", ev + f"; down: {c['inactive']}",
                     "links down: check nvidia-smi nvlink -s, reset the GPU, check the baseboard/cables", data=c)
    if any(errors.values()):  # the guide: any counter above 0 is a problem; accept judges growth under load
        return Check(name, "warn", ev, "link errors since the driver loaded: check nvidia-smi nvlink -e; "
                     "accept judges whether they grow under load", data=c)
    return Check(name, "pass", ev, data=c)


def check_pcie(nv, h) -> Check:
    name = "pcie"
    gen, width = nv.nvmlDeviceGetCurrPcieLinkGeneration(h), nv.nvmlDeviceGetCurrPcieLinkWidth(h)
    max_gen, max_width = nv.nvmlDeviceGetMaxPcieLinkGeneration(h), nv.nvmlDeviceGetMaxPcieLinkWidth(h)
    ev = f"gen {gen}/{max_gen}, width x{width}/x{max_width}"
    data = {"gen": gen, "max_gen": max_gen, "width": width, "max_width": max_width}
    if width < max_width:
        return Check(name, "fail", ev, "link trained narrower than it can: reseat the GPU or riser, check the slot",
                     data=data)
    if gen < max_gen:
        return Check(name, "warn", ev, "idle GPUs lower the link generation to save power; "
                     "if it stays low under load, check the slot and BIOS settings", data=data)
    return Check(name, "pass", ev, data=data)


_CLOCK_REASONS = (  # (pynvml constant, label, status when set)
    ("nvmlClocksEventReasonHwSlowdown", "HW slowdown", "fail"),
    ("nvmlClocksEventReasonHwThermalSlowdown", "HW thermal slowdown", "fail"),
    ("nvmlClocksEventReasonHwPowerBrakeSlowdown", "HW power brake", "fail"),
    ("nvmlClocksEventReasonSwThermalSlowdown", "SW thermal slowdown", "warn"),
    ("nvmlClocksEventReasonSwPowerCap", "SW power cap", "warn"),
    ("nvmlClocksEventReasonSyncBoost", "sync boost", "pass"),
    ("nvmlClocksEventReasonApplicationsClocksSetting", "application clocks", "pass"),
    ("nvmlClocksEventReasonGpuIdle", "idle", "pass"),
)


def check_clock_events(nv, h) -> Check:
    name = "clock_events"
    read = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = int(read(h))
    hits = [(label, st) for const, label, st in _CLOCK_REASONS if getattr(nv, const, 0) & mask]
    ev = f"reasons 0x{mask:x}: " + (", ".join(label for label, _ in hits) or "none")
    worst = "fail" if any(st == "fail" for _, st in hits) else "warn" if any(st == "warn" for _, st in hits) else "pass"
    action = {"fail": "hardware is slowing the clocks: check cooling, power supply and nvidia-smi -q -d PERFORMANCE",
              "warn": "clocks capped by software: check temperature, power limits (nvidia-smi -q -d POWER)",
              "pass": ""}[worst]
    return Check(name, worst, ev, action, data={"mask": mask})


def check_temperature(nv, h) -> Check:
    name = "temperature"
    t = int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
    slowdown = None
    with contextlib.suppress(Exception):
        slowdown = int(nv.nvmlDeviceGetTemperatureThreshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN))
    limit = slowdown if slowdown else 90
    ev = f"{t} C (slowdown at {slowdown} C)" if slowdown else f"{t} C"
    data = {"celsius": t, "slowdown_celsius": slowdown}
    if t >= limit:
        return Check(name, "fail", ev, "at the slowdown temperature: check fans, airflow, inlet temperature", data=data)
    if t >= limit - 10:
        return Check(name, "warn", ev, "close to the slowdown temperature: check cooling before a long run", data=data)
    return Check(name, "pass", ev, data=data)


def check_power(nv, h) -> Check:
    name = "power"
    watts = nv.nvmlDeviceGetPowerUsage(h) / 1000
    limit = nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000
    default = None
    with contextlib.suppress(Exception):
        default = nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000
    ev = f"{watts:.0f} W of {limit:.0f} W limit" + (f" (default {default:.0f} W)" if default else "")
    data = {"watts": watts, "limit_watts": limit, "default_limit_watts": default}
    if default and limit < 0.9 * default:
        return Check(name, "warn", ev, "power limit lowered below the default: nvidia-smi -pl to restore", data=data)
    if watts > 0.95 * limit:
        return Check(name, "warn", ev, "drawing at the power limit before any benchmark: is another job running?",
                     data=data)
    return Check(name, "pass", ev, data=data)


class XidWatch:
    """XID critical-error events on one GPU while doctor runs (NVML event set)."""

    def __init__(self, nv, h):
        self.nv, self.started, self.error = nv, time.monotonic(), None
        self.events = None
        try:
            self.events = nv.nvmlEventSetCreate()
            nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self.events)
        except Exception as e:
            self.error = f"XID events unavailable: {e}"
            self.close()

    def collect(self, window: float) -> Check:
        name = "xid_events"
        if self.events is None:
            return Check(name, "skip", self.error or "XID events unavailable")
        xids = []
        end = self.started + window
        while True:  # wait out the window, then drain what is queued
            left = end - time.monotonic()
            try:
                xids.append(int(self.nv.nvmlEventSetWait(self.events, max(int(left * 1000), 1)).eventData))
            except self.nv.NVMLError as e:
                if left <= 0 or getattr(e, "value", None) != self.nv.NVML_ERROR_TIMEOUT:
                    break
        self.close()
        seconds = time.monotonic() - self.started
        if not xids:
            return Check(name, "pass", f"no XID events in {seconds:.1f}s", data={"xids": []})
        status = "fail" if set(xids) & XID_SEVERE else "warn"
        return Check(name, status, f"{len(xids)} XID event(s) in {seconds:.1f}s: " +
                     "; ".join(explain_xid(x) for x in sorted(set(xids))), "act on the XIDs above",
                     data={"xids": xids})

    def close(self):
        if self.events is not None:
            with contextlib.suppress(Exception):
                self.nv.nvmlEventSetFree(self.events)
            self.events = None


GPU_CHECKS: list[tuple[str, Callable]] = [
    ("ecc", check_ecc), ("remapped_rows", check_remapped_rows), ("nvlink", check_nvlink),
    ("pcie", check_pcie), ("clock_events", check_clock_events), ("temperature", check_temperature),
    ("power", check_power),
]
GPU_CHECK_NAMES = [n for n, _ in GPU_CHECKS] + ["xid_events"]


def gpu_checks(local_rank: int, xid_window: float = 1.0) -> list[Check]:
    """Every GPU check on this rank's GPU; all skipped with the reason when there is none."""
    try:
        with nvml() as nv:
            h, idx = device_handle(nv, local_rank)
            watch = XidWatch(nv, h)
            out = []
            for name, fn in GPU_CHECKS:
                try:
                    c = fn(nv, h)
                except Exception as e:
                    c = (Check(name, "skip", "not supported on this GPU") if _not_supported(nv, e)
                         else Check(name, "warn", f"could not read: {type(e).__name__}: {e}",
                                    "check the driver with nvidia-smi -q"))
                c.data.setdefault("gpu", idx)
                out.append(c)
            out.append(watch.collect(xid_window))
            return out
    except NoGpu as e:
        return [Check(n, "skip", f"no GPU check: {e}") for n in GPU_CHECK_NAMES]


# --- host checks ----------------------------------------------------------------------------------
def read_kernel_log() -> tuple[list[str] | None, str]:
    """Kernel log lines and where they came from, or (None, why it could not be read)."""
    why = []
    try:
        p = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10)
        if p.returncode == 0:
            return p.stdout.splitlines(), "dmesg"
        why.append("dmesg: " + (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])
    except (OSError, subprocess.TimeoutExpired) as e:
        why.append(f"dmesg: {type(e).__name__}")
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        why.append(f"/dev/kmsg: {e.strerror}")
        return None, "; ".join(why)
    lines = []
    try:
        while len(lines) < 200_000:
            try:
                rec = os.read(fd, 8192)
            except BrokenPipeError:  # records overwritten while reading: keep going
                continue
            except BlockingIOError:
                break
            lines.append(rec.decode(errors="replace").split(";", 1)[-1].rstrip("\n"))
    finally:
        os.close(fd)
    return lines, "/dev/kmsg"


def check_kernel_xids(lines: list[str] | None = None, source: str = "") -> Check:
    name = "kernel_xids"
    if lines is None:
        lines, source = read_kernel_log()
    if lines is None:
        return Check(name, "skip", f"kernel log not readable ({source})",
                     "run doctor as root or with CAP_SYSLOG to include kernel XIDs")
    seen: dict[tuple[str, int], int] = {}
    for line in lines:
        m = _XID_RE.search(line)
        if m:
            key = (m.group(1), int(m.group(2)))
            seen[key] = seen.get(key, 0) + 1
    if not seen:
        return Check(name, "pass", f"no NVRM Xid lines in {len(lines)} lines of {source}", data={"xids": []})
    ev = "; ".join(f"{where} x{n}: {explain_xid(x)}" for (where, x), n in sorted(seen.items()))
    return Check(name, "warn", f"{source} since boot: {ev}",
                 "XIDs since boot may be old: compare timestamps (dmesg -T | grep Xid); act on recent ones",
                 data={"xids": [{"device": w, "xid": x, "count": n} for (w, x), n in sorted(seen.items())]})


SHM_FAIL_BYTES = 256 * 2**20  # NCCL's intra-node buffers need room; Docker's 64 MiB default breaks it
SHM_WARN_BYTES = 2 * 2**30
STALE_AFTER_S = 60.0


def _mapped_paths() -> set[str]:
    """Files any readable process has mapped (an nccl-* segment in use is mapped)."""
    found = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                for line in (d / "maps").read_text().splitlines():
                    if "/dev/shm/" in line or "nccl" in line:
                        found.add(line.split(None, 5)[-1].replace(" (deleted)", ""))
    return found


def check_shm(shm: str | Path = "/dev/shm") -> Check:
    name = "shm"
    shm = Path(shm)
    try:
        usage = shutil.disk_usage(shm)
        entries = list(shm.glob("nccl-*"))
    except OSError as e:
        return Check(name, "fail", f"{shm}: {e.strerror}", "NCCL needs a writable /dev/shm (docker --shm-size)")
    now, mapped = time.time(), _mapped_paths()
    stale = []
    for p in entries:
        with contextlib.suppress(OSError):
            if now - p.stat().st_mtime > STALE_AFTER_S and str(p) not in mapped:
                stale.append(p.name)
    ev = f"{usage.free / 2**30:.2f} GiB free of {usage.total / 2**30:.2f} GiB; {len(stale)} stale nccl-* file(s)"
    if stale:
        ev += ": " + ", ".join(sorted(stale)[:5]) + (" ..." if len(stale) > 5 else "")
    data = {"free_bytes": usage.free, "total_bytes": usage.total, "stale": sorted(stale)}
    if usage.free < SHM_FAIL_BYTES:
        return Check(name, "fail", ev, "too little shared memory for NCCL: enlarge /dev/shm (docker --shm-size=16g)"
                     + (", remove stale files: rm /dev/shm/nccl-*" if stale else ""), data=data)
    if stale:
        return Check(name, "warn", ev, "no job running? remove them: rm /dev/shm/nccl-*", data=data)
    if usage.free < SHM_WARN_BYTES:
        return Check(name, "warn", ev, "little shared memory: enlarge /dev/shm (docker --shm-size=16g)", data=data)
    return Check(name, "pass", ev, data=data)


# Variables that change what NCCL or PyTorch does: (prefix or name, why it matters).
ENV_RULES = (
    ("NCCL_ALGO", "forces the algorithm: numbers are not comparable with NCCL's own choice"),
    ("NCCL_PROTO", "forces the protocol: numbers are not comparable with NCCL's own choice"),
    ("NCCL_DEBUG", "INFO/TRACE logging slows init and floods logs"),
    ("TORCH_NCCL_RANKS_PER_ROOT", "selects PyTorch's scalable init, whose keys are not scoped (pytorch#178473)"),
    ("TORCH_NCCL_BLOCKING_WAIT", "changes how PyTorch waits and times out"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0 lets a failed collective hang instead of aborting"),
)
NEUTRAL_DEBUG = ("", "VERSION", "WARN")


def env_knobs(environ=None) -> dict:
    environ = os.environ if environ is None else environ
    return {k: v for k, v in sorted(environ.items())
            if k in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_DEBUG") or k.startswith("TORCH_NCCL_")}


def check_env(environ=None) -> Check:
    name = "env"
    knobs = env_knobs(environ)
    notes = []
    for var, why in ENV_RULES:
        value = knobs.get(var)
        if value is None:
            continue
        if var == "NCCL_DEBUG" and value.upper() in NEUTRAL_DEBUG:
            continue
        if var == "TORCH_NCCL_ASYNC_ERROR_HANDLING" and value != "0":
            continue
        notes.append(f"{var}={value}: {why}")
    ev = ", ".join(f"{k}={v}" for k, v in knobs.items()) or "no NCCL_ALGO/PROTO/NVLS_ENABLE/DEBUG or TORCH_NCCL_* set"
    if notes:
        return Check(name, "warn", ev + " | " + "; ".join(notes), "unset them unless the run means to test them",
                     data={"knobs": knobs})
    return Check(name, "pass", ev, data={"knobs": knobs})


def check_torch_keys(world_size: int, environ=None) -> Check:
    """Does the installed torch reuse unscoped scalable-init keys, and does this job size hit them?"""
    from nccl_bench.core.sysinfo import torch_reuses_unscoped_keys
    name = "torch_scalable_init_keys"
    environ = os.environ if environ is None else environ
    info = torch_reuses_unscoped_keys()
    try:
        per_root = int(environ.get("TORCH_NCCL_RANKS_PER_ROOT", 128))
    except ValueError:
        per_root = 128
    scalable = world_size > per_root
    data = {**info, "ranks_per_root": per_root, "scalable_init_in_use": scalable}
    if info["reuses_unscoped_keys"] is None:
        return Check(name, "warn", info["why"], "check with: python -m stress --backend torch --init stock", data=data)
    if not info["reuses_unscoped_keys"]:
        return Check(name, "pass", info["why"], data=data)
    ev = f"{info['why']}; {world_size} ranks, {per_root} per root: scalable init {'in' if scalable else 'not in'} use"
    if scalable:
        return Check(name, "warn", ev, "re-inits in one process group can read a stale ID and hang: use one fresh "
                     "store prefix per init, or TORCH_NCCL_RANKS_PER_ROOT >= world size", data=data)
    return Check(name, "pass", ev, data=data)


def host_checks(shm: str | Path = "/dev/shm") -> list[Check]:
    """Checks of the node rather than a GPU: run once per node (local rank 0)."""
    out = []
    for name, fn in (("kernel_xids", check_kernel_xids), ("shm", lambda: check_shm(shm))):
        try:
            out.append(fn())
        except Exception as e:
            out.append(Check(name, "warn", f"could not check: {type(e).__name__}: {e}"))
    return out


def rank_checks(rank: int, local_rank: int, world_size: int, xid_window: float = 1.0) -> list[Check]:
    """Everything one rank checks: its GPU, its environment, and (local rank 0) its node."""
    checks = gpu_checks(local_rank, xid_window)
    checks += [check_env(), check_torch_keys(world_size)]
    if local_rank == 0:
        checks += host_checks()
    host = socket.gethostname()
    for c in checks:
        c.rank, c.host = rank, host
    return checks
