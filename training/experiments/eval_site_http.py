"""A site's first day through the HTTP API, as an operator would run it: does learning its line help? (An experiment
kept as a record: it writes nothing, and its results are in docs/site-adaptation.md, "How well it works".)

    python -m training.experiments.eval_site_http --base-url http://127.0.0.1:8000 --admin-url http://127.0.0.1:8001 \\
        --admin-token "$MODERATION_ADMIN_TOKEN"          # needs MODERATION_TEXT_DATA_DIR; ~1 min a site

Each dataset the served text model never trained on (`training.loso.SERVED_TRAINING_EXCLUDES`) is one site: an account
with a profile of its own (the default profile's thresholds, `audit_rate` 0.1). Its comments are shuffled (seeded)
and cut into a history and a future of `--history` and `--future` comments:

1. The history is moderated with the site's key; each comment's `reference` says which it is.
2. Its pending review items (flagged, and the audits) are decided with the true labels through the admin API.
3. 30% of the toxic history comments the service allowed (REPORT_RATE, as training/label_walk.py replays them) are
   sent back as `comments:suggestscore` (TOXICITY 1, with the comment's text), as a site's users' reports would be.
4. The account is refitted with its profile (`POST .../text-adaptation/refit?profile=`) and the backtest's suggested
   thresholds are applied to the profile (`POST .../backtest/apply`).
5. The future is moderated twice: with a key of a fresh account under an untouched copy of the default profile
   (the base), and with the site's key (its correction, if live, and its thresholds).

Per site: ROC AUC of the toxic score, base and adapted; the share of benign future comments flagged (review or
block recommended) and the recall, at the default thresholds and at the applied ones; the labels it took. Nothing
is hard-coded: every figure comes from the service's answers.
"""

from __future__ import annotations

import argparse
import json
import random
import secrets

import httpx

from training.label_walk import AUDIT_RATE, REPORT_RATE
from training.loso import SERVED_TRAINING_EXCLUDES
from training.metrics import roc_auc
from training.text_data import load_comments


class Service:
    def __init__(self, base_url: str, admin_url: str, admin_token: str):
        self.public = httpx.Client(base_url=base_url, timeout=120)
        self.admin = httpx.Client(base_url=admin_url, timeout=300,
                                  headers={"Authorization": f"Bearer {admin_token}"})

    def ok(self, response: httpx.Response) -> dict:
        if response.status_code >= 300:
            raise RuntimeError(f"{response.request.method} {response.request.url.path}: {response.status_code} "
                               f"{response.text[:300]}")
        return response.json() if response.content else {}

    def setup(self, account: str, profile: str, audit_rate: float) -> dict:
        default = self.ok(self.admin.get("/admin/v1/profiles/default"))
        default.pop("name", None)
        self.ok(self.admin.put(f"/admin/v1/profiles/{profile}", json={**default, "audit_rate": audit_rate}))
        plan = {"scope": "both", "monthly_quota": 10_000_000, "rate_per_second": 1_000, "burst": 1_000}
        self.ok(self.admin.put("/admin/v1/plans/site-trial", json=plan))
        key = self.ok(self.admin.post("/admin/v1/keys", json={"account": account, "profile": profile,
                                                               "plan": "site-trial"}))["key"]
        return {"Authorization": f"Bearer {key}"}

    def moderate(self, key: dict, text: str, reference: str) -> dict:
        response = self.public.post("/v1/moderate-text", headers=key, json={"text": text, "reference": reference})
        if response.status_code == 429 and "result" in response.json().get("error", {}):
            return response.json()["error"]["result"]  # the queue was full: the result stands
        return self.ok(response)


