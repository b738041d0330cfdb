"""Evaluation: benchmark suites, scorers and metrics."""
