"""The request.state names by which the admin listener's handlers (the admin API and the dashboard) tell the audit
log who acted and on what: admin/audit_middleware.py reads them and writes the entry (store/people/audit_log.py);
the admin guard, the dashboard's login and the routes that create or decide something set them. HTTP names, kept
apart from the store, which never sees a request."""

# Set on request.state by the admin guard once the token was right (admin/guard.py require_admin): only
# then is a change recorded, so an unauthenticated call that never reached the guard (an unknown path, a wrong
# method) cannot write entries as "admin-token".
ACTOR_STATE = "admin_actor"
# What a route sets on request.state when its target is known only once it ran (a created key's id).
TARGET_STATE = "audit_target"
# What a route sets when its target belongs to an account (a decided review item's).
ACCOUNT_STATE = "audit_account"
# What a route sets to keep a request out of the log: a wrong dashboard password that engaged no brake (the log
# records the brakes engaging, once per window, so a guesser cannot flood it; dashboard/routes_login.py).
SKIP_STATE = "audit_skip"
