"""The public /docs page works offline: Swagger UI's files come from the service, never from a CDN."""

from __future__ import annotations

import re


def test_docs_loads_swagger_ui_from_the_service_itself(api):
    page = api.client.get("/docs")
    assert page.status_code == 200
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sources and all(source.startswith("/docs-assets/") for source in sources), sources
    assert "cdn" not in page.text and "http" not in " ".join(sources)
    for source in sources:
        asset = api.client.get(source)
        assert asset.status_code == 200 and len(asset.content) > 100, source
    assert api.client.get("/redoc").status_code == 404  # ReDoc loads from a CDN: not offered
