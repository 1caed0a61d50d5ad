"""Random allocation scenarios for the differential check against upstream's allocator (``diff_kit.py``).

:func:`scenario` draws one small but nasty case from a seed (``random.Random``, so a seed always gives the
same case): two drivers, up to four pools of one to three slices (incomplete pools: a
``resourceSliceCount`` above the slices seen; generation mismatches; node-local, other-node, allNodes,
node-selector and per-device node selection), devices with string/int/bool/version attributes (some
domain-qualified), capacities, shared counters + ``consumesCounters`` (partitionable devices),
multi-allocatable devices with request policies, taints, binding conditions; claims with ExactCount/All
requests, CEL selectors, tolerations, adminAccess, capacity requests, ``firstAvailable`` subrequests,
matchAttribute/distinctAttribute constraints; claims already allocated (exclusively or shared). With every
gate on (alpha included): list-valued attributes in constraints, compatibility groups, skipNodeOperations.

Objects are written as the API server serves them (defaults filled in: ``allocationMode``, ``count``,
toleration ``operator``), since upstream's allocator gets them from an informer and does not default.
CEL expressions are ones both sides support (none over list attributes, no alpha-only functions).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

D1 = "gpu.example.com"
D2 = "nic.example.com"
NODE = {"metadata": {"name": "node-1", "labels": {"zone": "a", "rack": "r1"}}}
SHARE_NAMESPACE = uuid.UUID("6a1d9a5e-0c55-4a1e-9d43-1d0e6b9f6a11")

# Feature sets (upstream Features field names): the v1.37 defaults (beta + GA on), random subsets of those,
# and every gate on (the alpha ones select upstream's "experimental" allocator and draflow's gated paths:
# compatibility groups on counter consumption, skipNodeOperations slices and nodes declaring the feature).
BETA = ["AdminAccess", "PrioritizedList", "PartitionableDevices", "DeviceTaints", "DeviceBindingAndStatus",
        "ConsumableCapacity", "FractionalCapacityRange"]
ALPHA = ["CompatibilityGroups", "DerivedAttributes", "ListTypeAttributes", "OptionalNodeOperations"]

# Guarded expressions (has(), a driver check) never fail at run time; the risky ones fail on a device
# without the attribute/capacity (a CEL runtime error is broken input on both sides, when reached).
SAFE_SELECTORS = [
    f'device.driver == "{D1}"',
    f'device.driver == "{D2}"',
    f'has(device.attributes["{D1}"].model) && device.attributes["{D1}"].model != "b"',
    f'has(device.attributes["{D1}"].mem) && device.attributes["{D1}"].mem >= 2',
    f'has(device.attributes["{D1}"].fast) && device.attributes["{D1}"].fast == false',
    f'has(device.attributes["{D1}"].ver) && device.attributes["{D1}"].ver.isGreaterThan(semver("1.1.0"))',
    f'has(device.attributes["{D1}"].ver) && device.attributes["{D1}"].ver.major() == 1',
    'has(device.attributes["example.com"].numa) && device.attributes["example.com"].numa == 0',
    f'has(device.capacity["{D1}"].memory) && device.capacity["{D1}"].memory.compareTo(quantity("2Gi")) >= 0',
    'device.allowMultipleAllocations == true',
    'device.allowMultipleAllocations == false',
    'device.attributes.exists(d, d == "example.com")',
    'device.driver.startsWith("gpu")',
    'true',
]
RISKY_SELECTORS = [
    f'device.attributes["{D1}"].model == "a"',
    f'device.attributes["{D1}"].fast',
    f'device.capacity["{D2}"].bandwidth.isGreaterThan(quantity("1G"))',
]


def _selector(rng: random.Random) -> str:
    return rng.choice(RISKY_SELECTORS if rng.random() < 0.15 else SAFE_SELECTORS)


CONSTRAINT_ATTRS = [f"{D1}/model", f"{D1}/mem", f"{D1}/fast", f"{D1}/ver", "example.com/numa", f"{D2}/port"]
LIST_ATTRS = [f"{D1}/numas", f"{D1}/tags", f"{D2}/numas"]  # list-valued (DRAListTypeAttributes)


def _q(rng: random.Random, values: list[str]) -> str:
    return rng.choice(values)


def _attributes(rng: random.Random, driver: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if rng.random() < 0.7:
        attrs["model"] = {"string": rng.choice(["a", "b"])}
    if rng.random() < 0.6:
        attrs["mem"] = {"int": rng.choice([1, 2, 4])}
    if rng.random() < 0.5:
        attrs["fast"] = {"bool": rng.random() < 0.5}
    if rng.random() < 0.5:
        attrs["ver"] = {"version": rng.choice(["1.0.0", "1.2.0", "2.0.0-rc.1", "2.0.0"])}
    if rng.random() < 0.4:
        attrs["example.com/numa"] = {"int": rng.choice([0, 1])}
    if driver == D2 and rng.random() < 0.6:
        attrs["port"] = {"int": rng.choice([1, 2])}
    if rng.random() < 0.1 and "model" in attrs:
        attrs[f"{driver}/model"] = attrs.pop("model")  # the driver's own domain, written out
    return attrs


def _device(
    rng: random.Random, name: str, driver: str, counter_sets: list[str], features: set[str]
) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    attrs = _attributes(rng, driver)
    if "ListTypeAttributes" in features:
        if rng.random() < 0.5:
            attrs["numas"] = {"ints": sorted(rng.sample([0, 1, 2], rng.randint(1, 2)))}
        if rng.random() < 0.4:
            attrs["tags"] = {"strings": sorted(rng.sample(["x", "y", "z"], rng.randint(1, 2)))}
    if attrs:
        d["attributes"] = attrs
    cap: dict[str, Any] = {}
    multi = rng.random() < 0.25
    if rng.random() < 0.6:
        key = "memory" if driver == D1 else "bandwidth"
        value = _q(rng, ["1Gi", "2Gi", "4Gi"] if driver == D1 else ["1G", "10G"])
        c: dict[str, Any] = {"value": value}
        if multi and rng.random() < 0.6:
            if rng.random() < 0.5:
                c["requestPolicy"] = {"default": "1Gi" if driver == D1 else "1G",
                                      "validRange": {"min": "1Gi" if driver == D1 else "1G",
                                                     **({"step": "1Gi"} if driver == D1 else {})}}
            else:
                c["requestPolicy"] = {"default": "1Gi" if driver == D1 else "1G",
                                      "validValues": ["1Gi", "2Gi"] if driver == D1 else ["1G", "5G"]}
        cap[key] = c
    if rng.random() < 0.2:
        cap["example.com/slots"] = {"value": str(rng.choice([1, 2, 8]))}
    if cap:
        d["capacity"] = cap
    if multi:
        d["allowMultipleAllocations"] = True
    if counter_sets and rng.random() < 0.7:
        cs = rng.choice(counter_sets)
        d["consumesCounters"] = [{"counterSet": cs, "counters": {"mem": {"value": _q(rng, ["1", "2", "3"])}}}]
        if "CompatibilityGroups" in features and rng.random() < 0.5:
            groups = rng.sample(["g1", "g2", "g3"], rng.randint(1, 2))
            d["consumesCounters"][0]["compatibilityGroups"] = sorted(groups)
    if rng.random() < 0.15:
        d["taints"] = [{"key": rng.choice(["k1", "k2"]), "value": rng.choice(["v", "w"]),
                        "effect": rng.choice(["NoSchedule", "NoExecute", "NoExecute", "None"])}]
    if rng.random() < 0.08:
        d["bindingConditions"] = ["ready"]
        d["bindingFailureConditions"] = ["failed"]
        if rng.random() < 0.5:
            d["bindsToNode"] = True
    return d


def _scope(rng: random.Random) -> dict[str, Any]:
    r = rng.random()
    if r < 0.65:
        return {"nodeName": "node-1"}
    if r < 0.75:
        return {"nodeName": "node-2"}
    if r < 0.85:
        return {"allNodes": True}
    if r < 0.93:
        zone = rng.choice(["a", "b"])
        return {"nodeSelector": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]}}
    return {"perDeviceNodeSelection": True}


def _per_device_scope(rng: random.Random, d: dict[str, Any]) -> None:
    r = rng.random()
    if r < 0.5:
        d["nodeName"] = rng.choice(["node-1", "node-1", "node-2"])
    elif r < 0.75:
        d["allNodes"] = True
    else:
        d["nodeSelector"] = {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": [rng.choice(["node-1", "node-2"])]}]}]}


def _pools(rng: random.Random, features: set[str]) -> list[dict[str, Any]]:
    slices: list[dict[str, Any]] = []
    for p in range(rng.randint(1, 4)):
        driver = D1 if rng.random() < 0.7 else D2
        pool = f"pool-{p}"
        scope = _scope(rng)
        gen = rng.randint(1, 3)
        n_slices = rng.randint(1, 3) if rng.random() < 0.4 else 1
        counter_sets = []
        specs: list[dict[str, Any]] = []
        if rng.random() < 0.25:
            counter_sets = ["cs-0"] + (["cs-1"] if rng.random() < 0.3 else [])
            specs.append({"sharedCounters": [{"name": cs,
                                              "counters": {"mem": {"value": _q(rng, ["2", "4", "5"])}}}
                                             for cs in counter_sets]})
        for s in range(n_slices):
            devices = []
            for k in range(rng.randint(0, 5)):  # small: the search is exponential on both sides
                d = _device(rng, f"dev-{s}-{k}", driver, counter_sets, features)
                if "perDeviceNodeSelection" in scope:
                    _per_device_scope(rng, d)
                devices.append(d)
            if rng.random() < 0.04 and devices:
                devices.append(dict(devices[0]))  # duplicate device name: an invalid pool
            specs.append({"devices": devices})
        count = len(specs) + (1 if rng.random() < 0.05 else 0)
        skip = "OptionalNodeOperations" in features and rng.random() < 0.3
        for i, spec in enumerate(specs):
            g = gen - 1 if (i > 0 and rng.random() < 0.05) else gen  # an older generation still around
            spec.update(driver=driver, pool={"name": pool, "generation": g, "resourceSliceCount": count})
            if skip:
                spec["skipNodeOperations"] = ["*"]
            if "devices" in spec:
                spec.update(scope)
            else:  # a counters-only slice: no node scoping of devices needed, but one is required
                spec.update(scope if "perDeviceNodeSelection" not in scope else {"allNodes": True})
            slices.append({"metadata": {"name": f"{pool}-slice-{i}"}, "spec": spec})
    rng.shuffle(slices)
    return slices


def _classes(rng: random.Random) -> list[dict[str, Any]]:
    def cls(name: str, *exprs: str) -> dict[str, Any]:
        selectors = [{"cel": {"expression": e}} for e in exprs]
        return {"metadata": {"name": name}, "spec": {"selectors": selectors}}
    out = [cls("gpu", f'device.driver == "{D1}"'), cls("nic", f'device.driver == "{D2}"'), cls("any", "true")]
    if rng.random() < 0.3:
        out.append(cls("fast-gpu", f'device.driver == "{D1}"', _selector(rng)))
    if rng.random() < 0.2:
        out[0]["spec"]["config"] = [{"opaque": {"driver": D1, "parameters": {"mode": "x"}}}]
    return out


def _exact(rng: random.Random, classes: list[str], features: set[str], admin_ok: bool) -> dict[str, Any]:
    e: dict[str, Any] = {"deviceClassName": rng.choice(classes)}
    if rng.random() < 0.1:
        e["allocationMode"] = "All"
    else:
        e["allocationMode"] = "ExactCount"
        e["count"] = rng.choice([1, 1, 1, 1, 2, 3])
    if rng.random() < 0.4:
        e["selectors"] = [{"cel": {"expression": _selector(rng)}} for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.2:
        tol: dict[str, Any] = {"key": rng.choice(["k1", "k2"])}
        if rng.random() < 0.5:
            tol.update(operator="Exists")
        else:
            tol.update(operator="Equal", value=rng.choice(["v", "w"]))
        if rng.random() < 0.5:
            tol["effect"] = rng.choice(["NoSchedule", "NoExecute"])
        e["tolerations"] = [tol]
    if admin_ok and rng.random() < 0.08:
        e["adminAccess"] = True
    if rng.random() < 0.15:
        key = "memory" if e["deviceClassName"] != "nic" else "bandwidth"
        amount = _q(rng, ["1Gi", "2Gi", "3Gi"] if key == "memory" else ["1G", "3G"])
        e["capacity"] = {"requests": {key: amount}}
    return e


def _claim(rng: random.Random, name: str, classes: list[str], features: set[str]) -> dict[str, Any]:
    requests = []
    for r in range(rng.choice([1, 1, 2, 3])):
        if rng.random() < 0.25:
            subs = [{"name": f"s{i}", **_exact(rng, classes, features, False)}
                    for i in range(rng.randint(1, 3))]
            requests.append({"name": f"r{r}", "firstAvailable": subs})
        else:
            requests.append({"name": f"r{r}", "exactly": _exact(rng, classes, features, True)})
    devices: dict[str, Any] = {"requests": requests}
    if rng.random() < 0.3:
        constraints = []
        for _ in range(rng.randint(1, 2)):
            c: dict[str, Any] = {}
            if rng.random() < 0.5 and len(requests) > 1:
                c["requests"] = rng.sample([r["name"] for r in requests], 2)
            kind = "matchAttribute" if rng.random() < 0.6 else "distinctAttribute"
            lists = "ListTypeAttributes" in features and rng.random() < 0.5
            c[kind] = rng.choice(LIST_ATTRS if lists else CONSTRAINT_ATTRS)
            constraints.append(c)
        devices["constraints"] = constraints
    if rng.random() < 0.15:
        opaque = {"driver": D1, "parameters": {"a": 1}}
        devices["config"] = [{"requests": [requests[0]["name"]], "opaque": opaque}]
    uid = str(uuid.UUID(int=rng.getrandbits(128)))
    return {"metadata": {"name": name, "namespace": "default", "uid": uid}, "spec": {"devices": devices}}


def _allocated(rng: random.Random, slices: list[dict[str, Any]], features: set[str]) -> list[dict[str, Any]]:
    devices = [(s["spec"]["driver"], s["spec"]["pool"]["name"], d)
               for s in slices for d in s["spec"].get("devices") or []]
    out = []
    for i, (driver, pool, d) in enumerate(devices):
        if rng.random() >= 0.15:
            continue
        result: dict[str, Any] = {"request": "r0", "driver": driver, "pool": pool, "device": d["name"]}
        if d.get("allowMultipleAllocations") and "ConsumableCapacity" in features:
            result["shareID"] = str(uuid.uuid5(SHARE_NAMESPACE, f"{rng.random()}"))
            cap = d.get("capacity") or {}
            if cap and rng.random() < 0.7:
                key = next(iter(cap))
                result["consumedCapacity"] = {key: cap[key]["value"] if rng.random() < 0.3 else
                                              ("1Gi" if key == "memory" else "1")}
        elif rng.random() < 0.1:
            result["adminAccess"] = True
        out.append({"metadata": {"name": f"allocated-{i}", "namespace": "default"},
                    "spec": {"devices": {"requests": [{"name": "r0", "exactly": {
                        "deviceClassName": "any", "allocationMode": "ExactCount", "count": 1}}]}},
                    "status": {"allocation": {"devices": {"results": [result]}}}})
    return out


def scenario(seed: int) -> dict[str, Any]:
    """The scenario of ``seed``: {id, features, node, slices, classes, claims, allocated}."""
    rng = random.Random(seed)
    draw = rng.random()
    if draw < 0.1:
        features = set(BETA + ALPHA)
    elif draw < 0.8:
        features = set(BETA)
    else:
        features = {f for f in BETA if rng.random() < 0.8}
    node: dict[str, Any] = dict(NODE)
    if "OptionalNodeOperations" in features and rng.random() < 0.5:
        node["status"] = {"declaredFeatures": ["DRAOptionalNodeOperations"]}
    slices = _pools(rng, features)
    classes = _classes(rng)
    names = [c["metadata"]["name"] for c in classes]
    claims = [_claim(rng, f"claim-{i}", names, features) for i in range(rng.choice([1, 1, 2, 3]))]
    return {
        "id": str(seed),
        "features": {f: True for f in sorted(features)},
        "node": node,
        "slices": slices,
        "classes": classes,
        "claims": claims,
        "allocated": _allocated(rng, slices, features),
    }
