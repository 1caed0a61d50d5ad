"""Informer: a cache of one resource kept current by list + watch.

Lifecycle of the background task:

1. **list**, paginated (``limit``/``continue``), as one consistent snapshot; the cache is made equal to
   it by a **diff** (add / update / delete events for exactly what changed), so a relist never loses,
   duplicates or re-announces objects;
2. **watch** from the list's resourceVersion with bookmarks; ``resource_version`` follows every event,
   BOOKMARK included;
3. the watch ends (server timeout) or the connection breaks → watch again from ``resource_version``
   (with backoff after failures); ``410 Gone`` (HTTP or ERROR event) → back to 1.

A ``transform`` (client-go's ``SetTransform``) may shrink every listed or watched object before it is
cached, e.g. a pod to the few fields a scheduler counts; it must keep ``metadata.name``, ``namespace``
and ``resourceVersion``.

Handlers are called synchronously, in event order, after the cache and indexes are updated; they must
only enqueue keys. A handler that raises is logged and does not disturb the informer. Cached objects
are shared: never mutate one, copy it first.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable
from typing import Any, Literal

from .errors import ApiError, Gone, TransportError
from .kube import KubeClient, Resource
from .log import get_logger

__all__ = ["EventType", "Handler", "Indexer", "Informer", "Transform", "key_of"]

log = get_logger(__name__)

EventType = Literal["add", "update", "delete"]
Handler = Callable[[EventType, "dict[str, Any] | None", "dict[str, Any] | None"], None]
Indexer = Callable[[dict[str, Any]], Iterable[str]]
Transform = Callable[[dict[str, Any]], dict[str, Any]]

_PAGE_SIZE = 500
_BACKOFF_START = 0.2
_BACKOFF_MAX = 30.0


def key_of(obj: dict[str, Any]) -> str:
    """Cache key of an object: ``namespace/name``, or ``name`` for cluster-scoped objects."""
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else meta["name"]


def _rv(obj: dict[str, Any] | None) -> str | None:
    return (obj or {}).get("metadata", {}).get("resourceVersion")


# `Informer.list` shadows the builtin inside the class body; annotations there use this alias.
_List = list

class Informer:
    """List + watch cache of ``res`` (optionally one namespace and selectors) with indexes.

    ``indexers`` map an index name to a function returning the index values of an object
    (e.g. ``{"byNode": lambda o: [o["spec"]["nodeName"]]}``); an indexer that raises indexes nothing.
    """

    def __init__(
        self,
        kube: KubeClient,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: dict[str, Indexer] | None = None,
        name: str | None = None,
        *,
        watch_timeout: int = 300,
        transform: Transform | None = None,
    ) -> None:
        self._kube = kube
        self._res = res
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._indexers = dict(indexers or {})
        self.name = name or res.plural
        self._watch_timeout = watch_timeout
        self._transform = transform
        self._items: dict[str, dict[str, Any]] = {}
        self._indices: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._index_values: dict[str, dict[str, _List[str]]] = {n: {} for n in self._indexers}
        self._handlers: _List[Handler] = []
        self._rv: str | None = None
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lists = 0
        self._log = log.bind(informer=self.name, resource=res.plural)

    # -- public API ------------------------------------------------------------------------------

    def add_handler(self, handler: Handler) -> None:
        """Call ``handler(event, old, new)`` on every change: ``("add", None, obj)``,
        ``("update", old, new)``, ``("delete", old, None)``. Handlers added after start only see later
        changes (walk ``list()`` for the current state)."""
        self._handlers.append(handler)

    async def start(self) -> None:
        """Start the list + watch task. Idempotent while running.

        A first start lists. A start after ``stop()`` keeps the cache and resumes watching from the last
        resourceVersion; if that version has expired meanwhile (410), it relists and diffs, so handlers
        see exactly what changed while the informer was stopped.
        """
        if self._task is not None and not self._task.done():
            return
        self._task = asyncio.create_task(self._run(), name=f"informer-{self.name}")

    async def stop(self) -> None:
        """Stop the background task. The cache and ``resource_version`` stay. Idempotent."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.wait({task})

    async def wait_synced(self) -> None:
        """Return once the first list has been applied to the cache (at once if it already was)."""
        await self._synced.wait()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion seen (list, event or bookmark)."""
        return self._rv

    @property
    def list_count(self) -> int:
        """How many full lists were made (1 after the first sync; +1 per relist after ``410 Gone``)."""
        return self._lists

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached object with ``key`` (see ``key_of``), or ``None``. Do not mutate it."""
        return self._items.get(key)

    def list(self) -> _List[dict[str, Any]]:
        """All cached objects (a new list of the shared objects)."""
        return list(self._items.values())

    def keys(self) -> _List[str]:
        return list(self._items)

    def by_index(self, index: str, value: str) -> _List[dict[str, Any]]:
        """Cached objects whose indexer ``index`` returned ``value``.

        Raises ``KeyError`` for an index not given to the constructor.
        """
        keys = self._indices[index].get(value, ())
        return [self._items[k] for k in keys]

    def __len__(self) -> int:
        return len(self._items)

    # -- cache -----------------------------------------------------------------------------------

    def _index(self, key: str, obj: dict[str, Any] | None) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            for value in self._index_values[name].pop(key, ()):
                members = index.get(value)
                if members is not None:
                    members.discard(key)
                    if not members:
                        del index[value]
            if obj is None:
                continue
            try:
                values = [str(v) for v in fn(obj) or ()]
            except Exception:
                self._log.warning("indexer failed", index=name, key=key, exc_info=True)
                values = []
            self._index_values[name][key] = values
            for value in values:
                index.setdefault(value, set()).add(key)

    def _notify(self, event: EventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for handler in self._handlers:
            try:
                handler(event, old, new)
            except Exception:
                self._log.exception("informer handler failed", change=event)

    def _upsert(self, obj: dict[str, Any]) -> None:
        key = key_of(obj)
        old = self._items.get(key)
        self._items[key] = obj
        self._index(key, obj)
        self._notify("add" if old is None else "update", old, obj)

    def _remove(self, key: str) -> None:
        old = self._items.pop(key, None)
        if old is None:
            return
        self._index(key, None)
        self._notify("delete", old, None)

    def _replace(self, objects: dict[str, dict[str, Any]]) -> None:
        """Make the cache equal to ``objects`` with the minimal set of events."""
        for key in [k for k in self._items if k not in objects]:
            self._remove(key)
        for key, obj in objects.items():
            old = self._items.get(key)
            if old is not None and _rv(old) == _rv(obj):
                continue
            self._upsert(obj)

    # -- list + watch ----------------------------------------------------------------------------

    async def _list_all(self) -> tuple[dict[str, dict[str, Any]], str]:
        """One consistent paginated list; restarts from scratch if a continue token expires."""
        while True:
            objects: dict[str, dict[str, Any]] = {}
            continue_: str | None = None
            list_rv = ""
            try:
                while True:
                    page = await self._kube.list(
                        self._res,
                        namespace=self._namespace,
                        label_selector=self._label_selector,
                        field_selector=self._field_selector,
                        limit=_PAGE_SIZE,
                        continue_=continue_,
                    )
                    meta = page.get("metadata") or {}
                    if continue_ is None:
                        list_rv = meta.get("resourceVersion", "")
                    for obj in page.get("items") or ():
                        if self._transform is not None:
                            obj = self._transform(obj)
                        objects[key_of(obj)] = obj
                    continue_ = meta.get("continue") or None
                    if not continue_:
                        return objects, list_rv
            except Gone:
                self._log.info("continue token expired, listing again")

    async def _relist(self) -> None:
        objects, list_rv = await self._list_all()
        self._lists += 1
        self._replace(objects)
        self._rv = list_rv
        self._synced.set()
        self._log.info("informer listed", objects=len(objects), resource_version=list_rv)

    async def _watch(self) -> None:
        timeout = int(self._watch_timeout * (1 + random.random()))
        async for etype, obj in self._kube.watch(
            self._res,
            namespace=self._namespace,
            resource_version=self._rv,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            allow_bookmarks=True,
            timeout_seconds=timeout,
        ):
            rv = _rv(obj)
            if self._transform is not None and etype in ("ADDED", "MODIFIED", "DELETED"):
                obj = self._transform(obj)
            if etype in ("ADDED", "MODIFIED"):
                self._upsert(obj)
            elif etype == "DELETED":
                self._remove(key_of(obj))
            if rv:
                self._rv = rv

    async def _run(self) -> None:
        need_list = not self._synced.is_set() or self._rv is None
        backoff = _BACKOFF_START
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                await self._watch()
                backoff = _BACKOFF_START  # a clean end: the server timed the watch out
            except Gone as err:
                self._log.info("watch expired, relisting", resource_version=self._rv, error=err.message)
                need_list = True
            except (ApiError, TransportError) as err:
                self._log.warning("list/watch failed, retrying", error=str(err), retry_in=backoff)
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, _BACKOFF_MAX)
            except Exception:
                self._log.exception("informer error, retrying", retry_in=backoff)
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, _BACKOFF_MAX)
