"""The people who work in the dashboard and what they did.

- `users.py`: moderators and operators, their scrypt password hashes, roles and assigned accounts.
- `hash_pool.py`: the process's bound on scrypt hashes running at once (logins wait in it or are refused).
- `sessions.py`: dashboard sessions (the home of session expiry: it names every part).
- `login_brake.py`: the login brake, `LoginBrake`: the brakes on password guessing (logins per address and per name,
  the password form's current password per user); the home of the login brake: it names every part.
- `lua.py`: the scripts behind those brakes and behind opening a session within the user's cap.
- `audit_log.py`: the admin audit log, who changed what and how it ended.
"""
