"""Per-account banks of PDQ hashes of rejected images (`bank.py`), each capped in the step that adds to it (`lua.py`),
and the HMA CSV format operators exchange them in (`csv_format.py`). Matching an image against a bank is the
moderation flow's (moderation/hash_matching.py).
"""
