"""The device side of the hostile-input generator (:mod:`hostile`): limits, edge values, ResourceSlices,
DeviceClasses and their CEL, opaque config."""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

INT64_MAX = 2**63 - 1
INTS = [0, 1, -1, INT64_MAX, -INT64_MAX - 1, INT64_MAX - 1, 2**31, -(2**31) - 1, 2**53 + 1]
QUANTITIES = ["0", "1", "1m", "1n", "9223372036854775807", "8E", "7Ei", "1Ei", "999Pi", "1e18",
              "123456789012", "0.000000001", "80Gi", "1k", "100000000000000000000", "9.5", "1.5Gi"]
VERSIONS = ["0.0.0", "1.2.3", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0-x.7.z.92",
            "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85", "999999999.999999999.999999999",
            "1.0.0-" + "a" * 58, "0.0.1-a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y"]
STRINGS = ["", "x", "日本語のGPU", "ñ" * 32, "\u200b\u200d", "emoji-\U0001f680", "a" * 64, "é" * 20,
           "with space", "new\nline", "quote\"'`", "back\\slash", "%s%n{}", "null", "\t"]
EFFECTS = ["NoSchedule", "NoExecute", "None"]
NAME_EDGES = ["0", "a", "a-b", "z" * 63, "0" * 63, "a1-" * 20 + "a2", "gpu-0", "x-y-z"]


@dataclass
class Batch:
    """One seed's objects, each list in creation order; ``delete_after`` claims go once their pod exists."""

    seed: int
    driver: str
    slices: list[Obj] = field(default_factory=list)
    classes: list[Obj] = field(default_factory=list)
    templates: list[Obj] = field(default_factory=list)
    claims: list[Obj] = field(default_factory=list)
    pods: list[tuple[str, dict[str, Obj]]] = field(default_factory=list)  # name, claim name -> source
    delete_after: list[str] = field(default_factory=list)
    groups: list[Obj] = field(default_factory=list)  # PodGroups (scheduling.k8s.io/v1beta1)
    members: dict[str, str] = field(default_factory=dict)  # pod -> its PodGroup
    elsewhere: list[Obj] = field(default_factory=list)  # claims made in namespace ``default``
    #: changes once the pods exist: (kind, name, merge patch; None: delete), kind as in ``KINDS``
    mutations: list[tuple[str, str, Obj | None]] = field(default_factory=list)

    def count(self) -> int:
        return (len(self.slices) + len(self.classes) + len(self.templates) + len(self.claims)
                + len(self.pods) + len(self.groups) + len(self.elsewhere))


def _ident(rng: random.Random, size: int) -> str:
    return rng.choice(string.ascii_letters) + "".join(
        rng.choice(string.ascii_letters + string.digits + "_") for _ in range(size - 1))


def _label(rng: random.Random, size: int) -> str:
    if size <= 2:
        return rng.choice(string.ascii_lowercase) * size
    middle = "".join(rng.choice(string.ascii_lowercase + string.digits + "-") for _ in range(size - 2))
    return rng.choice(string.ascii_lowercase) + middle + rng.choice(string.digits)


def _value(rng: random.Random) -> Obj:
    kind = rng.choice(["int", "bool", "string", "version"])
    if kind == "int":
        return {"int": rng.choice(INTS)}
    if kind == "bool":
        return {"bool": rng.random() < 0.5}
    if kind == "version":
        return {"version": rng.choice(VERSIONS)}
    return {"string": rng.choice(STRINGS)}


