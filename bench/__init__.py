"""`make bench`: the graph, the plain app and the raw limit of this machine on the same workloads, in one run.

- `inputs.py`: the photos and texts every column scores.
- `load.py`: the load generator (concurrent clients, latency percentiles).
- `service.py`: what a running service gives the benchmark: keys, replica counts, batch sizes, hops, sockets.
- `plain.py`: the plain app (same FastAPI app, models in-process, one uvicorn worker) in a subprocess.
- `limit.py`: the raw limit: the models alone, batched, from 1 and from as many processes as cores.
- `cpu.py`: CPU per request by process; `image_time.py`: the same for images, and an image's wall time by stage.
- `memory.py`: RSS and PSS of processes, from /proc.
- `report.py` and `plot.py`: docs/benchmarks.md and docs/benchmarks.png.
- `run.py`: the order of it all.
"""
