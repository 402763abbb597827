"""doctor: real multi-process runs on gloo, the missing-rank verdict, bad input, and the checks' logic."""
import os
import socket
import time
import types
import xml.etree.ElementTree as ET

import pytest

from helpers import one_line_error, run
from nccl_bench.accept import gpuchecks as gpu
from nccl_bench.core import gpucounters
from nccl_bench.accept import hostchecks as host
from nccl_bench.accept import xid
from nccl_bench.comm import gpu_count
from nccl_bench import records

NO_GPU = gpu_count() == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_doctor_two_ranks_on_gloo(tmp_path):
    out, xml = tmp_path / "doctor.json", tmp_path / "doctor.xml"
    proc = run(["-m", "nccl_bench", "doctor", "--backend", "gloo", "--nranks", "2", "--xid-window", "0.2",
                "--json", str(out), "--junit", str(xml)], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "doctor PASS" in proc.stdout
    rows = records.load(str(out)).rows
    by = {(r["rank"], r["name"]): r for r in rows}
    assert by[(None, "ranks_alive")]["status"] == "pass"
    for rank in (0, 1):
        assert by[(rank, "env")]["status"] in ("pass", "warn")
        assert (rank, "torch_scalable_init_keys") in by
    assert by[(0, "shm")]["status"] in ("pass", "warn") and (1, "shm") not in by  # once per node
    if NO_GPU:  # every GPU check skipped, each with its reason, and the table says so
        for rank in (0, 1):
            for name in gpu.GPU_CHECK_NAMES:
                assert by[(rank, name)]["status"] == "skip" and by[(rank, name)]["evidence"]
        assert "skipped" in proc.stdout and "xid_events" in proc.stdout
    suites = ET.parse(xml).getroot()
    assert suites.tag == "testsuites" and int(suites.get("tests")) == len(rows)
    assert int(suites.get("skipped")) == sum(r["status"] == "skip" for r in rows)


def test_a_rank_that_never_comes_is_named(tmp_path):
    """Only rank 0 of 2 is launched: doctor fails ranks_alive naming rank 1, exit 1."""
    t0 = time.monotonic()
    proc = run(["-m", "nccl_bench", "doctor", "--backend", "gloo", "--timeout", "2", "--xid-window", "0"],
               timeout=90, env={"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                "MASTER_PORT": str(free_port()), "NCCL_BENCH_STORE_TIMEOUT": "3",
                                "NCCL_BENCH_LOG_STEM": str(tmp_path / "doctor")})  # library logs: not in the repo
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "ranks_alive" in ln)
    assert "FAIL" in line and "rank 1 (host unknown)" in line
    assert "doctor FAIL (ranks_alive)" in proc.stdout
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize("args,needle", [
    (["--xid-window", "-1"], "--xid-window"),
    (["--junit", "/no/such/folder/x.xml"], "does not exist"),
])
def test_bad_input_one_line_exit_2(args, needle):
    assert needle in one_line_error(run(["-m", "nccl_bench", "doctor", "--backend", "gloo", *args]))


def test_existing_json_is_never_overwritten(tmp_path):
    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    err = one_line_error(run(["-m", "nccl_bench", "doctor", "--backend", "gloo", "--json", str(taken)]))
    assert "already exists" in err and taken.read_text() == "{}"


# --- the checks' logic, on real files and explicit inputs ---------------------------------------
def test_shm_names_stale_nccl_files(tmp_path):
    old = tmp_path / "nccl-stale-segment"
    old.write_bytes(b"x")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    (tmp_path / "nccl-fresh").write_bytes(b"x")
    c = host.check_shm(tmp_path)
    assert c.status in ("warn", "fail") and "nccl-stale-segment" in c.evidence and "nccl-fresh" not in c.evidence
    assert "rm /dev/shm/nccl-*" in c.action


def test_env_warns_on_forced_algorithm():
    c = host.check_env({"NCCL_ALGO": "Ring", "NCCL_NVLS_ENABLE": "0", "PATH": "/bin"})
    assert c.status == "warn" and "NCCL_ALGO=Ring" in c.evidence and "PATH" not in c.evidence
    assert host.check_env({"NCCL_NVLS_ENABLE": "0", "NCCL_DEBUG": "WARN"}).status == "pass"


