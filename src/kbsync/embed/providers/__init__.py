"""Embedding providers beyond the built-in hashing embedder: local models and HTTP APIs."""

from kbsync.embed.providers.openai import OpenAIEmbedder as OpenAIEmbedder  # httpx loads lazily
