"""report: report.json (schema, provenance, the three-state verdict), report.html and the model card (templates/).
May import bench.machine and the results of every stage as data; nothing here imports pipeline or cli."""
