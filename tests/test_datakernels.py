"""The data check's kernels for ranks without torch (nccl_bench.measure.datakernels) and the CUDA module under them
(nccl_bench.core.cudadriver, on NVIDIA's cuda.bindings): what can be checked without a GPU. On GPUs
tests/gpu/torchfree.py holds the kernels against torch's check, element for element."""
import importlib.util

import pytest

from nccl_bench.comm import listed_count


def test_no_nvrtc_is_one_line_of_bad_input():
    """A rank without torch compiles its data check with NVRTC; where none is installed (this CPU machine: no
    cuda.bindings either) that is bad input, said in one line, not a failure mid-run."""
    from nccl_bench.core.errors import UsageError
    from nccl_bench.measure import datakernels
    try:
        datakernels._compile("sm_90")
    except UsageError as e:
        assert "\n" not in str(e) and "nvidia-cuda-nvrtc" in str(e) and "-c 0" in str(e)
    else:
        pytest.skip("this machine has NVRTC and NVIDIA's bindings")


def test_without_the_bindings_the_driver_says_how_to_install_them():
    """CUDA is reached through cuda.bindings alone (nccl4py[cu13] installs it); where it is missing a call says
    so and how to install it, and the GPU count falls back (comm.gpu_count reads CUDA_VISIBLE_DEVICES)."""
    if importlib.util.find_spec("cuda") is not None:
        pytest.skip("this machine has NVIDIA's cuda bindings")
    from nccl_bench.core import cudadriver
    with pytest.raises(cudadriver.CudaError, match=r"nccl4py\[cu13\]"):
        cudadriver.visible_count()


@pytest.mark.parametrize("visible,nodes,count", [
    ("0,1,2,3", 8, 4), ("2", 8, 1), ("", 8, 0), ("-1", 8, 0), ("0,9,1", 8, 1), ("1,1", 8, 1),
    ("GPU-6c3a,GPU-77d1", 8, 2), ("0,1", 0, 2), (" 0, 1 ", 4, 2), ("0,,1", 4, 1)])
def test_a_visible_devices_list_counts_as_cuda_reads_it(visible, nodes, count):
    """Entries up to the first that names no GPU: CUDA ignores the rest of the list."""
    assert listed_count(visible, nodes) == count
