import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The longest tests start first: with two workers, one of them started last would run alone at the end
# (the suite's wall time is what CI's budget counts). Measured with --durations.
LONGEST_FIRST = ("test_crash.py", "test_multinode.py", "test_asv.py", "test_locate.py", "test_accept.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))
