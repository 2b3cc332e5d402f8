"""Webhooks: an account's review events POSTed to its endpoints, signed, retried, never dropped without a log line.
Where each part lives:

- Here, the rules and the sending, which know no store: what a delivery is and when it is retried
  (webhooks/deliveries.py), its Standard Webhooks signature (webhooks/signing.py), which URLs may be called
  (webhooks/url_guard.py), the HTTP sender with its redirect and address checks (webhooks/sender.py), its DNS
  lookups with a share per account (webhooks/lookups.py) and its HTTP clients, one per receiver origin
  (webhooks/connections.py).
- What is kept: endpoints and their secrets (store/webhooks/endpoints.py), the deliveries waiting or done
  (store/webhooks/outbox.py), and the Lua that writes an event's deliveries in the very step that changes the review
  item (store/webhooks/lua.py).
- What runs: the delivery worker, a process of its own (runtime/webhook_worker.py), which `make serve` starts and
  restarts (runtime/webhook_process.py).
- Who manages them: the admin API's routes (admin/routes_webhooks.py) and the CLI's `webhooks` commands
  (runtime/cli_webhooks.py).
- The documentation: docs/webhooks.md.
"""
