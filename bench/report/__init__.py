"""docs/benchmarks.md from one run, a module per section of the page (bench/__init__.py names each one), the prose
every run states in prose/*.md.

Below, the names the rest of bench/ reads (run.py, plot.py). `Results` and `Baseline` must stay here whatever moves:
runs pickled before the page was split (`--render`, `--baseline`) name them `bench.report.Results` and
`bench.report.Baseline`.
"""

from bench.report.labels import COLUMN_LABELS, LABELS
from bench.report.machine import load_average
from bench.report.page import DOC_PATH, document, write_document
from bench.report.ratios import point_at, ratio_line
from bench.report.results import Baseline, Results, baseline_of
from bench.report.sweep import tables
from bench.report.targets import OVERLOAD_CLIENTS, paired_clients

__all__ = ["COLUMN_LABELS", "DOC_PATH", "LABELS", "OVERLOAD_CLIENTS", "Baseline", "Results", "baseline_of", "document",
           "load_average", "paired_clients", "point_at", "ratio_line", "tables", "write_document"]
