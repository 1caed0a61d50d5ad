"""The ``draflow`` command: look at a running draflow from the outside (status, explain, events, trace)."""
