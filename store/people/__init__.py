"""The people who work in the dashboard and what they did.

- `users.py`: moderators and operators, their scrypt password hashes, roles and assigned accounts.
- `sessions.py`: dashboard sessions (the home of session expiry: it names every part) and the login brakes.
- `audit_log.py`: the admin audit log, who changed what and how it ended.
"""
