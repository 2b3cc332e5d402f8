"""The admin HTTP API (`/admin/v1/`, `/metrics`), served only on the admin listener and behind the admin token. It
builds on `serve_app` and the layers below, never on the dashboard beside it (tests/test_layering.py); the two are
joined on one listener by runtime/admin_server.py.

- `app.py`: the admin API's FastAPI app, one router per resource, all behind the admin token.
- `guard.py`: who may call the admin API: the admin token, and a brake on guessing it, per source address.
- `audit_middleware.py`: writes the admin audit log (store/people/audit_log.py), one entry per admin change and per
  refused admin token; it never reads headers, queries or bodies.
- `metrics.py`: the review queue's numbers in Prometheus' text format, at GET /metrics.
- The routers, one per resource: `routes_plans.py` (plans: write, read), `routes_profiles.py` (moderation profiles:
  write, read), `routes_keys.py` (API keys: create, read, revoke), `routes_widget.py` (a key's browser widget origins
  and its widget use), `routes_usage.py` (an account's quota units this month), `routes_feedback.py` (an account's
  Perspective score suggestions), `routes_reviews.py` (the review queue: list, read, decide), `routes_audit.py` (the
  audit log, newest first), `routes_users.py` (the dashboard's users: the first operator, roles, accounts),
  `routes_webhooks.py` (an account's webhook endpoints, their secrets and delivery log), `routes_hash_bank.py` (an
  account's PDQ hash bank: removal, import and export) and `routes_adaptation.py` (each site's own line: its
  correction's status, refit and reset, and a profile's threshold backtest).
"""