def test_torch_keys_warn_only_when_scalable_init_is_used():
    assert host.check_torch_keys(2, {}).status == "pass"
    c = host.check_torch_keys(4, {"TORCH_NCCL_RANKS_PER_ROOT": "1"})
    assert c.status == "warn" and "UniqueNCCLID" in c.evidence


def test_kernel_xids_explained_with_the_guide_table():
    lines = ["[  12.3] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.",
             "[  13.0] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.",
             "[  99.0] NVRM: Xid (PCI:0000:2a:00): 777, pid=1, something new", "unrelated line"]
    c = xid.check_kernel_xids(lines, "test")
    assert c.status == "warn" and "x2" in c.evidence and "update driver" in c.evidence
    assert "Xid 777: not in the guide's table" in c.evidence
    assert xid.check_kernel_xids(["quiet"], "test").status == "pass"
    assert xid.check_kernel_xids(None, "").status in ("pass", "warn", "skip")  # this machine's own log


class FakeNvml(types.SimpleNamespace):
    """Just enough of pynvml's surface (same names) to drive the GPU checks' decisions."""

    class NVMLError(Exception):
        value = 3

    NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_TIMEOUT, NVML_FEATURE_ENABLED = 0, 3, 10, 1
    NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1, 1
    NVML_FI_DEV_NVLINK_LINK_COUNT, NVML_NVLINK_MAX_LINKS = 91, 18
    NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY = 161
    NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY = 162
    NVML_FI_DEV_NVLINK_ERROR_DL_CRC = 163

    def nvmlDeviceGetTotalEccErrors(self, h, etype, kind):
        return self.ecc[kind]

    def nvmlDeviceGetEccMode(self, h):
        return (1, 1)

    def nvmlDeviceGetRemappedRows(self, h):
        return self.remap

    def nvmlDeviceGetNvLinkState(self, h, link):
        return 0 if link in self.down else 1

    def nvmlDeviceGetFieldValues(self, h, ids):
        def value(fid, scope):
            v = self.links if fid == 91 else self.link_errors.get((fid, scope), 0)
            return types.SimpleNamespace(nvmlReturn=0, valueType=3, value=types.SimpleNamespace(ullVal=v))
        return [value(*i) for i in ids]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self.pcie[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self.pcie[1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return 16


def fake(**kw):
    base = dict(ecc={0: 0, 1: 0}, remap=(0, 0, 0, 0), links=18, down=(), link_errors={}, pcie=(5, 16))
    return FakeNvml(**{**base, **kw})


@pytest.mark.parametrize("check,nv,status,needle", [
    (gpu.check_ecc, fake(), "pass", "volatile 0"),
    (gpu.check_ecc, fake(ecc={0: 2, 1: 2}), "fail", "volatile 2"),
    (gpu.check_ecc, fake(ecc={0: 0, 1: 5}), "warn", "aggregate 5"),
    (gpu.check_remapped_rows, fake(remap=(0, 1, 1, 0)), "fail", "pending 1"),
    (gpu.check_nvlink, fake(), "pass", "18/18 links active"),
    (gpu.check_nvlink, fake(down=(3,)), "fail", "down: [3]"),
    (gpu.check_nvlink, fake(link_errors={(163, 2): 4, (163, 5): 1}), "warn", "CRC 5"),
    (gpu.check_pcie, fake(pcie=(5, 8)), "fail", "x8/x16"),
    (gpu.check_pcie, fake(pcie=(1, 16)), "warn", "gen 1/5"),
])
def test_gpu_check_decisions(check, nv, status, needle):
    c = check(nv, None)
    assert c.status == status and needle in c.evidence, c
    if status != "pass":
        assert c.action


@pytest.mark.skipif(not NO_GPU, reason="checks this machine's GPU-less path")
def test_gpu_checks_skip_with_reason_without_gpus():
    checks = gpu.gpu_checks(local_rank=0, xid_window=0)
    assert [c.name for c in checks] == gpu.GPU_CHECK_NAMES
    assert all(c.status == "skip" and c.evidence for c in checks)
    assert gpucounters.read_counters() == {}
