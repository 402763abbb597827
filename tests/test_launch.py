"""Launcher environments: torchrun, Slurm, Open MPI."""
from nccl_bench.core import launch
from nccl_bench.core.launch import detect, first_host


def test_no_launcher():
    assert detect({}) is None


def test_torchrun():
    i = detect({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
                "MASTER_ADDR": "node1", "MASTER_PORT": "1234", "TORCHELASTIC_USE_AGENT_STORE": "True",
                "TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_RESTART_COUNT": "2"})
    assert (i.rank, i.world_size, i.local_rank, i.master_addr, i.master_port) == (3, 8, 1, "node1", 1234)
    assert i.launcher == "torchrun" and i.agent_store and i.restart == 2 and not i.single_node


def test_the_first_node_of_a_slurm_node_list():
    # what a Slurm step's ranks make of SLURM_STEP_NODELIST; the step itself runs under a real Slurm (test_slurm)
    assert first_host("gpu[003-005,009],login1") == "gpu003" and first_host("a1,a2") == "a1"


def test_openmpi():
    i = detect({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
                "OMPI_COMM_WORLD_LOCAL_SIZE": "4"})
    assert (i.rank, i.world_size, i.local_rank, i.launcher, i.single_node) == (2, 4, 2, "mpi", True)


def test_mpich_and_intel_mpi():
    i = detect({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"})
    assert (i.rank, i.world_size, i.local_rank, i.launcher, i.single_node) == (1, 2, 1, "mpi", True)


def test_first_host():
    assert first_host("node7") == "node7"
    assert first_host("gpu[12-14]") == "gpu12"
    assert first_host("a1,b2") == "a1"


def test_the_metadata_names_our_own_launcher_not_torchrun():
    """Our launcher's ranks carry torchrun's variables; a result's metadata still says whose they are (a 4-GPU
    main job's summary read `torchrun (rank 0 of 4)`)."""
    torchrun = {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert launch.describe(torchrun) == "torchrun (rank 0 of 4)"
    ours = {**torchrun, "NCCL_BENCH_SELF_LAUNCHED": "1234"}
    assert launch.describe(ours) == "nccl_bench's own launcher, one node (rank 0 of 4)"
    assert launch.describe({}).startswith("none (self-launch")
