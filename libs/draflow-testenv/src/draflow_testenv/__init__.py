"""A real local control plane for tests and make up: kube-apiserver + etcd, nats-server with JetStream, Jaeger v2, on loopback."""
