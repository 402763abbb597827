"""The data check's kernels for ranks without torch (nccl_bench.measure.datakernels): what can be checked
without a GPU. On GPUs tests/gpu/torchfree.py holds them against torch's check, element for element."""
import pytest


def test_no_nvrtc_is_one_line_of_bad_input():
    """A rank without torch compiles its data check with NVRTC; where none is installed (this CPU machine) that
    is bad input, said in one line, not a failure mid-run."""
    import ctypes.util
    from nccl_bench.core.errors import UsageError
    from nccl_bench.measure import datakernels
    try:
        datakernels._nvrtc()
    except UsageError as e:
        assert "\n" not in str(e) and "nvidia-cuda-nvrtc" in str(e)
    else:
        pytest.skip(f"this machine has a libnvrtc ({ctypes.util.find_library('nvrtc')})")
