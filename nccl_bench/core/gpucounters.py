"""A GPU's error counters through NVML (nvidia-ml-py, imported lazily), read before and after a run
so that a verdict judges what grew during it (accept, locate), and the NVML session they are read in.
Without NVML, a driver or a GPU for a rank there is nothing to read: {} and, for a check, the reason.

NVLink error counters come from NVML field values (NVML_FI_DEV_NVLINK_ERROR_DL_*, one scope per
link); the older per-link error-counter call reports misleading numbers on Hopper."""
from __future__ import annotations

import contextlib
import os

from nccl_bench.core.sysinfo import visible_indices


# --- NVML session -------------------------------------------------------------------------------
class NoGpu(Exception):
    """Why GPU checks cannot run here (becomes every GPU check's skip reason)."""


@contextlib.contextmanager
def nvml():
    """Yield the pynvml module, initialised; NoGpu says why not."""
    from nccl_bench.core.sysinfo import nvidia_driver
    if not nvidia_driver():  # a machine without GPUs: nothing to install, nothing to read
        raise NoGpu("this machine has no NVIDIA GPU (no driver loaded)")
    try:
        import pynvml as nv
    except ImportError:
        raise NoGpu("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
    try:
        nv.nvmlInit()
    except Exception as e:  # NVML's own errors: no GPU to read, and why
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


def not_supported(nv, e: Exception) -> bool:
    return isinstance(e, nv.NVMLError) and getattr(e, "value", None) == nv.NVML_ERROR_NOT_SUPPORTED


def field_values(nv, h, ids: list[tuple[int, int]]) -> list[int | None]:
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


def ecc_counts(nv, h) -> dict:
    out = {}
    for name, kind in (("ecc_uncorrected_volatile", nv.NVML_VOLATILE_ECC),
                       ("ecc_uncorrected_aggregate", nv.NVML_AGGREGATE_ECC)):
        out[name] = int(nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, kind))
    return out


def remap_counts(nv, h) -> dict:
    _corr, unc, pending, failure = nv.nvmlDeviceGetRemappedRows(h)
    return {"remapped_uncorrectable": int(unc), "remap_pending": int(pending), "remap_failure": int(failure)}


def nvlink_counts(nv, h) -> dict:
    """Links, their state, and DL replay/recovery/CRC summed over active links (field values)."""
    total = field_values(nv, h, [(nv.NVML_FI_DEV_NVLINK_LINK_COUNT, 0)])[0]
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
        values = field_values(nv, h, [(fid, link) for link in active for _, fid in fields])
        for i, v in enumerate(values):
            sums[fields[i % len(fields)][0]] += v or 0
    return {"links": len(states), "active": len(active), "inactive": [i for i, up in enumerate(states) if not up],
            **sums}


def read_counters(local_ranks: list[int] | None = None) -> dict:
    """Flat {"gpu<i>/<counter>": value} for every GPU this process can see (or the given local ranks).

    Unsupported counters are left out; {} without NVML. accept reads this before and after
    its runs and judges the difference (verdicts.judge_counters).
    """
    out: dict[str, int] = {}
    try:
        with nvml() as nv:
            indices = local_ranks if local_ranks is not None else range(len(visible_indices(nv)))
            for lr in indices:
                h, idx = device_handle(nv, lr)
                for reader in (ecc_counts, remap_counts, nvlink_counts):
                    try:
                        values = reader(nv, h)
                    except Exception:  # NVML's error: that counter is left out
                        continue
                    out.update({f"gpu{idx}/{k}": v for k, v in values.items() if k in COUNTERS})
    except NoGpu:
        return {}
    return out
