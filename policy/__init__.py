"""The rules alone: the decision table, the records and their validation, the one name rule, the browser widget's
verdict and token rules. Pure code that knows nothing of the service (no store, no HTTP, no Ray:
tests/test_layering.py); the store, the flow and the apps build on it.

- `decisions.py`: the decision table, from scores and a profile to allow, review or block, and each category's
  verdict; the home of that rule.
- `types.py`: the records the rules work with (plans, profiles, keys, review items), plain pydantic models with their
  validation; a plan's image limits are among the parts models/image_upload.py names.
- `names.py`: the one rule for the names operators and moderators give (plans, profiles, users).
- `widget_verdicts.py`: the widget's signed verdict about one content, and its check (the store redeems its nonce).
- `widget_tokens.py`: a widget token's rules: which page origins a key may allow, how long and how often a token is
  used.
"""
