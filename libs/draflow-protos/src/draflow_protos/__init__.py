"""gRPC and protobuf code generated from protos/ by hack/gen_protos.py (checked in; `make verify-protos`).

Module (under draflow_protos) → proto package → upstream source (protos/README.md has the details):

- `pluginregistration.v1.api_pb2` → `pluginregistration` → kubelet pkg/apis/pluginregistration/v1
- `dra.v1.api_pb2` → `k8s.io.kubelet.pkg.apis.dra.v1` → kubelet pkg/apis/dra/v1
- `dra.v1beta1.api_pb2` → `k8s.io.kubelet.pkg.apis.dra.v1beta1` → kubelet pkg/apis/dra/v1beta1
- `drahealth.v1alpha1.api_pb2` → `v1alpha1` → kubelet pkg/apis/dra-health/v1alpha1
- `drahealth.v1.api_pb2` → `v1` → kubelet pkg/apis/dra-health/v1 (kubelet v1.37 negotiates it first)
- `inventory.v1.inventory_pb2` → `draflow.inventory.v1` → draflow's own

Each `*_pb2_grpc.py` next to a `*_pb2.py` holds the stub, servicer and `add_*_to_server` of its services.
"""