class DeviceGen:
    """The device side of one seed's generator: slices, classes, CEL, opaque config."""

    def __init__(self, seed: int, tag: str, *, real_driver: str, real_class: str, nodes: list[str]) -> None:
        self.rng = random.Random(seed)
        self.tag = tag
        self.real_driver = real_driver
        self.real_class = real_class
        self.nodes = nodes
        self.batch = Batch(seed, f"f{seed}.fuzz.example")
        self.attr_names: list[str] = []  # every attribute name used, for constraints and CEL
        self.domain = f"{_label(self.rng, 20)}.attr.example"
        self.easy = ""  # the class every fuzz device matches (``classes``)

    # -- slices --------------------------------------------------------------------------------------

    def attr_name(self) -> str:
        rng = self.rng
        choice = rng.random()
        if choice < 0.3:
            name = _ident(rng, rng.choice([1, 2, 31, 32]))
        elif choice < 0.6:
            name = f"{self.batch.driver}/{_ident(rng, rng.choice([1, 32]))}"
        elif choice < 0.8:
            name = f"{self.domain}/{_ident(rng, rng.choice([5, 32]))}"
        else:
            name = rng.choice(self.attr_names) if self.attr_names else "common"
        if name not in self.attr_names:
            self.attr_names.append(name)
        return name

    def device(self, name: str, counter_sets: list[tuple[str, list[str]]], *, plain: bool) -> Obj:
        """``plain``: none of the features that cap a slice at 64 devices (counters, taints, sharing)."""
        rng = self.rng
        room = rng.choice([0, 1, 4, 16, 32])
        attrs: Obj = {}
        caps: Obj = {}
        for _ in range(room):
            key = self.attr_name()
            if key in attrs or key in caps:
                continue
            if rng.random() < 0.75:
                attrs[key] = _value(rng)
            else:
                cap: Obj = {"value": rng.choice(QUANTITIES)}
                if not plain and rng.random() < 0.2:
                    cap["requestPolicy"] = {"default": cap["value"], "validRange": {"min": cap["value"]}}
                caps[key] = cap
        dev: Obj = {"name": name}
        if attrs:
            dev["attributes"] = attrs
        if caps:
            dev["capacity"] = caps
        if any("requestPolicy" in c for c in caps.values()) or (not plain and rng.random() < 0.1):
            dev["allowMultipleAllocations"] = True
        if plain:
            return dev
        if counter_sets and rng.random() < 0.5:
            consumes = []
            for set_name, counters in rng.sample(counter_sets, min(len(counter_sets), rng.choice([1, 2]))):
                used = rng.sample(counters, min(len(counters), rng.choice([1, 32])))
                consumes.append({"counterSet": set_name,
                                 "counters": {c: {"value": rng.choice(QUANTITIES)} for c in used}})
            dev["consumesCounters"] = consumes
        if rng.random() < 0.3:
            dev["taints"] = [{"key": f"{self.domain}/t{i}", "value": _label(rng, rng.choice([1, 63])),
                              "effect": rng.choice(EFFECTS)} for i in range(rng.choice([1, 3, 16]))]
        return dev

    def node_fields(self) -> Obj:
        rng = self.rng
        pick = rng.random()
        if pick < 0.35:
            return {"allNodes": True}
        if pick < 0.6:
            return {"nodeName": rng.choice(self.nodes)}
        ops = [{"key": "kubernetes.io/hostname", "operator": "In", "values": [*self.nodes, *NAME_EDGES]},
               {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [self.nodes[0]]},
               {"key": f"{self.domain}/x", "operator": "DoesNotExist"},
               {"key": "kubernetes.io/hostname", "operator": "Exists"},
               {"key": "fuzz-number", "operator": rng.choice(["Gt", "Lt"]), "values": [str(INT64_MAX)]}]
        terms: list[Obj] = [{"matchExpressions": rng.sample(ops, rng.randint(1, 3))}]
        if rng.random() < 0.4:  # one term only (a slice's rule): fields and expressions together
            terms[0].update({"matchFields": [{"key": "metadata.name", "operator": "In",
                                                 "values": [rng.choice(self.nodes)]}]})
        return {"nodeSelector": {"nodeSelectorTerms": terms}}

    def slices(self) -> None:
        rng = self.rng
        pools = rng.randint(1, 3)
        self.clean_pool()
        for p in range(1, pools + 1):
            pool = f"{self.tag}-p{p}-" + _label(rng, rng.choice([2, 40]))
            count = rng.choice([1, 2, 3])
            stated = count if rng.random() < 0.7 else rng.choice([count + 1, 1000, INT64_MAX // 2])
            counter_sets: list[tuple[str, list[str]]] = []
            node = self.node_fields()
            for s in range(count):
                spec: Obj = {"driver": self.batch.driver, **node,
                             "pool": {"name": pool, "generation": rng.choice([0, 1, INT64_MAX]),
                                      "resourceSliceCount": stated}}
                if s == 0 and rng.random() < 0.6:  # a counter-set slice (devices elsewhere)
                    sets = [(f"cs{k}-" + _label(rng, 8), [_label(rng, rng.choice([1, 61])) + f"{c:02d}"
                                                          for c in range(rng.choice([1, 8, 32]))])
                            for k in range(rng.choice([1, 8]))]
                    counter_sets = sets
                    spec["sharedCounters"] = [{"name": n, "counters": {c: {"value": rng.choice(QUANTITIES)}
                                                                        for c in cs}} for n, cs in sets]
                else:
                    wanted = counter_sets + ([("no-such-set", ["gone"])] if rng.random() < 0.3 else [])
                    n = rng.choice([1, 3, 64, 128])
                    names = rng.sample(NAME_EDGES, min(2, len(NAME_EDGES))) + [f"d{s}-{i}" for i in range(n)]
                    spec["devices"] = [self.device(name, wanted, plain=n > 64)
                                       for name in dict.fromkeys(names[:n])]
                self.batch.slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                          "metadata": {"name": f"{self.tag}-p{p}-s{s}"}, "spec": spec})

    def clean_pool(self) -> None:
        """A complete one-slice pool without taints or counters: its devices can be allocated (and then
        fail to prepare: no node runs the fuzz driver)."""
        rng = self.rng
        n = rng.choice([1, 4, 128])
        names = [*rng.sample(NAME_EDGES, 2), *(f"d{i}" for i in range(n))]
        node = {"allNodes": True} if rng.random() < 0.5 else {"nodeName": rng.choice(self.nodes)}
        self.batch.slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                  "metadata": {"name": f"{self.tag}-p0-s0"},
                                  "spec": {"driver": self.batch.driver, **node,
                                           "pool": {"name": f"{self.tag}-p0", "generation": 1,
                                                    "resourceSliceCount": 1},
                                           "devices": [self.device(name, [], plain=True)
                                                       for name in dict.fromkeys(names[:n])]}})

    # -- classes -------------------------------------------------------------------------------------

    def expressions(self, real: bool) -> list[str]:
        """CEL that compiles; ``real``: over the real driver's devices, else only the fuzz driver's."""
        d, fz = self.real_driver, self.batch.driver
        if real:
            return [
                f'device.driver == "{d}" && device.attributes["{d}"].index / 0 == 1',
                f'device.driver == "{d}" && device.attributes["{d}"].index % 0 == 0',
                f'device.attributes["{d}"].nosuch == 1',
                f'device.attributes["{d}"].model > 1',
                f'device.attributes["{d}"].index + {INT64_MAX} > 0',
                f'device.driver == "{d}" && (device.attributes["{d}"].index * -{INT64_MAX} < 0 || true)',
                f'device.driver == "{d}" && device.attributes["{d}"].uuid.matches("^(a|a)*$")',
                f'device.driver == "{d}" && device.capacity["{d}"].memory.compareTo(quantity("8E")) < 0',
                f'device.driver == "{d}" && '
                f'device.attributes["{d}"].driverVersion.isGreaterThan(semver("0.0.0"))',
                f'device.driver == "{d}" && ("{"x" * 2000}" + device.attributes["{d}"].uuid).size() > 0',
            ]
        attr = self.rng.choice(self.attr_names or ["common"])
        key, _, short = attr.rpartition("/")
        dom = key or fz
        n = self.rng.randint(10, 30)
        lst = "[" + ",".join(str(i) for i in range(n)) + "]"
        at = f'device.attributes["{dom}"].{short}'
        return [f'device.driver == "{fz}" && ' + e for e in (
            f"{at} == {at}",
            f"has({at})",
            f'{at}.lowerAscii().contains("日")',
            f"{at}.size() * {INT64_MAX} > 0",
            f"{lst}.all(a, {lst}.all(b, {lst}.exists(c, a + b + c < 0))) == false",
            "device.allowMultipleAllocations == true",
            "true",
            f'device.capacity["{dom}"].{short}.isGreaterThan(quantity("1Ei"))',
            f'{at}.isLessThan(semver("1.0.0-alpha.1"))',
            f"{at} / 0 == 1",
        )]

    def classes(self) -> tuple[list[str], list[str]]:
        """(classes of fuzz devices only, classes over the real driver's devices)."""
        rng = self.rng
        fuzz, real = [], []
        for i in range(rng.randint(3, 5)):
            over_real = i == 0 or (i > 1 and rng.random() < 0.3)
            name = f"{self.tag}-c{i}.{self.batch.driver}"
            exprs = rng.sample(self.expressions(over_real), rng.randint(1, 3))
            spec: Obj = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
            if rng.random() < 0.3:
                spec["config"] = [self.opaque(rng.choice([self.real_driver, self.batch.driver]))]
            self.batch.classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                       "metadata": {"name": name}, "spec": spec})
            (real if over_real else fuzz).append(name)
        easy = f"{self.tag}-easy.{self.batch.driver}"  # every fuzz device, no CEL error: claims that fit
        self.batch.classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                   "metadata": {"name": easy}, "spec": {"selectors": [
                                       {"cel": {"expression": f'device.driver == "{self.batch.driver}"'}}]}})
        self.easy = easy
        return fuzz, real

    def opaque(self, driver: str, requests: list[str] | None = None) -> Obj:
        params = self.rng.choice([
            {"kind": "GpuConfig", "apiVersion": f"{self.real_driver}/v1", "pad": "p" * 10_000},
            {"kind": "GpuConfig", "apiVersion": f"{self.real_driver}/v1", "sharing": {"strategy": "日本"}},
            {"deep": {"a": {"b": {"c": {"d": {"e": [None, 1.5e308, -0.0, INT64_MAX]}}}}}},
            {"kind": "GpuConfig", "apiVersion": f"{self.real_driver}/v1", "\u0000": "nul-key"},
        ])
        config: Obj = {"opaque": {"driver": driver, "parameters": params}}
        if requests:
            config["requests"] = requests
        return config
