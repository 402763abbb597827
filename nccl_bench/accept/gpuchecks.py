"""doctor's GPU checks through NVML (nvidia-ml-py, imported lazily): without it, or without a driver or
a GPU for this rank, every GPU check is a skip that says why (the session and the error counters are
nccl_bench.core.gpucounters)."""
from __future__ import annotations

import contextlib
from typing import Callable

from nccl_bench.accept.check import Check
from nccl_bench.accept.xid import XidWatch
from nccl_bench.core.gpucounters import (NoGpu, device_handle, ecc_counts, not_supported, nvlink_counts, nvml,
                                            remap_counts)


# --- GPU checks: each takes (nv, handle) and returns a Check --------------------------------------
def check_ecc(nv, h) -> Check:
    name = "ecc"
    with contextlib.suppress(Exception):
        current, _pending = nv.nvmlDeviceGetEccMode(h)
        if not current:
            return Check(name, "warn", "ECC is disabled", "enable it: nvidia-smi -e 1, then reboot")
    c = ecc_counts(nv, h)
    ev = f"uncorrected ECC volatile {c['ecc_uncorrected_volatile']}, aggregate {c['ecc_uncorrected_aggregate']}"
    if c["ecc_uncorrected_volatile"]:
        return Check(name, "fail", ev, "uncorrected errors since the last driver load: drain the node, "
                     "check remapped rows, replace the GPU if they repeat (Xid 48)", data=c)
    if c["ecc_uncorrected_aggregate"]:
        return Check(name, "warn", ev, "errors in the GPU's lifetime: watch for new ones; check remapped rows", data=c)
    return Check(name, "pass", ev, data=c)


def check_remapped_rows(nv, h) -> Check:
    name = "remapped_rows"
    c = remap_counts(nv, h)
    ev = (f"uncorrectable remaps {c['remapped_uncorrectable']}, pending {c['remap_pending']}, "
          f"failure {c['remap_failure']}")
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
    c = nvlink_counts(nv, h)
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
                    # NVML raises its own error per field: a check that cannot read is a warn, not a crash
                    c = (Check(name, "skip", "not supported on this GPU") if not_supported(nv, e)
                         else Check(name, "warn", f"could not read: {type(e).__name__}: {e}",
                                    "check the driver with nvidia-smi -q"))
                c.data.setdefault("gpu", idx)
                out.append(c)
            out.append(watch.collect(xid_window))
            return out
    except NoGpu as e:
        return [Check(n, "skip", f"no GPU check: {e}") for n in GPU_CHECK_NAMES]
