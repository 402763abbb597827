"""GPU link names as `nvidia-smi topo -m` gives them, from NVML's answers (a stand-in NVML: no GPU here)."""
import types

from nccl_bench.core.sysinfo import _links


class Nvml(types.SimpleNamespace):
    """NVML as seen on a board: `far[(gpu, link)]` is a peer's bus id, "switch", or None (unreadable)."""
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 1
    NVML_P2P_CAPS_INDEX_NVLINK = 3
    NVML_P2P_STATUS_OK = 0

    def nvmlDeviceGetNvLinkState(self, h, link):
        return int((h, link) in self.far)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        if self.far[(h, link)] is None:
            raise RuntimeError("not supported")
        return 1 if self.far[(h, link)] == "switch" else 0

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        if self.far[(h, link)] is None:
            raise RuntimeError("not supported")
        return types.SimpleNamespace(busId=self.far[(h, link)])

    def nvmlDeviceGetP2PStatus(self, a, b, cap):
        return 0 if self.nvlink_p2p else 1

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return 30


def bus(n):
    return {f"0000:00:0{i}.0": i for i in range(n)}


def links(far, n, nvlink_p2p=True):
    return {tuple(x["gpus"]): x["link"] for x in _links(Nvml(far=far, nvlink_p2p=nvlink_p2p), list(range(n)), bus(n))}


def test_direct_links_are_counted_per_pair():
    # 2 GPUs, 18 links from each straight to the other (x2 bare metal)
    far = {(i, n): f"0000:00:0{1 - i}.0" for i in range(2) for n in range(18)}
    assert links(far, 2) == {(0, 1): "NV18"}
    # 4 GPUs in a mesh, 6 links per pair
    far = {(i, 6 * k + n): f"0000:00:0{j}.0" for i in range(4) for k, j in enumerate(x for x in range(4) if x != i)
           for n in range(6)}
    assert set(links(far, 4).values()) == {"NV6"}


def test_through_nvswitches_every_pair_gets_all_links():
    far = {(i, n): "switch" for i in range(4) for n in range(18)}
    assert links(far, 4) == {p: "NV18" for p in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]}


def test_unreadable_far_ends_fall_back_to_nvlink_p2p_then_pcie():
    far = {(i, n): None for i in range(4) for n in range(18)}  # the x4 VM: NVML cannot say
    assert set(links(far, 4).values()) == {"NV18"}
    assert set(links({}, 4, nvlink_p2p=False).values()) == {"PHB"}


class _VisibleNvml:
    """Four GPUs as NVML counts them, with UUIDs."""

    def nvmlDeviceGetCount(self):
        return 4

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in ("GPU-a", "GPU-b", "GPU-c", "GPU-d"):
            raise KeyError(uuid)
        return uuid

    def nvmlDeviceGetIndex(self, handle):
        return "abcd".index(handle[-1])


def test_the_gpus_a_node_reports_are_the_ones_its_jobs_can_see():
    from nccl_bench.core.sysinfo import visible_indices
    nv = _VisibleNvml()
    assert visible_indices(nv, {}) == [0, 1, 2, 3]
    assert visible_indices(nv, {"CUDA_VISIBLE_DEVICES": "2,3"}) == [2, 3]
    assert visible_indices(nv, {"CUDA_VISIBLE_DEVICES": "GPU-d,GPU-a"}) == [3, 0]
    assert visible_indices(nv, {"CUDA_VISIBLE_DEVICES": "1,9,2"}) == [1]  # CUDA stops at the first it cannot use
    assert visible_indices(nv, {"CUDA_VISIBLE_DEVICES": ""}) == []
