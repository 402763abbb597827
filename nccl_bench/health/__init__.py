"""health: is this node fit? The health checks (NVML, links, XIDs, /dev/shm, environment),
hardware profiles (thresholds as data, one JSON file per hardware under profiles/), the
acceptance judge, JUnit output and the stale-key probe. May import core, comm, job and
engine; never report or commands."""
