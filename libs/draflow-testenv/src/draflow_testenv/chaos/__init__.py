"""``make chaos``: a bounded chaos run of the whole stack (see docs/chaos.md)."""
