"""Leaderboard: sweeps over (agent config x problem id), the results store, scoring, report."""
