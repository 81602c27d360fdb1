"""Embedding providers beyond the built-in hashing embedder: local models and HTTP APIs."""
