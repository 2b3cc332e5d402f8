"""`make bench`: speed and memory of the service as ratios against the raw models, measured in one run.

- `inputs.py`: the photos and texts both sides score.
- `raw.py`: the models in this process on one thread, and the memory they take in a fresh process.
- `memory.py`: RSS and PSS of processes, from /proc.
- `service.py`: the whole Ray Serve graph (`runtime.local_graph`) driven over HTTP; its processes' memory.
- `report.py`: the one markdown table, printed and written to docs/benchmarks.md.
- `run.py`: the order of it all.
"""
