"""Structured-parameters device allocation and a scheduler for DRA pods."""
