"""Guardrails: every action a planner proposes passes through one gate before it may act."""
