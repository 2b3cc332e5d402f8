"""The browser widget's state: each key's allowed page origins, widget tokens, the verdict signing secret, redeemed
verdicts and each key's widget use (`tokens.py`, `WidgetStore`), and its Lua (`lua.py`). The rules for tokens,
origins and verdicts are `policy/widget_tokens.py` and `policy/widget_verdicts.py`.
"""
