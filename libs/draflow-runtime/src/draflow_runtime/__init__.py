"""Shared asyncio runtime of the draflow services: settings, logging, tracing, informer, work queue,
reconcile runner, leader election, NATS bus, metrics and health.
"""
