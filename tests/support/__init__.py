"""Test-only helpers: loopback servers that speak the published contracts, and score-cache probes.

Nothing under ``fixtures/``, ``rankers/``, ``reports/`` or ``harness/`` imports this package.
"""
