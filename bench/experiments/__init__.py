"""Measurements kept as records or run by hand (`python -m bench.experiments.<name>`), apart from `make bench`'s
run: bench/__init__.py names each one and the document its figures went to."""
