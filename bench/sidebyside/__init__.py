"""draflow side by side with upstream kube-scheduler + kube-controller-manager on scheduler_perf's DRA
workloads (issue 15 item 1). Entry point: ``bench/side_by_side.py``; method: ``bench/README.md``."""
