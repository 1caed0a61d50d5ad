"""gRPC and protobuf code generated from protos/ (kubelet plugin registration, DRA plugin v1/v1beta1, DRA health, draflow inventory and events)."""
