"""The page's "Where the time goes" section: one request's time at concurrency 1 (medians), from the plain app, the
raw model and the hops, then what was found by hand and what is left (prose/where_the_time_goes.md)."""

from __future__ import annotations

from bench.report.markdown import ms, prose, table
from bench.report.ratios import point_at
from bench.report.results import Results


def time_breakdown(results: Results) -> list[str]:
    """Where one request's time goes at concurrency 1 (medians), from the plain app, the raw model and the hops."""
    graph, plain, hops = results.columns["graph"], results.columns["plain"], results.hops
    rows = [("", "short text", "image, nsfw only")]
    text_g, text_p = point_at(graph.points.get("text", []), 1), point_at(plain.points.get("text", []), 1)
    image_g, image_p = (point_at(c.points.get("image_default", []), 1) for c in (graph, plain))
    raw_text, raw_image = results.limit_one.get("text"), results.limit_one.get("image_default")

    def cell(value: float | None) -> str:
        return "" if value is None else ms(value)

    def minus(a, b):
        return None if a is None or b is None else a - b

    g_t, p_t = (p.p50_s if p else None for p in (text_g, text_p))
    g_i, p_i = (p.p50_s if p else None for p in (image_g, image_p))
    m_t, m_i = (raw.batch1_s if raw else None for raw in (raw_text, raw_image))
    h_t, h_i, h_p = (hops.get(k) for k in ("TextModel.score", "ImageModel.score_upload (nsfw)", "Policy.decide_many"))
    rows += [
        ("graph over HTTP, p50", cell(g_t), cell(g_i)),
        ("plain app over HTTP, p50 (HTTP, FastAPI, Redis, decode, model, decision)", cell(p_t), cell(p_i)),
        ("raw model, one item alone", cell(m_t), cell(m_i)),
        ("graph minus plain: what the graph adds", cell(minus(g_t, p_t)), cell(minus(g_i, p_i))),
        ("one handle call to the model deployment (from the driver; hop + model)", cell(h_t), cell(h_i)),
        ("  of which the hop (call minus raw model)", cell(minus(h_t, m_t)), cell(minus(h_i, m_i))),
        ("one handle call to Policy.decide_many (hop + a dict lookup; off the path unless MODERATION_POLICY_HOP=1)",
         cell(h_p), cell(h_p)),
        ("rest: HAProxy -> ingress replica (HTTP, forwarding, response)",
         cell(minus(minus(g_t, p_t), minus(h_t, m_t))), cell(minus(minus(g_i, p_i), minus(h_i, m_i)))),
    ]
    return [table(rows)]


def section(results: Results) -> list[str]:
    return ["## Where the time goes (concurrency 1, medians)", "", *time_breakdown(results), "",
            *prose("where_the_time_goes"), ""]
