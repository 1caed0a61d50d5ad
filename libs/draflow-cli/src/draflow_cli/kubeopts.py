"""kubectl's flags for every subcommand, the namespace a kubeconfig context names, ``-o`` output.

The flags are accepted before and after the subcommand (``draflow --kubeconfig k status`` and
``kubectl draflow status --kubeconfig k``, as kubectl passes everything after the plugin name): one
parent parser whose options default to *unset*, so a flag given after the subcommand does not get
overwritten by the top-level default; :func:`finish` fills the defaults (flag, then environment).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

OUTPUTS = ("table", "wide", "json", "yaml")

# dest -> (environment variable, default)
DEFAULTS: dict[str, tuple[str | None, Any]] = {
    "kubeconfig": ("KUBECONFIG", None),
    "context": (None, None),
    "namespace": (None, None),
    "all_namespaces": (None, False),
    "output": (None, "table"),
    "nats_url": ("NATS_URL", "nats://127.0.0.1:4222"),
    "jaeger_url": ("JAEGER_URL", "http://127.0.0.1:16686"),
    "allocator_url": ("DRAFLOW_ALLOCATOR_URL", ""),
    "token": ("DRAFLOW_TOKEN", None),
    "nats_creds": ("NATS_CREDS", None),
    "nats_user": ("NATS_USER", None),
    "nats_password": ("NATS_PASSWORD", None),
    "nats_ca": ("NATS_CA", None),
    "nats_cert": ("NATS_CERT", None),
    "nats_key": ("NATS_KEY", None),
}


def common_flags() -> argparse.ArgumentParser:
    """The parent parser of the top level and of every subcommand."""
    p = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help="kubeconfig file (env KUBECONFIG; default: in-cluster, "
                   "~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: the current context)")
    p.add_argument("-n", "--namespace", help="namespace of NAME arguments (default: the context's, "
                   "else default)")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (where it applies)")
    p.add_argument("-o", "--output", choices=OUTPUTS, help="table (default), wide, json or yaml")
    p.add_argument("--nats-url", help="NATS server URL (env NATS_URL; default nats://127.0.0.1:4222)")
    p.add_argument("--jaeger-url", help="Jaeger query URL (env JAEGER_URL; default http://127.0.0.1:16686)")
    p.add_argument("--allocator-url", help="structured-allocator HTTP server (env DRAFLOW_ALLOCATOR_URL; "
                   "default: its pod through the API server's proxy)")
    p.add_argument("--token", help="bearer token for the allocator's /explain and /ui (env DRAFLOW_TOKEN; "
                   "default: the kubeconfig's token, if it has one)")
    p.add_argument("--nats-creds", help="NATS credentials file (env NATS_CREDS)")
    p.add_argument("--nats-user", help="NATS user (env NATS_USER)")
    p.add_argument("--nats-password", help="NATS password (env NATS_PASSWORD; better there than on the "
                   "command line)")
    p.add_argument("--nats-ca", help="CA of the NATS server's certificate; turns TLS on (env NATS_CA)")
    p.add_argument("--nats-cert", help="client certificate for NATS (env NATS_CERT)")
    p.add_argument("--nats-key", help="its private key (env NATS_KEY)")
    return p


def finish(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> argparse.Namespace:
    """Fill every flag not given from its environment twin or default."""
    env = os.environ if environ is None else environ
    for dest, (var, default) in DEFAULTS.items():
        if not hasattr(args, dest):
            setattr(args, dest, (env.get(var) or default) if var else default)
    return args


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace the (current or named) context of the kubeconfig sets, or None.

    ``kubeconfig`` may be a ``:``-separated list, as KUBECONFIG is: the first file naming the current
    context wins, the first definition of each context wins (kubectl's merge rules).
    """
    paths = (kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")).split(":")
    current = context
    contexts: dict[str, Mapping[str, Any]] = {}
    for path in filter(None, paths):
        try:
            doc = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        current = current or doc.get("current-context") or None
        for entry in doc.get("contexts") or ():
            contexts.setdefault(str(entry.get("name")), entry.get("context") or {})
    if not current:
        return None
    return (contexts.get(current) or {}).get("namespace") or None


def namespace_of(args: argparse.Namespace) -> str:
    """``-n``, else the kubeconfig context's namespace, else ``default`` (as kubectl)."""
    return str(args.namespace or context_namespace(args.kubeconfig, args.context) or "default")


def dump(doc: Any, output: str) -> str:
    """``-o json`` (indented, as kubectl) or ``-o yaml``."""
    if output == "yaml":
        return yaml.safe_dump(doc, sort_keys=False).rstrip("\n")
    return json.dumps(doc, indent=4)


def structured(output: str) -> bool:
    return output in ("json", "yaml")
