"""The compiled launch loop (nccl_bench.comm.launchloop) on CPU: C calls back into Python callbacks
that stand in for NCCL's functions, so the iteration order, the arguments and the error path
are checked without a GPU."""
import ctypes

import pytest

from nccl_bench.comm import launchloop
from nccl_bench.comm.launchloop import CompiledLoop, LoopError, PythonLoop

FN = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_uint64] * 8))
needs_compiled = pytest.mark.skipif(launchloop.compiled()[0] is None,
                                    reason=f"no compiled loop here: {launchloop.compiled()[1]}")


def recorder(seen, fail_at=None):
    def call(*args):
        seen.append(args)
        return 5 if fail_at is not None and len(seen) == fail_at else 0
    cb = FN(call)
    return cb, ctypes.cast(cb, ctypes.c_void_p).value


@needs_compiled
def test_steps_repeat_and_every_argument_arrives():
    seen = []
    cb, ptr = recorder(seen)
    # two calls per iteration (as sendrecv: send, recv), three steps (three buffer offsets)
    steps = [[(ptr, (s, 1)), (ptr, (s, 2, -1, 1 << 40, 3, 4, 5, 6))] for s in range(3)]
    loop = CompiledLoop(steps)
    host = loop.run(1, 4)  # iterations 1, 2, 3, 4 -> steps 1, 2, 0, 1
    assert host > 0
    assert [a[:2] for a in seen] == [(1, 1), (1, 2), (2, 1), (2, 2), (0, 1), (0, 2), (1, 1), (1, 2)]
    assert seen[1] == (1, 2, 2**64 - 1, 1 << 40, 3, 4, 5, 6)  # -1 as two's complement; unused args 0
    assert seen[0][2:] == (0,) * 6


@needs_compiled
def test_a_failing_call_stops_the_loop_with_its_code_and_iteration():
    seen = []
    cb, ptr = recorder(seen, fail_at=3)
    loop = CompiledLoop([[(ptr, (0,))], [(ptr, (1,))]])
    with pytest.raises(LoopError) as e:
        loop.run(0, 10)
    assert (e.value.code, e.value.iteration, len(seen)) == (5, 2, 3)


@needs_compiled
def test_timer_hooks_sit_right_around_the_launches():
    # as timing records its CUDA events: before the first launch, a mark after every 2 iterations,
    # after the last; the host time counts the launches and marks only
    seen = []
    cb, ptr = recorder(seen)
    loop = CompiledLoop([[(ptr, (0,))], [(ptr, (1,))]])
    hook = lambda tag: (ptr, (tag,))  # noqa: E731
    loop.run(0, 4, before=hook(10), after=hook(11), marks=[hook(20), hook(21)], mark_every=2)
    assert [a[0] for a in seen] == [10, 0, 1, 20, 0, 1, 21, 11]
    seen.clear()
    PythonLoop([lambda k=k: seen.append((k,)) for k in range(2)]).run(
        0, 4, before=lambda: seen.append((10,)), after=lambda: seen.append((11,)),
        marks=[lambda: seen.append((20,)), lambda: seen.append((21,))], mark_every=2)
    assert [a[0] for a in seen] == [10, 0, 1, 20, 0, 1, 21, 11]


@needs_compiled
def test_a_failing_hook_is_a_loop_error_before_any_launch():
    seen = []
    cb, ptr = recorder(seen, fail_at=1)
    with pytest.raises(LoopError) as e:
        CompiledLoop([[(ptr, (0,))]]).run(0, 3, before=(ptr, (10,)))
    assert (e.value.code, e.value.iteration, len(seen)) == (5, -1, 1)


@needs_compiled
def test_a_gate_spins_until_open_then_the_loop_launches_and_a_closed_one_is_late():
    # timing's gated hook: spin on the line-up's event (here a query that says "not ready", 600, three
    # times), then the start event's record, then the launches; a gate that never opens is Late,
    # within its limit, before anything is launched
    seen, polls = [], []
    cb, ptr = recorder(seen)
    query = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64)(
        lambda ev: polls.append(ev) or (600 if len(polls) <= 3 or ev == 9 else 0))
    qptr = ctypes.cast(query, ctypes.c_void_p).value
    spin = lambda ev, limit_s: (launchloop._symbol("nb_spin"), (qptr, ev, int(limit_s * 1e9)))  # noqa: E731
    loop = CompiledLoop([[(ptr, (0,))]])
    loop.run(0, 2, before=loop.hook([spin(7, 5), (ptr, (10,))]))
    assert (polls, [a[0] for a in seen]) == ([7] * 4, [10, 0, 0])
    seen.clear()
    with pytest.raises(launchloop.Late):
        loop.run(0, 2, before=loop.hook([spin(9, 0.05), (ptr, (10,))]))
    assert seen == []


def test_python_loop_makes_the_same_iterations():
    seen = []
    loop = PythonLoop([lambda k=k: seen.append(k) for k in range(3)])
    assert loop.run(2, 4) >= 0
    assert seen == [2, 0, 1, 2]


def test_no_compiler_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "/bin/false")
    with pytest.raises(OSError) as e:
        launchloop.build()
    assert "failed" in str(e.value) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []  # no half-written library left behind


