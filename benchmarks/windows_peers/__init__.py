"""The Nexmark-style windows benchmark's generator, queries and per-system peers."""
