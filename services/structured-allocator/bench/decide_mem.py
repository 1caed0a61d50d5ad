# ruff: noqa  (a quick profiling script kept as run: python decide_mem.py WORKTREE nodes pods reps [na])
"""Decision CPU per pod in memory with the side-by-side's objects (upstream's slices and nodes),
the real ClusterState-less shape of scheduler_perf.memory_run. Args: WT nodes pods reps [node_allocatable]"""
import asyncio, sys, time, uuid
wt = sys.argv[1]
sys.path.insert(0, wt + "/bench")
from sidebyside import objects as o
from draflow_runtime.informer import key_of
from structured_allocator.assume import AssumeCache
from structured_allocator.core import CelCache, SliceIndex
try:  # the incremental free-device counts (absent before them: the same script measures both)
    from structured_allocator.device_counts import counting_slices
except ImportError:
    counting_slices = None
from structured_allocator.decision import Decider, Placement
from structured_allocator.nodefit import NodeUsage, PodUsage, pod_demand
from structured_allocator.scoring import make_scorer

class C:
    def __init__(self, items): self.items = items
    def get(self, k): return self.items.get(k)
    def keys(self): return list(self.items)

class S:
    def __init__(self, n):
        nodes = {o.node_name(i): o.node(i) for i in range(n)}
        for i, nd in enumerate(nodes.values()): nd["metadata"]["resourceVersion"] = str(i + 1)
        self.nodes = C(nodes)
        sl = []
        for i in range(n):
            s = o.resource_slice(i, 10); s["metadata"].setdefault("resourceVersion", "1"); sl.append(s)
        self.claims = C({}); self.assume = AssumeCache(); self.usage = NodeUsage()
        if counting_slices is None:
            self.slices = SliceIndex(sl)
        else:
            self.slices = counting_slices(self.assume.state, sl); self.device_counts = self.slices.counts
        self._classes = {o.CLASS: o.device_class()}; self._names = sorted(nodes)
    def node_names(self): return self._names
    def classes_by_name(self): return self._classes
    def pod_group(self, ns, name): return None

async def run(n, pods, na):
    st = S(n)
    d = Decider(st, make_scorer("pack"), int(__import__("os").environ.get("NTF", "32")), CelCache(), node_allocatable=na)
    placed = 0
    for i in range(pods):
        pod = o.pod(f"test-dra-{i}", "draflow"); pod["metadata"]["namespace"] = "test"; pod["metadata"]["uid"] = str(uuid.uuid4())
        spec = o.claim_spec()
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": f"c{i}", "namespace": "test", "uid": str(uuid.uuid4()),
                              "annotations": {"resource.kubernetes.io/pod-claim-name": pod["spec"]["resourceClaims"][0]["name"]},
                              "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"], "controller": True}]},
                 "spec": spec}
        st.claims.items[key_of(claim)] = claim
        pod["status"] = {"resourceClaimStatuses": [{"name": pod["spec"]["resourceClaims"][0]["name"], "resourceClaimName": f"c{i}"}]}
        dec = await d.decide(pod)
        if isinstance(dec, Placement):
            placed += 1
            st.assume.observe_claim({**claim, "status": {"allocation": dec.claims[0].allocation}})
            st.usage.observe(pod["metadata"]["uid"], PodUsage(dec.node, pod_demand(pod)))
        else:
            print("not placed", i, dec); break
    return placed

n, pods, reps = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
na = len(sys.argv) > 5 and sys.argv[5] == "na"
best = None
for _ in range(reps):
    t = time.process_time(); placed = asyncio.run(run(n, pods, na)); cpu = time.process_time() - t
    best = cpu if best is None else min(best, cpu)
    print(f"placed {placed}/{pods} cpu {cpu:.2f}s = {1000*cpu/pods:.2f} ms/pod", flush=True)
print(f"best {1000*best/pods:.2f} ms/pod")
