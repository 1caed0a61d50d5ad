"""How :class:`draflow_runtime.kube.KubeClient` talks to the API server: one request on the official
client's connection pool, its body encoded once, its answer decoded with orjson, a 429 retried.

Configuration (kubeconfig with client certificates, bearer tokens, CA data; in-cluster service account),
authentication headers and the HTTP connection pool come from the official client's asyncio API
(``kubernetes.aio``). Every request body (create, update, every patch type, server-side apply, subresources,
the ``request`` escape hatch) is encoded here, once, as canonical JSON (:func:`draflow_runtime.gojson.dumps`:
the bytes Go's ``encoding/json`` writes). The official client would ``json.dumps`` it with ``", "``/``": "``
separators and ASCII escapes, and the API server keeps raw JSON fields (``RawExtension``: opaque driver
parameters) byte for byte: bytes it would not write itself make every later write of the object look
like a change of an immutable field (``422 field is immutable``). So requests go out on the official
client's connection pool directly (``ApiClient.param_serialize`` for URL and auth, then the pool's
``request``), not through its ``RESTClientObject``, which re-encodes any body it is given.

Non-2xx answers raise the typed ``ApiError`` subclasses of :mod:`draflow_runtime.errors`; connection
failures raise ``TransportError``. Both keep the original error as ``__cause__``. A 429 that names a wait
is retried (:func:`draflow_runtime.retry.throttle_retry_wait`).

Proxy settings are read from the environment **once**, when the transport is made: ``HTTPS_PROXY`` /
``HTTP_PROXY`` (by the API server URL's scheme, credentials from the URL or ``.netrc``) unless
``NO_PROXY`` exempts the API server's host, aiohttp's own rules; a ``proxy`` in the client configuration
wins. The official client's session has ``trust_env=True``, which makes aiohttp look up ``.netrc`` and the
proxy variables again for *every* request, each time through the default thread pool (about a tenth of
the claim-controller's samples in a churn profile); its session here is made with ``trust_env=False``.
``.netrc`` is therefore not consulted for the API server itself (client-go never does either).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes.aio.client import ApiClient
from multidict import CIMultiDict
from yarl import URL

from . import gojson
from .errors import TransportError, api_error_from_status
from .log import get_logger
from .retry import THROTTLE_RETRIES, Sleep, throttle_retry_wait

__all__ = ["APPLY_CONTENT_TYPE", "Transport"]

log = get_logger("draflow_runtime.kube")

# Server-side apply: the server reads the body as YAML.
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"

# What the official client uses when a request has no timeout of its own.
_DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total=5 * 60)


class Transport:
    """Requests of one :class:`~draflow_runtime.kube.KubeClient` on the ``ApiClient``'s connection pool,
    with ``Impersonate-User``/``Impersonate-Group`` headers when ``impersonate`` is set."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        impersonate: str | None = None,
        impersonate_groups: list[str] | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._api = api_client
        self._sleep = sleep  # seam: tests record the waits a 429 asks for
        self._impersonate = impersonate
        self._impersonate_groups = list(impersonate_groups or [])
        configuration = api_client.configuration
        # The session is made on first use from the configuration: without trust_env (see the module
        # docstring); the proxy it would have looked up per request is looked up here, once.
        configuration.client_session_kwargs = {**(configuration.client_session_kwargs or {}),
                                               "trust_env": False}
        self._options = _connection_options(configuration)

    async def send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        client_timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """Send one request; return the open response (status not checked yet).

        ``body``: ``bytes`` go out as they are (already encoded), anything else as canonical JSON
        (for a server-side apply, which the server reads as YAML, with the characters YAML refuses escaped).
        """
        headers: dict[str, str] = {"Accept": "application/json"}
        data: bytes | None = None
        if body is not None:
            content_type = content_type or "application/json"
            data = gojson.request_body(body, yaml=content_type.startswith(APPLY_CONTENT_TYPE))
            headers["Content-Type"] = content_type
        method, url, header_params, _, _ = await self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or None,
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        all_headers: CIMultiDict[str] = CIMultiDict(header_params)
        if self._impersonate:
            all_headers["Impersonate-User"] = self._impersonate
            for group in self._impersonate_groups:
                all_headers.add("Impersonate-Group", group)
        try:
            return await self._session().request(
                method, url, headers=all_headers, data=data, timeout=client_timeout or _DEFAULT_TIMEOUT,
                **self._options,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TransportError(f"{method} {path}: {exc!r}") from exc

    def _session(self) -> aiohttp.ClientSession:
        """The official client's connection pool (TLS; ``trust_env`` off), created on first use."""
        rest = self._api.rest_client
        if rest.pool_manager is None:
            rest.pool_manager = rest._create_pool_manager()
        return rest.pool_manager

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        """One request, its answer decoded (a JSON list comes back as ``{"items": [...]}``); a 429 that
        names a wait is retried after it (at most ``THROTTLE_RETRIES`` times), any other error raised."""
        for attempt in range(THROTTLE_RETRIES + 1):
            resp = await self.send(method, path, query=query, body=body, content_type=content_type)
            try:
                data = await resp.read()
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise TransportError(f"{method} {path}: {exc!r}") from exc
            finally:
                resp.release()
            if resp.status < 400:
                break
            err = api_error_from_status(resp.status, data)
            wait = throttle_retry_wait(resp.status, resp.headers.get("Retry-After"), err.details, attempt)
            if wait is None:
                raise err
            log.info("request throttled, retrying", method=method, path=path, wait=wait, attempt=attempt + 1)
            await self._sleep(wait)
        if not data:
            return {}
        decoded = orjson.loads(data)
        return decoded if isinstance(decoded, dict) else {"items": decoded}


def _connection_options(configuration: Any) -> dict[str, Any]:
    """Per-request options from the client configuration (TLS SNI, proxy) and, when the configuration
    names no proxy, from the proxy environment as it is now."""
    options: dict[str, Any] = {}
    if configuration.tls_server_name:
        options["server_hostname"] = configuration.tls_server_name
    if configuration.proxy_headers:
        options["proxy_headers"] = configuration.proxy_headers
    if configuration.proxy:
        options["proxy"] = configuration.proxy
        return options
    try:
        proxy, proxy_auth = get_env_proxy_for_url(URL(str(configuration.host)))
    except LookupError:
        return options  # no proxy for this scheme, or NO_PROXY exempts the host
    log.info("using proxy from the environment", proxy=str(proxy.with_password(None)),
             api_server=str(configuration.host))
    options["proxy"] = proxy
    if proxy_auth is not None:
        options["proxy_auth"] = proxy_auth
    return options
