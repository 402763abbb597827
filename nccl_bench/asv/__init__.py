"""asv: what benchmarks/ runs. The suite's logic (suite: one job, one number), asv's plugin (plugin:
machine name, commit, versions) and the offline dashboard (offline, www/). May import the shared layers
and stress; never another feature."""
