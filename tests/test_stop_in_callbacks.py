"""A stop that lands in a callback Python runs for itself is not lost (nccl_bench.keep_stops_from_callbacks).
A quiet clean-clone CI run: a Ctrl-C to a bench while its ranks started arrived in an import's module-lock weakref
callback, where Python prints 'Exception ignored in: <function _get_module_lock.<locals>.cb ...>' with a
traceback and drops the KeyboardInterrupt. Here a weakref callback raises it on purpose."""
import subprocess
import sys

import pytest

from helpers import REPO

JOB = """
import signal, sys, time, weakref
import nccl_bench
# the stop raised below is the one a handled SIGINT raises: a SIGINT ignored by whoever started the tests (a shell's
# `pytest &` starts it so, and children inherit it) would leave the stop sent again ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
if sys.argv[1] == "kept":
    nccl_bench.keep_stops_from_callbacks()
signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(nccl_bench.Terminated(s)))
class Thing: pass
def callback(_):
    raise {stop}
thing = Thing()
ref = weakref.ref(thing, callback)
try:
    del thing  # the callback runs here, inside Python's own machinery
    for _ in range(300):  # 3 s for the stop sent again to arrive, idle: a machine under load still runs its thread
        time.sleep(0.01)
except (KeyboardInterrupt, nccl_bench.Terminated) as e:
    print("stopped:", type(e).__name__)
    sys.exit(0)
print("went on")
"""


@pytest.mark.parametrize("stop", ["KeyboardInterrupt", "nccl_bench.Terminated(signal.SIGTERM)"])
def test_a_stop_raised_in_a_weakref_callback_arrives_again_where_it_can_be_handled(stop):
    kept = subprocess.run([sys.executable, "-c", JOB.format(stop=stop), "kept"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert kept.stdout.startswith("stopped:") and kept.stderr == "", (kept.stdout, kept.stderr)
    lost = subprocess.run([sys.executable, "-c", JOB.format(stop=stop), "lost"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert lost.stdout.strip() == "went on" and "Exception ignored" in lost.stderr  # Python's own way
