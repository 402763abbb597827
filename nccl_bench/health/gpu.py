"""GPU checks through NVML (nvidia-ml-py, imported lazily): without it, or without a driver or a
GPU for this rank, every GPU check is a skip that says why. Also the error counters accept reads
before and after a run.

NVLink error counters come from NVML field values (NVML_FI_DEV_NVLINK_ERROR_DL_*, one scope per
link); the older per-link error-counter call reports misleading numbers on Hopper."""
from __future__ import annotations

import contextlib
import os
from typing import Callable

from nccl_bench.health.check import Check
from nccl_bench.health.xid import XidWatch


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
    its runs and judges the difference (verdicts.judge_counters).
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
