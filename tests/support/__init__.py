"""Test-only helpers: loopback servers that speak the published contracts, and score-cache probes.

Nothing under ``fixtures/``, ``rankers/``, ``reports/``, ``harness/`` or ``specs/`` imports this package
(``tests/test_layers.py``); a server a benchmark needs lives in ``harness/`` (``harness.stub_chat``).
"""
