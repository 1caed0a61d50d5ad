"""The kubelet's DRA manager as a service, with a simulated kubelet and fleet mode."""
