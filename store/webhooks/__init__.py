"""What the store keeps for webhooks: each account's endpoints with their signing secrets (`endpoints.py`) and the
deliveries of its review events (`outbox.py`, with its Lua in `lua.py`, whose EMIT_EVENTS the review scripts
include). What a delivery is, its signature and its sending live in the top-level `webhooks/` package, which says
where every part of webhooks lives.
"""
