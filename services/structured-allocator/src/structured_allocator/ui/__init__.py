"""The allocator's live web view (``GET /ui``): nodes x devices coloured by state, a device's claims,
pods, timeline and trace link, and the claims that cannot be placed with their explanation.

* :mod:`.view`: the documents, pure, from the allocator's caches;
* :mod:`.server`: the HTTP routes on the observability server (same auth as ``/explain``);
* :mod:`.page`: the page (``page.html``: HTML, CSS and a small vanilla script).
"""

from .server import WebView
from .view import Limits

__all__ = ["Limits", "WebView"]