@needs_compiled
def test_hooks_made_ahead_run_as_hooks_made_in_the_call():
    # timing makes its hooks before the sync launch (C arrays, or the callables themselves): the loop,
    # and the nccl backend's checked loop around it, take them as they are
    from nccl_bench.comm.nccl import _CheckedLoop
    seen = []
    cb, ptr = recorder(seen)
    for loop in (CompiledLoop([[(ptr, (0,))], [(ptr, (1,))]]),
                 _CheckedLoop(CompiledLoop([[(ptr, (0,))], [(ptr, (1,))]]), None, "all_reduce")):
        seen.clear()
        loop.run(0, 4, before=loop.hook((ptr, (10,))), after=loop.hook((ptr, (11,))),
                 marks=loop.hooks([(ptr, (20,)), (ptr, (21,))]), mark_every=2)
        assert [a[0] for a in seen] == [10, 0, 1, 20, 0, 1, 21, 11]
    seen.clear()
    py = PythonLoop([lambda k=k: seen.append((k,)) for k in range(2)])
    py.run(0, 2, before=py.hook(lambda: seen.append((10,))), after=py.hook(lambda: seen.append((11,))),
           marks=py.hooks([lambda: seen.append((20,))]), mark_every=2)
    assert [a[0] for a in seen] == [10, 0, 1, 20, 11]


@needs_compiled
def test_stamps_show_which_iteration_the_host_was_slow_in():
    # -I's host clock: a launch that sleeps in iteration 2 makes that iteration's host time, in both loops. The
    # sleep is 0.2 s: a loaded CI machine descheduled another iteration for over 10 ms, and 0.02 s was not twice it
    import time
    from nccl_bench.measure import tail

    def slow_at(k, seen):
        def call(*args):
            seen.append(args)
            if len(seen) == k:
                time.sleep(0.2)
            return 0
        return call
    seen = []
    cb = FN(slow_at(3, seen))
    ptr = ctypes.cast(cb, ctypes.c_void_p).value
    mark = (ptr, (99,))
    for loop, marks in ((CompiledLoop([[(ptr, (0,))]]), [mark] * 4),
                        (PythonLoop([lambda: slow_at(3, seen)()]), [lambda: None] * 4)):
        seen.clear()
        st = launchloop.stamps(4)
        loop.run(0, 4, marks=marks, stamps=st)
        host = launchloop.stamp_seconds(st)
        assert len(host) == 4 and max(range(4), key=host.__getitem__) in (1, 2)  # the 3rd call: iteration 1 or 2
        assert max(host) >= 0.2 and sorted(host)[1] < 0.05
        # a GPU that waited for that launch: the outlier is the host's; one that was slow by itself, the device's
        gpu = [h * 1e6 + 5 for h in host]
        slow = [i for i, g in enumerate(gpu) if g > 2 * sorted(gpu)[2]]
        assert tail.classify([gpu], [[h * 1e6 for h in host]], slow)["outliers_host"] == len(slow) == 1


def test_an_outlier_with_launches_on_time_is_the_devices():
    from nccl_bench.measure import tail
    gpu, host = [10.0, 10.0, 50.0, 10.0, 11.0], [8.0, 8.5, 8.0, 8.2, 8.1]
    got = tail.classify([gpu], [host], [2])
    assert (got["outliers_host"], got["outliers_device"]) == (0, 1)
    assert tail.cell({"outliers": 1, **got}) == "1=0h+1d" and tail.cell({"outliers": 0}) == "0"
    # two processes: judged on the one whose GPU time set the iteration (rank 1, whose launch was late)
    got = tail.classify([gpu, [10.0, 10.0, 60.0, 10.0, 10.0]], [host, [8.0, 8.0, 55.0, 8.0, 8.0]], [2])
    assert got["outliers_host"] == 1 and got["host_times_us"][2] == 55.0


def test_per_iter_block_keeps_each_processs_host_times():
    from nccl_bench.measure.sweep import per_iter_block
    # two processes, seconds per iteration; the first iteration skipped: rank 1's late first launch shows as its own
    gpu = [[1e-5, 6e-5, 1e-5, 1e-5], [1e-5, 6.5e-5, 1e-5, 1e-5]]
    host = [[8e-6, 1e-5, 8e-6, 8e-6], [8e-6, 5.5e-5, 8e-6, 8e-6]]
    block = per_iter_block(gpu, 1, host)
    assert [round(t) for t in block["per_process_host_times_us"][1]] == [55, 8, 8]
    assert block["outliers_host"] == 1
    assert "per_process_host_times_us" not in per_iter_block(gpu[:1], 0, host[:1])  # one process: its row is the block
    assert "per_process_host_times_us" not in per_iter_block(gpu, 0, [None, None])  # gloo: no host times


def test_the_census_sees_a_thread_that_ran_during_a_span():
    import threading
    import time
    from nccl_bench.core import threads
    stop = threading.Event()
    done = threading.Event()
    busy = threading.Thread(target=lambda: [done.wait(0.001) for _ in range(300)] and stop.wait(10),
                            name="test-waker", daemon=True)
    census = threads.Census()
    busy.start()
    with census.span():
        time.sleep(0.5)
    stop.set()
    busy.join()
    rows = {r["name"]: r for r in census.rows()}
    if not rows:
        pytest.skip("no /proc/self/task here")
    assert rows["test-waker"]["owner"] == "ours" and rows["test-waker"]["runs_per_s"] > 50
    assert [r for r in rows.values() if r["timed_loop"]][0]["owner"] == "ours"
    assert "test-waker" in threads.line([census.rows()])
