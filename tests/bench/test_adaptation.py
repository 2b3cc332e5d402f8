"""The bench's section on each site's line: its table says what was measured, and the measuring child process runs."""

from __future__ import annotations

from bench.adaptation import AdaptationResults, section


def test_the_section_gives_the_apply_cost_and_a_row_per_label_count():
    results = AdaptationResults(apply_us=4.96, refit_wall_s={1000: 0.5, 10000: 3.21},
                                refit_cpu_s={1000: 0.4, 10000: 3.0}, refit_active={1000: True, 10000: False})
    lines = section(results)
    assert any("**5.0 µs** a text" in line for line in lines)
    assert "| 1,000 | 0.50 | 0.40 | yes |" in lines and "| 10,000 | 3.21 | 3.00 | no |" in lines


def test_synthetic_labels_carry_a_line_a_correction_can_learn():
    import numpy as np

    from adaptation.correction import fit_correction
    from bench.adaptation import _labels

    report = fit_correction(_labels(400, np.random.default_rng(1)))
    assert report.active, report.reason
