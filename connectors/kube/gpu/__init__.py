"""GPU naming: how NVIDIA's device plugin, GPU Feature Discovery, HAMi and CUDA spell GPUs in
Kubernetes objects (resource names, product labels, node registrations, memory limits,
out-of-memory messages), read into gpufrag's units. Pure readers: no API calls."""
