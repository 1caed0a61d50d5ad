"""A seeded generator of hostile input: objects near the API server's limits (the API server keeps what
it admits, the runner drops what it refuses) that are nasty for the services.

``batch(seed, ...)`` is pure: the same seed and names give the same objects. One batch is, in creation
order: ResourceSlices of a driver of its own (``f<seed>.fuzz.example``, no node runs it) at the size limits
(up to 128 devices, 32 attributes and capacities, 63-character names, domain-qualified attribute names,
int64 and quantity extremes, semver edge cases, unicode strings, shared counters and consumptions that
point at counter sets that may not exist, taints of every effect, odd node selectors, pools whose slice
count is wrong); DeviceClasses whose CEL compiles but fails or costs at run time; claim templates and
claims with many requests, ``firstAvailable`` at its limit, ``matchAttribute`` on attributes only some
devices have, opaque config at its size limit, single fields of the valid template set to extremes; pods
that name those, a missing template or claim, or a claim deleted right after the pod is made.

Requests for the real driver's devices stay small (``count`` 1 or 2, never ``All``) so the control pod
always finds a device; ``All`` and large counts only ever select the fuzz driver's devices.
"""

from __future__ import annotations

import copy

from hostile_devices import EFFECTS, INT64_MAX, QUANTITIES, Batch, DeviceGen, Obj, _label

__all__ = ["Batch", "batch"]

STRINGS_BIG = ["x" * 100_000, "日本" * 20_000, "{" * 50_000, "\n".join(["line"] * 10_000)]


