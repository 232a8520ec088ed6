"""The Ray pool: load workers on Ray actors, across the nodes of a cluster (``docs/ray.md``)."""
