"""Generate docs/configuration.md from the services' settings classes (pydantic-settings).

    python hack/gen_settings_docs.py          # write docs/configuration.md
    python hack/gen_settings_docs.py --check  # fail if docs/configuration.md is stale (make test)
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from draflow_runtime.settings import settings_reference

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "configuration.md"

# (service, module, settings class): one row per deployable service.
SERVICES = (
    ("claim-controller", "claim_controller.settings", "Settings"),
    ("structured-allocator", "structured_allocator.settings", "Settings"),
    ("slice-publisher", "slice_publisher.settings", "PublisherSettings"),
    ("kubelet-dra-shim", "kubelet_dra_shim.settings", "ShimSettings"),
    ("reference-driver", "reference_driver.settings", "DriverSettings"),
)


def render() -> str:
    parts = [
        "# Configuration reference\n",
        "Generated from the settings classes by `python hack/gen_settings_docs.py` (checked by `make test`).",
        "Every setting has a default, a flag and an environment variable; flags win over the environment,",
        "the environment wins over defaults. Tracing is configured with the standard `OTEL_*` variables",
        "(`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME`, `OTEL_SDK_DISABLED`, ...).\n",
        "`DRAFLOW_KUBE_FIELD_VALIDATION` (every service, no flag; `Strict`, `Warn` or `Ignore`; unset by",
        "default) is sent as `fieldValidation` on every create, update and patch to the API server: with",
        "`Strict` a field the server does not know fails the write (400/422 naming it) instead of being",
        "dropped silently. draflow-testenv runs every service and test client with `Strict`.\n",
    ]
    for service, module, cls_name in SERVICES:
        cls = getattr(importlib.import_module(module), cls_name)
        parts.append(f"## {service}\n")
        parts.append(f"`{service} --help` prints the same list. Class: `{module}.{cls_name}`.\n")
        parts.append(settings_reference(cls))
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run `make docs`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
