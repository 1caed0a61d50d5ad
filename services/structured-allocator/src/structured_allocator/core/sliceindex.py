"""The node-independent index of ResourceSlices, and the pools of each node it has gathered.

:class:`SliceIndex` is kept incrementally by the service (``upsert``/``remove`` per slice event). It
groups slices by ``spec.nodeName`` (node-local) versus everything else (shared), and by pool, so
gathering the pools of one node touches that node's slices plus the shared ones, never all slices.

:meth:`SliceIndex.node_pools` remembers the :func:`~.pools.gather_pools` result of each node (and the
search's candidate list built from it) until something it was computed from changes. The pools of a
node are a function of the slices only (never of allocations: what is in use is read from the
allocated state during each search), of the node's name and labels (slice and device node selectors)
and of the :class:`~.types.Features`. So an entry is kept with the node's labels and the features and
recomputed when either differs, and a slice change drops exactly the entries that could have read it:

* a slice without ``spec.nodeName`` (shared: any node may gather it), or a change in a pool that has
  one: every entry;
* otherwise: the entries of every node with a slice in the changed slice's pool (gathering a node's
  pool reads the other slices of that pool when its own look incomplete, e.g. a newer generation
  elsewhere), the changed slice's node included.

A decision therefore builds the pools of a node once per change, not once per visit (``gather_pools``
was 8-9 % of the allocator's CPU in the side-by-side template and stream runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from .pools import Pool, PreparedDevice, PreparedSlice, gather_pools
from .types import Features

__all__ = ["NodePools", "SliceIndex"]


class NodePools(NamedTuple):
    """The pools of one node in allocation order and the search's candidates: every device of the
    usable (complete, valid) pools, in pool → slice → device order. Shared: never mutate (but
    ``checked``, a memo that lives as long as the pools)."""

    pools: list[Pool]
    candidates: list[tuple[Pool, PreparedSlice, PreparedDevice]]
    # what :func:`~.precheck.device_errors_possible` found for these pools, per set of selectors
    checked: dict[tuple[Any, ...], bool]


class _Entry(NamedTuple):
    labels: dict[str, str]  # a copy of the node's labels when the entry was computed
    features: Features
    pools: NodePools


class SliceIndex:
    """All ResourceSlices, indexed per node, shared, and per pool. Updated incrementally.

    ``upsert`` with an unchanged ``metadata.resourceVersion`` keeps the prepared slice (and its
    selector memo); any change replaces it, which drops the memo for that slice only.
    """

    def __init__(self, slices: Iterable[Mapping[str, Any]] = ()) -> None:
        self._by_name: dict[str, PreparedSlice] = {}
        self._on_node: dict[str, dict[str, PreparedSlice]] = {}
        self._shared: dict[str, PreparedSlice] = {}
        self._by_pool: dict[tuple[str, str], dict[str, PreparedSlice]] = {}
        self._mapping_slices = 0  # slices with a device that has nodeAllocatableResources
        self._node_pools: dict[str, _Entry] = {}  # node name -> its gathered pools
        for s in slices:
            self.upsert(s)

    def upsert(self, raw: Mapping[str, Any]) -> PreparedSlice:
        name = (raw.get("metadata") or {}).get("name", "")
        old = self._by_name.get(name)
        rv = (raw.get("metadata") or {}).get("resourceVersion")
        if old is not None and (old.raw is raw or (rv is not None and rv == old.resource_version)):
            return old
        if old is not None:
            self.remove(name)
        prepared = PreparedSlice(raw)
        self._by_name[name] = prepared
        if prepared.node_name:
            self._on_node.setdefault(prepared.node_name, {})[name] = prepared
        else:
            self._shared[name] = prepared
        self._by_pool.setdefault(prepared.pool_id, {})[name] = prepared
        self._mapping_slices += prepared.maps_node_resources
        self._forget_pools_of(prepared)
        return prepared

    add = upsert
    update = upsert

    def remove(self, name: str) -> None:
        old = self._by_name.pop(name, None)
        if old is None:
            return
        self._forget_pools_of(old)  # while the pool still lists it
        self._mapping_slices -= old.maps_node_resources
        if old.node_name:
            per_node = self._on_node.get(old.node_name, {})
            per_node.pop(name, None)
            if not per_node:
                self._on_node.pop(old.node_name, None)
        else:
            self._shared.pop(name, None)
        per_pool = self._by_pool.get(old.pool_id, {})
        per_pool.pop(name, None)
        if not per_pool:
            self._by_pool.pop(old.pool_id, None)

    def slices_for_node(self, node_name: str) -> list[PreparedSlice]:
        return [*self._on_node.get(node_name, {}).values(), *self._shared.values()]

    def pool_slices(self, pool_id: tuple[str, str]) -> list[PreparedSlice]:
        return list(self._by_pool.get(pool_id, {}).values())

    @property
    def maps_node_resources(self) -> bool:
        """Whether a device of some slice has ``nodeAllocatableResources`` (none: no pod has a
        node-allocatable DRA share anywhere)."""
        return self._mapping_slices > 0

    def __len__(self) -> int:
        return len(self._by_name)

    def __iter__(self) -> Iterator[PreparedSlice]:
        return iter(self._by_name.values())

    # -- the pools of each node -----------------------------------------------------------------------

    def node_pools(self, node: Mapping[str, Any], features: Features) -> NodePools:
        """:func:`~.pools.gather_pools` for ``node`` and the candidates built from it, remembered until
        a slice it may have read, the node's labels or ``features`` change (module docstring).
        Raises what ``gather_pools`` raises (nothing is remembered then)."""
        meta = node.get("metadata") or {}
        name = meta.get("name", "")
        labels = meta.get("labels") or {}
        entry = self._node_pools.get(name)
        if entry is not None and entry.features == features and entry.labels == labels:
            return entry.pools
        pools = gather_pools(self, node, features)
        candidates = [
            (p, s, d) for p in pools if not (p.incomplete or p.invalid) for s in p.slices for d in s.devices
        ]
        gathered = NodePools(pools, candidates, {})
        self._node_pools[name] = _Entry(dict(labels), features, gathered)
        return gathered

    def _forget_pools_of(self, changed: PreparedSlice) -> None:
        """Drop every remembered node's pools that ``changed`` (a slice being added or removed) may
        have been part of."""
        if not self._node_pools:
            return
        in_pool = self._by_pool.get(changed.pool_id, {}).values()
        if not changed.node_name or any(not s.node_name for s in in_pool):
            self._node_pools.clear()
            return
        self._node_pools.pop(changed.node_name, None)
        for s in in_pool:
            if s.node_name:
                self._node_pools.pop(s.node_name, None)
