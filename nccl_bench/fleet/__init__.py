"""fleet: which nodes of a fleet stand out. The command (verdict, table, heatmap, JUnit) and the metrics
read from many nodes' accept, bench and locate files with robust outliers (outliers). May import the
shared layers (core, records, job, measure); never another feature."""
