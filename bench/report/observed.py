"""The page's "Observed during the run" section: the machine's load, each column's warm-up, replicas, batches,
listening sockets and memory, and what the run skipped."""

from __future__ import annotations

from bench.report.labels import COLUMN_LABELS
from bench.report.markdown import ms
from bench.report.results import Results


def section(results: Results) -> list[str]:
    return ["## Observed during the run", "", *[f"- {line}" for line in observed(results)], ""]


def observed(results: Results) -> list[str]:
    lines = [f"Load average (1/5/15 min) before: {results.load_before}; after: {results.load_after}. Other work on "
             "these cores, if any, shows there: compare columns of the same run, measured side by side, first."]
    for name, column in results.columns.items():
        if column.settle:
            last = column.settle[-1]
            held = len(column.settle) >= 3 and all(e["replicas"] == last["replicas"] for e in column.settle[-3:])
            lines.append(f"{COLUMN_LABELS[name]}: warmed at 16 clients for {last['s']:.0f} s in "
                         f"{len(column.settle)} rounds, "
                         f"{'until the replica counts held for 3 rounds' if held else 'stopped by the time bound'}; "
                         f"counts after each round: {_counts_history(column.settle)}; replicas then: "
                         f"{_replicas(last['replicas'])}; after the measurements: {_replicas(column.replicas_after)}.")
        if column.batch_sizes:
            lines.append(f"{COLUMN_LABELS[name]}: batch sizes that formed over the measured points (Ray's metrics "
                         "endpoint, `ray_moderation_model_batch_size` buckets): " + ", ".join(
                             f"{model} mean {mean:.2f}, {ones * 100:.0f}% of batches of one, {count} batches"
                             for model, (mean, ones, count) in column.batch_sizes.items()) + ".")
        elif name != "plain":
            lines.append(f"{COLUMN_LABELS[name]}: no batch sizes on Ray's metrics endpoint (not exported or not yet "
                         "pushed when read).")
        exposed = _exposed(column.sockets)
        lines.append(f"{COLUMN_LABELS[name]}: {len(column.sockets)} listening TCP sockets, {len(exposed)} of them not "
                     f"on loopback" + (f" ({', '.join(sorted({s.split(' ', 1)[-1] for s in exposed}))})" if exposed else "")
                     + ".")
        lines.append(f"{COLUMN_LABELS[name]}: {column.memory_pss_mib:.0f} MiB PSS in {column.processes} processes "
                     "(every process started for it, store included)"
                     + (f"; the load generator used {column.load_cpu_s:.0f} CPU-s on the same cores while measuring "
                        "it and the plain app beside it." if column.load_cpu_s else "."))
    lines.append(f"Decoding one bench photo to frames (the ImageModel replica's work; in the raw limit's rows "
                 f"\"decoding included\" only): {ms(results.decode_s)}.")
    lines.extend(results.skipped)
    return lines


def _replicas(counts: dict[str, dict[str, int]]) -> str:
    return ", ".join(f"{name} " + " + ".join(f"{n} {state}" for state, n in states.items())
                     for name, states in counts.items()) or "unknown"


def _counts_history(settle: list[dict]) -> str:
    """'2+1+1+1+1' per round: ingress+image+text+policy(+gemma) replicas, RUNNING and STARTING alike."""
    return " ".join(f"{entry['s']:.0f}s:" + "+".join(str(sum(states.values())) for states in entry["replicas"].values())
                    for entry in settle)


def _exposed(sockets: list[str]) -> list[str]:
    return [s for s in sockets if not s.split(" ", 1)[0].startswith(("127.", "[::1]", "[::ffff:127."))]
