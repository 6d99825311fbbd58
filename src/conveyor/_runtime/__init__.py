"""The runtime: a node's producers, executors, acker and stager."""
