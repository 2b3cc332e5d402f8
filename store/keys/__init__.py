"""API keys, the plans and profiles they pin, and what a key may spend: its rate, its account's monthly quota and
work in progress. One request's admission (key, plan, profile, rate token, first quota unit and work slot) is one
Lua step (`lua.py`, AUTHORIZE), taken by `config.py`'s `ConfigStore.authorize`.

- `config.py`: keys, plans and profiles by name, and `authorize`; `listing.py`: every record, for the dashboard.
- `rate_limit.py`: the home of an API key's rate limit (it names every part), and the count of its refusals.
- `quota.py`: the monthly quota and the account's work-in-progress slots (`QuotaStore`), and the home of quota
  refunds (it names every part).
- `lua.py`: the admission scripts.
"""
