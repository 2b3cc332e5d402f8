"""What runs and operates the service: settings, the `make serve` runner, the local Ray instance, the embedded store,
the admin listener, the CLI and the webhook worker. It may import every layer but `deployments/`: it starts the graph
by its import path (serve_config.yaml) and never imports it (tests/test_layering.py).

- `settings.py`: the one settings object, read from the environment once, at start.
- Running the service: `run.py` (`make serve`: the store, Ray and the Serve graph, until Ctrl-C or SIGTERM), after
  `preflight.py` (its ports free, its transport able to carry every request, the cascade's weights there) and with
  `bootstrap.py` (first start: plans and profiles seeded from config/, a key created when there is none).
- Ray and the graph: `ray_cluster.py` (the local Ray instance, token-authenticated on loopback, no secret in a
  replica's environment), `deploy.py` (serve_config.yaml deployed from Python, as `serve run` does), `haproxy.py`
  (Serve's HAProxy ingress: its verified binary, private files and per-run secret) with `haproxy_rules.py` (our rules
  in its config: per-address limits, its own answers in the documented error shape), and `local_graph.py` (the whole
  graph on this machine for the end-to-end tests and the benchmarks).
- The embedded store: `embedded_store.py` (a pinned, locked-down valkey-server on loopback) and `store_supervisor.py`
  (a valkey-server that exits is started again with its data).
- The admin side: `admin_server.py` (the admin listener, joining the admin API and the dashboard, in its own thread),
  `cli.py` (`moderation-admin`, the admin API from a terminal) and `cli_webhooks.py` (its `webhooks` and `hashbank`
  commands).
- Webhooks: `webhook_worker.py` (the delivery worker, a process of its own) and `webhook_process.py` (how
  `make serve` runs it as a child and starts it again when it exits).
"""
