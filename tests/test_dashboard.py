"""asv's dashboard with the network off: `asv run` (two commits), `asv publish`, then the page opened in
headless Chromium inside a network namespace of its own (loopback only) draws a graph. The same page as
asv writes it, loading its scripts from CDNs, draws nothing there: the control that the network was off.

Skipped with its reason where Chromium is not installed or a network namespace cannot be made.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from helpers import REPO, run
from test_asv import asv_config, head
from nccl_bench.asv.offline import external_loads

CHROMIUM = shutil.which("chromium")
GRAPH = "#stress.ScopedChurn.track_rounds_per_s"  # the graph page of a benchmark every machine runs
BROWSE = r"""
set -e
ip link set lo up
cd "$1"
python3 -m http.server 8123 --bind 127.0.0.1 >/dev/null 2>&1 & server=$!
trap 'kill $server' EXIT
for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/8123) 2>/dev/null && break; sleep 0.1; done
timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" \
  --virtual-time-budget=15000 --window-size=1280,900 --screenshot="$2" "http://127.0.0.1:8123/index.html$3"
"""


def why_not() -> str | None:
    if CHROMIUM is None:
        return "Chromium is not installed (apt-get install chromium)"
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot make a network namespace (unshare --net: {probe.stderr.strip()[:80]})"
    return None


def screenshot_offline(html: Path, png: Path) -> None:
    """The page served from `html` on loopback, in a namespace with no other network."""
    proc = subprocess.Popen(["unshare", "--net", "bash", "-c", BROWSE, "browse", str(html), str(png), GRAPH],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=120)
    finally:  # the server and the browser go with the namespace's shell, whatever happened
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert png.is_file(), err[-2000:]


def plotted_pixels(png: Path) -> int:
    """Pixels of asv's series colour (a saturated blue) inside the graph area, right of the sidebar."""
    import matplotlib.image
    img = matplotlib.image.imread(str(png))[60:820, 220:, :3]
    r, b = img[..., 0], img[..., 2]
    return int(((b > 0.55) & (r < 0.45) & (b - r > 0.3)).sum())


@pytest.mark.skipif(why_not() is not None, reason=why_not() or "")
def test_published_dashboard_draws_a_graph_with_the_network_off(tmp_path):
    (tmp_path / "home").mkdir()
    env = {"HOME": str(tmp_path / "home")}
    conf = str(asv_config(tmp_path))
    parent = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD~1"], capture_output=True, text=True)
    commits = [head()] + ([parent.stdout.strip()] if parent.returncode == 0 else [])
    for sha in commits:  # two points make a line: the code as it is, recorded for two commits
        proc = run(["-m", "asv", "run", "--config", conf, "--quick", "--bench", "ScopedChurn",
                    "--set-commit-hash", sha], env=env, timeout=240)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    proc = run(["-m", "asv", "publish", "--config", conf], env=env, timeout=240)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "no network needed" in proc.stdout + proc.stderr
    html = tmp_path / "html"
    assert external_loads((html / "index.html").read_text()) == []
    assert (html / "vendor" / "jquery" / "LICENSE").is_file()

    screenshot_offline(html, tmp_path / "offline.png")
    assert plotted_pixels(tmp_path / "offline.png") > 300, "no graph drawn with the network off"

    # the control: asv's own page, its scripts on CDNs, draws nothing in the same namespace
    import asv
    cdn = tmp_path / "cdn"
    shutil.copytree(html, cdn)
    shutil.copy(Path(asv.__file__).parent / "www" / "index.html", cdn / "index.html")
    assert external_loads((cdn / "index.html").read_text())
    screenshot_offline(cdn, tmp_path / "cdn.png")
    assert plotted_pixels(tmp_path / "cdn.png") < 50