def run_site(service: Service, name: str, comments: list, history: int, future: int, seed: int) -> dict:
    run = secrets.token_hex(3)
    rows = comments[:]
    random.Random(seed).shuffle(rows)
    past, ahead = rows[:history], rows[history:history + future]
    site_key = service.setup(f"site-{name}-{run}", f"site-{name}-{run}"[:64], AUDIT_RATE)
    base_key = service.setup(f"base-{name}-{run}", f"base-{name}-{run}"[:64], 0.0)
    answers = [service.moderate(site_key, c.text, f"h{i}") for i, c in enumerate(past)]
    truth = {f"h{i}": c.label for i, c in enumerate(past)}
    decided = _decide_pending(service, f"site-{name}-{run}", truth)
    rng = random.Random(seed + 1)
    reported = 0
    for comment, answer in zip(past, answers):
        if comment.label and answer["decision"] == "allow" and rng.random() < REPORT_RATE:
            service.ok(service.public.post("/v1alpha1/comments:suggestscore", headers=site_key, json={
                "comment": {"text": comment.text}, "attributeScores": {"TOXICITY": {"summaryScore": {"value": 1}}}}))
            reported += 1
    account, profile = f"site-{name}-{run}", f"site-{name}-{run}"[:64]
    refit = service.ok(service.admin.post(f"/admin/v1/accounts/{account}/text-adaptation/refit",
                                          params={"profile": profile}))
    applied = service.admin.post(f"/admin/v1/accounts/{account}/profiles/{profile}/backtest/apply")
    base = [service.moderate(base_key, c.text, f"f{i}") for i, c in enumerate(ahead)]
    adapted = [service.moderate(site_key, c.text, f"f{i}") for i, c in enumerate(ahead)]
    labels = [c.label for c in ahead]
    return {"site": name, "history": len(past), "future": len(ahead), "decided": decided, "reported": reported,
            "active": refit["active"], "reason": refit["reason"], "applied": applied.status_code == 200,
            "base": _figures(labels, base), "adapted": _figures(labels, adapted)}


def _decide_pending(service: Service, account: str, truth: dict) -> dict:
    items = service.ok(service.admin.get("/admin/v1/reviews", params={"account": account, "status": "pending",
                                                                      "limit": 1000}))["items"]
    counts = {"model_flagged": 0, "audit": 0}
    for item in items:
        if item.get("reference") not in truth:
            continue
        status = "rejected" if truth[item["reference"]] else "approved"
        service.ok(service.admin.post(f"/admin/v1/reviews/{item['id']}/decision", json={"status": status}))
        counts[item["reason"]] = counts.get(item["reason"], 0) + 1
    return counts


def _figures(labels: list[int], answers: list[dict]) -> dict:
    scores = [answer["categories"]["toxic"] for answer in answers]
    flagged = [answer["recommended_action"] != "allow" for answer in answers]
    benign = [f for f, y in zip(flagged, labels) if not y]
    harmful = [f for f, y in zip(flagged, labels) if y]
    return {"auc": round(float(roc_auc(labels, scores)), 4),
            "benign_flagged": round(sum(benign) / max(len(benign), 1), 4),
            "recall": round(sum(harmful) / max(len(harmful), 1), 4)}


def sites(history: int, future: int) -> dict[str, list]:
    by_dataset: dict[str, list] = {}
    for comment in load_comments():
        if comment.dataset in SERVED_TRAINING_EXCLUDES:
            by_dataset.setdefault(comment.dataset, []).append(comment)
    # A site needs both kinds of comment in its future to measure a ranking (EDOS's rows here are all sexist).
    return {name: rows for name, rows in sorted(by_dataset.items())
            if len(rows) >= history + future and min(sum(c.label for c in rows), sum(1 - c.label for c in rows)) >= 50}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--admin-url", default="http://127.0.0.1:8001")
    parser.add_argument("--admin-token", required=True)
    parser.add_argument("--history", type=int, default=250)
    parser.add_argument("--future", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sites", nargs="*", help="dataset names (default: every unseen one)")
    args = parser.parse_args()
    service = Service(args.base_url, args.admin_url, args.admin_token)
    results = []
    for name, comments in sites(args.history, args.future).items():
        if args.sites and name not in args.sites:
            continue
        results.append(run_site(service, name, comments, args.history, args.future, args.seed))
        print(json.dumps(results[-1]), flush=True)
    print(json.dumps(summary(results), indent=1))


def summary(results: list[dict]) -> dict:
    def mean(values):
        return round(sum(values) / max(len(values), 1), 4)

    return {"sites": len(results),
            "auc_base": mean([r["base"]["auc"] for r in results]),
            "auc_adapted": mean([r["adapted"]["auc"] for r in results]),
            "worst_auc_change": min((round(r["adapted"]["auc"] - r["base"]["auc"], 4) for r in results), default=None),
            "benign_flagged_base": mean([r["base"]["benign_flagged"] for r in results]),
            "benign_flagged_adapted": mean([r["adapted"]["benign_flagged"] for r in results]),
            "worst_benign_flagged_adapted": max((r["adapted"]["benign_flagged"] for r in results), default=None),
            "recall_base": mean([r["base"]["recall"] for r in results]),
            "recall_adapted": mean([r["adapted"]["recall"] for r in results])}


if __name__ == "__main__":
    main()
