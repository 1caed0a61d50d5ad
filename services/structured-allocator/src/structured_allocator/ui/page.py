"""The web view's page: ``page.html`` beside this module, one HTML document with its style and a small
vanilla script (no build step).

The script polls ``<page>/state.json`` every second (relative to the page's own path, so it works
behind the API server's pod proxy too), redraws the grid when the document changed, and on a click
asks ``<page>/device?driver=&pool=&device=`` for the device's claims, pods, timeline and trace link.
Every text from the cluster is set with ``textContent`` (never parsed as HTML).
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["HTML"]

HTML = files(__package__).joinpath("page.html").read_text(encoding="utf-8")
