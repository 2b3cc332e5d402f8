"""The names the service accepts for what operators and moderators name: plans, profiles, users.

One rule for all of them, so a name that is valid in one place is valid everywhere (a user named like a plan, a
profile named in a URL): a letter or digit first, then letters, digits, `.`, `_` or `-`, 64 characters at most.
"""

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# A Redis stream id (unix milliseconds, sequence): the audit log's cursor.
STREAM_ID_PATTERN = r"^[0-9]{1,20}-[0-9]{1,20}$"
