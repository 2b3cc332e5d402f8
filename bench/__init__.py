"""`make bench`: the graph, the plain app and the raw limit of this machine on the same workloads, in one run.

Every module below but those of `experiments/` is part of that run (`python -m bench.run`), which writes
docs/benchmarks.md and docs/benchmarks.png; a few also run alone, as their opening lines say.

- `run.py`: the order of it all.
- `inputs.py`: the photos and texts every column scores.
- `load.py`: the load generator (concurrent clients, latency percentiles).
- `service.py`: what a running service gives the benchmark: keys, replica counts, batch sizes, hops, sockets.
- `plain.py`: the plain app (same FastAPI app, models in-process, one uvicorn worker) in a subprocess.
- `limit.py`: the raw limit: the models alone, batched, from 1 and from as many processes as cores.
- `cpu.py`: CPU per request by process, and a cProfile of the plain app's event loop.
- `image_time.py`: CPU per request by process for images, and an image's wall time by stage.
- `memory.py`: RSS and PSS of processes, from /proc.
- `cascade.py`: what the text cascade costs: each text's route, the second stage's batches, its section of the page.
- `served_quality.py`: what the text cascade's answers are worth under load: real labelled comments through the graph.
- `image_text.py`: text in images: what reading an image's words costs, and what it catches on real comments written
  on photos and screenshots (also alone: `python -m bench.image_text`).
- `tenant_flood.py`: one tenant floods what the store keeps while another is served.
- `hash_bank.py`: the hash bank's match as banks grow, its memory, PDQ's robustness.
- `adaptation.py`: what a site's own line costs: applying a correction, refitting it.
- `plot.py`: docs/benchmarks.png.
- `report/`: docs/benchmarks.md, a module per section; the names the rest of bench/ reads.
- `report/prose/`: the page's fixed prose (its opening, the settings, the analysis, the levers kept), as templates.
- `report/page.py`: the page: its sections in order, and where it is written.
- `report/results.py`: what one run measured (`Results`, pickled by every run) and an earlier run's `Baseline`.
- `report/labels.py`: what the page calls each workload and each column.
- `report/ratios.py`: a point at a client count, a column against the plain app beside it, the `bench: ...` line.
- `report/markdown.py`: tables, cells, verdicts, and the prose of `report/prose/*.md` with a run's values in it.
- `report/machine.py`: the Machine section.
- `report/settings.py`: the Settings section.
- `report/sweep.py`: the Results section: every point of the sweep, and the raw limit's table.
- `report/targets.py`: the Targets section: each target, met or by how much missed.
- `report/before_after.py`: the Before and after section (a run with `--baseline`).
- `report/time_breakdown.py`: the Where the time goes section.
- `report/levers.py`: the Levers section.
- `report/observed.py`: the Observed during the run section.
- `experiments/`: measurements kept as records or run by hand; `make bench` runs none of them.
- `experiments/transport.py`: how an upload's bytes should reach the ImageModel (docs/image-models.md, Transport).
- `experiments/functional_under_load.py`: the written functional suite through the graph's Perspective surface at 1,
  4 and 16 clients (docs/text-model.md, "Under load").
- `experiments/ocr_engines.py`: which OCR engine reads images' text best per CPU second, on real images of its
  `ocr_images/` folder (docs/image-models.md, Text in images).
"""
