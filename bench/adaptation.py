"""What a site's own line costs: applying an account's correction to a text, and refitting it.

    python -m bench.adaptation       # about 20 s; `make bench` runs it too and puts its table in docs/benchmarks.md

Both in a child process held to one compute thread (OPENBLAS_NUM_THREADS=1 and the like, set before numpy loads), as
one core of a small machine. The labels are synthetic (random 512-number embeddings, a planted direction the served
score misses, half of them audits at rate 0.1): the fit's cost depends on their count, not on where they came from.

- **Apply**: `moderation.text_correction.corrected` on one text's answer (what the ingress adds to each text of an
  account with a live correction), median of `APPLY_CALLS` calls.
- **Refit**: `adaptation.correction.fit_correction` on 1,000 and 10,000 labels: the fit and its cross-validated check,
  wall and CPU seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

APPLY_CALLS = 20_000
LABEL_COUNTS = (1_000, 10_000)
ONE_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


@dataclass
class AdaptationResults:
    apply_us: float = 0.0  # microseconds per text
    refit_wall_s: dict[int, float] = field(default_factory=dict)  # labels -> seconds
    refit_cpu_s: dict[int, float] = field(default_factory=dict)
    refit_active: dict[int, bool] = field(default_factory=dict)


def _labels(count: int, rng):
    import numpy as np

    from adaptation.labels import Label

    labels = []
    for i in range(count):
        embedding = rng.normal(size=512).astype(np.float32)
        harmful = bool(rng.random() < 0.3)
        embedding[0] += 2.0 if harmful else -2.0
        audit = bool(rng.random() < 0.5)
        served_logit = float(rng.normal()) + (0.5 if harmful else -0.5)  # a served score that knows something
        labels.append(Label(embedding.astype(np.float16).astype(np.float32), served_logit, harmful,
                            "audit" if audit else "flagged", 0.1 if audit else 1.0, "en", float(i)))
    return labels


def _measure_here() -> dict:
    import numpy as np

    from adaptation.correction import fit_correction
    from models.text_scoring import TextEvidence, TextScores
    from moderation.text_correction import LiveCorrection, corrected

    rng = np.random.default_rng(0)
    out: dict = {"refit_wall_s": {}, "refit_cpu_s": {}, "refit_active": {}}
    for count in LABEL_COUNTS:
        labels = _labels(count, rng)
        wall, cpu = time.perf_counter(), time.process_time()
        report = fit_correction(labels)
        out["refit_wall_s"][count] = time.perf_counter() - wall
        out["refit_cpu_s"][count] = time.process_time() - cpu
        out["refit_active"][count] = report.active
        correction = report.correction
    answer = TextScores({"toxic": 0.3, "insult": 0.1}, "usem3-x",
                        evidence=TextEvidence(rng.normal(size=512).astype(np.float16), "en", "usem3-x"))
    live = LiveCorrection(correction, "usem3-x")
    times = []
    for _ in range(APPLY_CALLS):
        started = time.perf_counter()
        corrected(answer, live)
        times.append(time.perf_counter() - started)
    out["apply_us"] = float(np.median(times) * 1e6)
    return out


def measure() -> AdaptationResults:
    found = subprocess.run([sys.executable, "-m", "bench.adaptation", "--here"], env={**os.environ, **ONE_THREAD},
                           capture_output=True, text=True, check=True, timeout=600)
    raw = json.loads(found.stdout.strip().splitlines()[-1])
    return AdaptationResults(
        apply_us=raw["apply_us"],
        refit_wall_s={int(k): v for k, v in raw["refit_wall_s"].items()},
        refit_cpu_s={int(k): v for k, v in raw["refit_cpu_s"].items()},
        refit_active={int(k): v for k, v in raw["refit_active"].items()},
    )


def section(results: AdaptationResults) -> list[str]:
    """The `## Each site's own line` section of docs/benchmarks.md."""
    return [
        "## Each site's own line: the correction's cost",
        "",
        "`bench/adaptation.py`, one compute thread: applying an account's live correction to a text's answer (the "
        "ingress's added work per text, [site-adaptation.md](site-adaptation.md#the-correction)), and refitting it "
        "with its cross-validated check on synthetic labels.",
        "",
        f"Apply: **{results.apply_us:.1f} µs** a text (median of {APPLY_CALLS:,}; target under 500 µs).",
        "",
        "| labels | refit, wall s | CPU s | went live |",
        "|---|---|---|---|",
        *[f"| {count:,} | {results.refit_wall_s[count]:.2f} | {results.refit_cpu_s[count]:.2f} | "
          f"{'yes' if results.refit_active[count] else 'no'} |" for count in results.refit_wall_s],
    ]


def main() -> None:
    if "--here" in sys.argv:
        print(json.dumps(_measure_here()))
        return
    print("\n".join(section(measure())))


if __name__ == "__main__":
    main()
