"""Verdicts: thresholds a run's figures must meet, and whether a candidate regressed from a baseline."""
