"""Measurements kept as records or run by hand (`python -m bench.experiments.<name>`), apart from `make bench`'s
run: bench/__init__.py names each one and the document its figures went to.

- `transport.py`: an upload inline in the message or by reference (docs/image-models.md, Transport).
- `functional_under_load.py`: the written functional suite through the graph's Perspective surface at 1, 4 and 16
  clients (docs/text-model.md, "Under load").
- `ocr_engines.py`: OCR engines compared on real images with text (`ocr_images/`, their sources in its SOURCES.md).
"""