class Gen(DeviceGen):
    """The generator of one seed (see the module docstring): the claim and pod side."""

    def easy_spec(self) -> Obj:
        """A claim the clean pool can satisfy: 1-3 devices of the easy class, maybe a constraint on an
        attribute only some devices have and a config for the fuzz driver."""
        rng = self.rng
        requests = [{"name": f"e{i}", "exactly": {"deviceClassName": self.easy}}
                    for i in range(rng.randint(1, 3))]
        devices: Obj = {"requests": requests}
        if rng.random() < 0.5 and self.attr_names:
            attr = rng.choice(self.attr_names)
            attr = attr if "/" in attr else f"{self.batch.driver}/{attr}"
            devices["constraints"] = [{rng.choice(["matchAttribute", "distinctAttribute"]): attr}]
        if rng.random() < 0.5:
            devices["config"] = [self.opaque(self.batch.driver)]
        return {"devices": devices}

    # -- claims and pods -----------------------------------------------------------------------------

    def request(self, name: str, fuzz: list[str], real: list[str]) -> Obj:
        """One request. ``real`` (classes that may select the real driver's devices) only with one
        device, so a claim takes at most one real device and the control pod always finds one."""
        rng = self.rng
        if real and rng.random() < 0.4:
            return {"name": name, "exactly": {"deviceClassName": rng.choice(real), "count": 1}}
        exact: Obj = {"deviceClassName": rng.choice(fuzz)}
        mode = rng.random()
        if mode < 0.25:
            exact["allocationMode"] = "All"
        elif mode < 0.6:
            exact["count"] = rng.choice([1, 2, 32, 128])
        if rng.random() < 0.3:  # a request selector only narrows the class: real-driver CEL is fine here
            exact["selectors"] = [{"cel": {"expression": e}} for e in
                                  rng.sample(self.expressions(rng.random() < 0.5), rng.randint(1, 2))]
        if rng.random() < 0.3:
            tolerations = [{"key": f"{self.domain}/t0", "operator": "Exists",
                            "effect": rng.choice(EFFECTS[:2])}, {"operator": "Exists"}]
            exact["tolerations"] = tolerations[:rng.randint(1, 2)]
        if rng.random() < 0.25:
            subs = [{"name": f"s{i}", "deviceClassName": rng.choice([*fuzz, *real]), "count": 1}
                    for i in range(rng.choice([1, 8]))]
            return {"name": name, "firstAvailable": subs}
        return {"name": name, "exactly": exact}

    def claim_spec(self, fuzz: list[str], real: list[str]) -> Obj:
        rng = self.rng
        n = rng.choice([1, 2, 5, 32])
        requests = [self.request(f"r{i}-" + _label(rng, rng.choice([1, 20])), fuzz, real if i == 0 else [])
                    for i in range(n)]
        devices: Obj = {"requests": requests}
        names = [r["name"] for r in requests]
        if rng.random() < 0.5 and self.attr_names:
            constraints = []
            for _ in range(rng.choice([1, 3])):
                attr = rng.choice(self.attr_names)
                attr = attr if "/" in attr else f"{self.batch.driver}/{attr}"
                kind = "matchAttribute" if rng.random() < 0.7 else "distinctAttribute"
                constraint: Obj = {kind: attr}
                if rng.random() < 0.5:
                    constraint["requests"] = rng.sample(names, min(len(names), 2))
                constraints.append(constraint)
            devices["constraints"] = constraints
        if rng.random() < 0.4:
            devices["config"] = [self.opaque(rng.choice([self.real_driver, self.batch.driver]),
                                             rng.sample(names, 1) if rng.random() < 0.5 else None)]
        return {"devices": devices}

    def extremes(self) -> list[Obj]:
        """The valid one-device template with one field set to an extreme value each."""
        base = {"name": "gpu", "exactly": {"deviceClassName": self.real_class}}
        rd = self.real_driver
        return [
            {"devices": {"requests": [{**base, "name": "r" * 63}]}},
            {"devices": {"requests": [{**base, "exactly": {**base["exactly"], "count": 1,
                                                          "adminAccess": False}}]}},
            {"devices": {"requests": [{**base, "exactly": {**base["exactly"], "tolerations": [
                {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": INT64_MAX}]}}]}},
            {"devices": {"requests": [base], "constraints": [{"matchAttribute": f"{rd}/nosuch"}]}},
            {"devices": {"requests": [base], "constraints": [{"distinctAttribute": f"{rd}/uuid"}]}},
            {"devices": {"requests": [{**base, "exactly": {**base["exactly"], "capacity": {"requests": {
                "memory": self.rng.choice(QUANTITIES)}}}}]}},
            {"devices": {"requests": [base], "config": [self.opaque(self.real_driver, ["gpu"])]}},
        ]

    def workload(self, classes: tuple[list[str], list[str]]) -> None:
        rng, b = self.rng, self.batch
        fuzz, real = classes[0], [*classes[1], self.real_class]
        specs = [self.claim_spec(fuzz, real) for _ in range(rng.randint(2, 4))]
        specs += rng.sample(self.extremes(), 2) + [self.easy_spec() for _ in range(rng.randint(1, 3))]
        templates = []
        for i, spec in enumerate(specs):
            name = f"{self.tag}-t{i}"
            templates.append(name)
            body: Obj = {"spec": spec}
            if rng.random() < 0.4:
                body["metadata"] = self.claim_metadata()
            b.templates.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                                "metadata": {"name": name}, "spec": body})
        claim = f"{self.tag}-claim"
        b.claims.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": claim}, "spec": self.claim_spec(fuzz, real)})
        doomed = f"{self.tag}-doomed"
        b.claims.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": doomed}, "spec": rng.choice(self.extremes())})
        b.delete_after.append(doomed)
        for i, template in enumerate(templates):
            b.pods.append((f"{self.tag}-pod{i}", {"c": {"resourceClaimTemplateName": template}}))
        b.pods.append((f"{self.tag}-shared", {"c": {"resourceClaimName": claim}}))
        b.pods.append((f"{self.tag}-doomed", {"c": {"resourceClaimName": doomed}}))
        b.pods.append((f"{self.tag}-odd", {
            "a": {"resourceClaimTemplateName": rng.choice(templates)},
            "b": {"resourceClaimName": f"{self.tag}-missing"},
            "c": {"resourceClaimTemplateName": f"{self.tag}-no-template"}}))
        # a claim of that name exists, in another namespace
        b.elsewhere.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                            "metadata": {"name": f"{self.tag}-elsewhere"}, "spec": self.easy_spec()})
        b.pods.append((f"{self.tag}-wrong-ns", {"c": {"resourceClaimName": f"{self.tag}-elsewhere"}}))
        if rng.random() < 0.6:
            group = f"{self.tag}-group"
            b.groups.append({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                             "metadata": {"name": group},
                             "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [
                                 {"name": "c", "resourceClaimTemplateName": rng.choice(templates)}]}})
            for i in range(rng.choice([1, 3])):
                member = f"{self.tag}-member{i}"
                # as the group lists it, or a template of its own (not the group's)
                listed = b.groups[-1]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
                template = listed if rng.random() < 0.7 else rng.choice(templates)
                b.pods.append((member, {"c": {"resourceClaimTemplateName": template}}))
                b.members[member] = group
        if rng.random() < 0.5:
            b.pods.append((f"{self.tag}-many", {f"m{i}": {"resourceClaimTemplateName": rng.choice(templates)}
                                                for i in range(rng.choice([3, 8]))}))
        self.mutations(templates)

    def claim_metadata(self) -> Obj:
        """Labels and annotations for the generated claims, at their limits (63-character qualified
        keys and values, annotations near their 256 KiB total)."""
        rng = self.rng
        labels = {f"{self.domain}/{_label(rng, 63)}": _label(rng, 63) for _ in range(rng.choice([1, 20]))}
        annotations = {f"{self.domain}/a{i}": rng.choice(STRINGS_BIG) for i in range(rng.choice([1, 3]))}
        return {"labels": labels, "annotations": annotations}

    def mutations(self, templates: list[str]) -> None:
        """One or two changes under the pods: the clean pool tainted or emptied, a class's selector
        swapped for one that errors, a template or the PodGroup deleted."""
        rng, b = self.rng, self.batch
        clean = b.slices[0]
        choices = ["taint", "empty", "class", "template", *(["group"] if b.groups else [])]
        for what in rng.sample(choices, rng.randint(1, 2)):
            if what == "taint":
                devices = copy.deepcopy(clean["spec"]["devices"])
                effect = rng.choice(EFFECTS)
                for dev in devices:
                    dev["taints"] = [{"key": f"{self.domain}/broken", "value": "yes", "effect": effect}]
                b.mutations.append(("slice", clean["metadata"]["name"], {"spec": {"devices": devices}}))
            elif what == "empty":
                b.mutations.append(("slice", clean["metadata"]["name"], {"spec": {
                    "devices": [], "pool": {"generation": 2}}}))
            elif what == "class":
                b.mutations.append(("class", self.easy, {"spec": {"selectors": [{"cel": {"expression":
                    f'device.driver == "{b.driver}" && device.attributes["{b.driver}"].gone / 0 == 1'}}]}}))
            elif what == "group":
                b.mutations.append(("group", b.groups[0]["metadata"]["name"], None))
            else:
                b.mutations.append(("template", rng.choice(templates), None))


def batch(seed: int, tag: str, *, real_driver: str, real_class: str, nodes: list[str]) -> Batch:
    """The objects of ``seed`` (see the module docstring); ``tag`` prefixes every name (unique per run)."""
    gen = Gen(seed, tag, real_driver=real_driver, real_class=real_class, nodes=nodes)
    gen.slices()
    gen.workload(gen.classes())
    return gen.batch
