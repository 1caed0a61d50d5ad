#!/usr/bin/env bash
# Install (once) the headless browser of the web view's test (tests/integration/test_ui_browser.py):
#   chromium   Debian's Chromium, driven by Playwright's Python package as its executable_path
#              (Playwright's own browser downloads are never used)
#   fonts-dejavu-core  a font for the page's text (the screenshot in docs/images/ui.png)
# Idempotent: does nothing when all are installed. Needs root (apt-get).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/debian-packages.sh" --tag browser-packages chromium fonts-dejavu-core
