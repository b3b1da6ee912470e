"""The ray backend: answers, authentication, clusters, a Ray timelypy starts itself."""
