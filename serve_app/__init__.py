"""The public HTTP app: the FastAPI app factory, its routes, auth and admission, the bounds on every request, schemas,
the access log and the error answers. It builds on the flow and the layers below and knows no Ray and no process code
(tests/test_layering.py): the graph's ingress (deployments/ingress.py) and the tests both run it from `create_app`.

- `app.py`: the public FastAPI app, built by a plain factory; `services.py`: everything a handler reaches (the
  stores, the moderation flow, the model backends).
- The routes: `routes_public.py` (the native API: moderate an image or a text, report content, a review item's
  status), `routes_openai.py` (OpenAI-compatible `/v1/moderations`), `routes_perspective.py` (Perspective-compatible,
  with `perspective_discovery.json`, its discovery document), `routes_feedback.py` (`/v1/feedback`: a site's backend
  says what a text really was), `routes_widget.py` (the browser widget's API) and `docs_page.py` (the `/docs` page,
  its Swagger UI served by the service itself).
- Who is calling: `auth.py` (the API key, its plan and profile, the rate limit and the admission, in one store round
  trip) and `client_address.py` (which client a request comes from, for per-address limits: believed from HAProxy
  only beside its per-run secret, IPv6 by its /64).
- The bounds on a request: `deadlines.py` (body timeouts, a server-side deadline, a per-account cap on bodies in
  progress), `bodies.py` (bodies read with a hard size limit, and the preamble every JSON route shares),
  `form_reader.py` (a multipart form read into memory with a hard limit) and `json_shape.py` (a JSON body's structure
  bounded before it is parsed); every limit of an image upload is named in models/image_upload.py.
- Bodies and the browser widget: `schemas.py` (the public API's request and response bodies), `widget_schemas.py`
  (the widget's), `widget_cors.py` (CORS for the widget's checks, only for the origins the token's key allows) and
  `static/` (not a package: `widget.js`, the widget's script).
- What every request passes: `errors.py` (every error the API answers with, and the one place exceptions become
  responses), `access_log.py` (one metadata-only log line per request), `response_start.py` (the one send wrapper that
  notes a response's status as it starts), `health.py` (what `/healthz` answers, from a snapshot refreshed in the
  background) and `audit_names.py` (the request.state names by which the admin listener's handlers tell the audit
  log who acted and on what).
"""
