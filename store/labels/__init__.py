"""Each account's labels and its fitted correction (issue: a site's own line, learned from its moderators). Every
part of the correction, fitted and applied: adaptation/correction.py.

- `labels.py`: `LabelStore`, the account's kept labels (decided text items, and what its backend reported), each list
  capped, with the accounts due a refit; `LabelRules`, their bounds.
- `corrections.py`: `CorrectionStore`, the account's last fit (its correction, live or not and why).
- `lua.py`: `KEEP_DECIDED_LABEL`, the Lua function DECIDE_REVIEW_ITEM (store/review/lua.py) includes so that a
  decided text item's label is kept in the step of its decision; `ADD_REPORTED_LABEL`, a reported one's step.
"""
