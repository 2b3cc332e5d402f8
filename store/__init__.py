"""Everything the service keeps in Redis, in rooms by what is kept. Rules that decide live in `policy/`; the store
holds state and the atomic steps (Lua) that check and change it.

- `redis_keys.py`: the one key schema; every key the service writes is built there, and documented at its top.
- `keys/`: API keys, the plans and profiles they pin, and what a key may spend: the rate limit (`keys/rate_limit.py`
  is its home), the monthly quota, work in progress and refunds (`keys/quota.py`), the admission Lua (`keys/lua.py`).
- `review/`: the review queue and the reports that feed it: items, the moderators' view and claims, its figures,
  and its Lua (`review/lua.py`).
- `webhooks/`: where each account's review events go (endpoints) and their deliveries (the outbox), with its Lua.
- `people/`: the dashboard's users, their sessions, the login brake (`people/login_brake.py` is its home), and the
  admin audit log.
- `hash_bank/`: per-account PDQ hashes of rejected images, and their CSV exchange format (matching them is the
  flow's: moderation/hash_matching.py).
- `widget/`: the browser widget's origins, tokens, redeemed verdicts and use, with its Lua.
- `labels/`: each account's kept labels (decided text items, what its backend reported) and its fitted correction
  (`labels/corrections.py`; every part of the correction: adaptation/correction.py).
- `score_suggestions.py`: Perspective clients' score suggestions, kept per account.
- `health.py`: the write probe and memory figure the health check reads.

Each room may import `redis_keys` and the rooms it builds on (tests/test_layering.py checks the list): `review`
writes webhook deliveries in its own steps (`webhooks`) and keeps a decided text's label in its deciding step (`labels`), `widget` admits with the keys' Lua (`keys`). Lua lives only
in a room's `lua.py`.
"""
