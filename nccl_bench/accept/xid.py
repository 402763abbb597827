"""XIDs: the table of a field guide to NCCL failures in production (its section 5, carried below),
corrected where NVIDIA's Xid catalog says otherwise; XID events watched through NVML
while doctor runs; XIDs in the kernel log."""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time

from nccl_bench.accept.check import Check


# --- XIDs: the field guide's table, with NVIDIA's catalog where the guide is off ---------------
# (meaning, action); "guide" marks the rows taken from the field guide as written.
XID_TABLE = {
    13: ("graphics engine exception (often an application bug)",
         "rerun; if it repeats on one GPU, run field diagnostics"),
    31: ("GPU memory page fault (usually an application bug)",
         "check the application; replace only if it follows the GPU"),
    43: ("GPU stopped processing (guide: 'NVLink error'; NVIDIA's catalog: channel reset, usually an application "
         "fault)",
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


class XidWatch:
    """XID critical-error events on one GPU while doctor runs (NVML event set)."""

    def __init__(self, nv, h):
        self.nv, self.started, self.error = nv, time.monotonic(), None
        self.events = None
        try:
            self.events = nv.nvmlEventSetCreate()
            nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self.events)
        except Exception as e:  # NVML's error: XIDs are not watched, and the check says why
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
