"""Canonical serialization and every versioned, domain-separated hash of kbsync.

A value is serialized as a sequence of fields, each a one-byte type tag, an
8-byte big-endian length and the payload, so no two different field sequences
share an encoding. Each hash starts with its domain name as the first field,
so a chunk identity can never equal a parameter hash or a text hash of the same
bytes. Changing anything here changes identities: that is a new
``IDENTITY_SCHEMA_VERSION`` and a migration, never an edited golden value.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping

__all__ = [
    "EMBEDDING_TEXT_KEY_SIZE",
    "IDENTITY_SCHEMA_VERSION",
    "ChunkIdentity",
    "Field",
    "canonical_bytes",
    "derivation_hash",
    "digest",
    "embedder_params_hash",
    "embedding_text_key",
    "embedding_text_key_of",
    "embedding_text_key_sql",
    "erased_key_hash",
    "normalized_pieces_hash",
    "normalized_text_hash",
    "object_signature",
    "page_digest",
    "params_hash",
    "payload_signature",
    "source_bytes_hash",
    "tokenizer_hash",
    "vector_id",
    "weights_hash",
]

IDENTITY_SCHEMA_VERSION = 1

Field = bytes | str | int | bool | float | None
_DIGEST_SIZE = 32


def _encode(field: Field) -> bytes:
    tag, payload = _tagged(field)
    return tag + len(payload).to_bytes(8, "big") + payload


def _tagged(field: Field) -> tuple[bytes, bytes]:
    if field is None:
        tag, payload = b"n", b""
    elif isinstance(field, bool):
        tag, payload = b"b", b"\x01" if field else b"\x00"
    elif isinstance(field, int):
        tag, payload = b"i", str(field).encode("ascii")
    elif isinstance(field, float):
        tag, payload = b"f", field.hex().encode("ascii")
    elif isinstance(field, str):
        tag, payload = b"s", field.encode("utf-8", "surrogatepass")
    elif isinstance(field, bytes):
        tag, payload = b"y", field
    else:
        raise TypeError(f"cannot serialize {type(field).__name__} canonically")
    return tag, payload


def canonical_bytes(*fields: Field) -> bytes:
    """The canonical, length-delimited encoding of a sequence of fields."""
    return b"".join(_encode(f) for f in fields)


def digest(domain: str, *fields: Field) -> str:
    """BLAKE2b-256 of ``(domain, *fields)`` canonically encoded, as hex.

    The encoding is fed to the hash field by field, never joined: a document's
    bytes are hashed where they lie, not copied twice first.
    """
    h = _fields_hash(domain, *fields)
    return h.hexdigest()


def _fields_hash(*fields: Field) -> hashlib.blake2b:
    h = hashlib.blake2b(digest_size=_DIGEST_SIZE)
    for f in fields:
        tag, payload = _tagged(f)
        h.update(tag)
        h.update(len(payload).to_bytes(8, "big"))
        h.update(payload)
    return h


def params_hash(params: Mapping[str, Field]) -> str:
    """Hash of chunker parameters: keys sorted, each key and value a field."""
    fields: list[Field] = [IDENTITY_SCHEMA_VERSION]
    for key in sorted(params):
        fields += [key, params[key]]
    return digest("kbsync:chunker-params", *fields)


def source_bytes_hash(data: bytes) -> str:
    """Hash of a source's raw bytes (gate 2 of the pipeline)."""
    return digest("kbsync:source-bytes", IDENTITY_SCHEMA_VERSION, data)


def normalized_text_hash(text: str, normalizer_version: int, *context: Field) -> str:
    """Hash of normalized text (gate 3); ``context`` adds e.g. the extractor identity."""
    return digest(
        "kbsync:normalized-text", IDENTITY_SCHEMA_VERSION, normalizer_version, *context, text
    )


def normalized_pieces_hash(pieces: Iterable[str], normalizer_version: int,
                           *context: Field) -> str:
    """:func:`normalized_text_hash` of ``"".join(pieces)``, without building the joined text."""
    encoded = [p.encode("utf-8", "surrogatepass") for p in pieces]
    h = _fields_hash("kbsync:normalized-text", IDENTITY_SCHEMA_VERSION, normalizer_version,
                     *context)
    h.update(b"s")
    h.update(sum(map(len, encoded)).to_bytes(8, "big"))
    for part in encoded:
        h.update(part)
    return h.hexdigest()


EMBEDDING_TEXT_KEY_SIZE = 16
# The encoded fields before the text of :func:`embedding_text_key`.
_TEXT_KEY_PREFIX = canonical_bytes("kbsync:embedding-text", IDENTITY_SCHEMA_VERSION)
_TEXT_KEY = hashlib.sha256(_TEXT_KEY_PREFIX)


def embedding_text_key(text: str) -> bytes:
    """The embedding cache's key of a chunk text: the first 16 bytes of SHA-256 of
    ``("kbsync:embedding-text", IDENTITY_SCHEMA_VERSION, text)`` canonically encoded.

    A vector depends on the text and the model only, so a chunk whose identity changed
    (a chunker setting did) but whose text did not finds its vector by this key.
    SHA-256, not BLAKE2b: PostgreSQL computes it in SQL (:func:`embedding_text_key_sql`),
    so a migration keys the texts a store holds without reading them out.
    """
    payload = text.encode("utf-8")
    h = _TEXT_KEY.copy()
    h.update(b"s" + len(payload).to_bytes(8, "big"))
    h.update(payload)
    return h.digest()[:EMBEDDING_TEXT_KEY_SIZE]


def embedding_text_key_of(parts: Iterable[bytes], size: int | None = None) -> bytes:
    """:func:`embedding_text_key` of the text whose UTF-8 encoding is ``parts`` joined, of
    ``size`` bytes in all (given, the parts are hashed as they come: a big text need not
    be encoded whole).

    The stores also keep it beside each kept document text, as the checksum that
    ``verify`` compares the text with.
    """
    if size is None:
        parts = list(parts)
        size = sum(map(len, parts))
    h = _TEXT_KEY.copy()
    h.update(b"s" + size.to_bytes(8, "big"))
    for part in parts:
        h.update(part)
    return h.digest()[:EMBEDDING_TEXT_KEY_SIZE]


def embedding_text_key_sql(column: str) -> str:
    """A PostgreSQL expression of :func:`embedding_text_key` of the text in ``column``."""
    utf8 = f"convert_to({column}, 'UTF8')"
    return (f"substring(sha256('\\x{_TEXT_KEY_PREFIX.hex()}'::bytea || '\\x73'::bytea "
            f"|| int8send(octet_length({utf8})) || {utf8}) FROM 1 FOR {EMBEDDING_TEXT_KEY_SIZE})")


def vector_id(source: str, key: str, chunk_digest: str, occurrence: int) -> str:
    """The id of a chunk's vector in an external vector store, as a UUID string.

    It commits to the document (source and key), the chunk identity and which
    occurrence of that identity in the document it is, but not to the chunk's
    position: an edit elsewhere in the document leaves the id, and so the stored
    vector, in place. Stores such as Qdrant accept only integers or UUIDs as ids.
    """
    h = digest("kbsync:vector-id", IDENTITY_SCHEMA_VERSION, source, key, chunk_digest, occurrence)
    return str(uuid.UUID(hex=h[:32]))


def derivation_hash(normalizer_version: int, chunker_fingerprint: str,
                    extractor_identity: str) -> str:
    """What a stored version was made with: the normalizer, the chunker and the extractor.

    A document whose derivation differs from the current settings' is read again,
    whatever its stat: a change here re-derives every document.
    """
    return digest("kbsync:derivation", normalizer_version, chunker_fingerprint,
                  extractor_identity)


def erased_key_hash(key: str) -> str:
    """What the store keeps of an exact key ``kbsync erase`` removed (no byte of the key).

    A change here would un-erase every exact-key erasure.
    """
    return digest("kbsync:erased-key", key)


def embedder_params_hash(provider: str, *settings: Field) -> str:
    """A short hash of an embedder's settings that change its vectors (part of its identity,
    and so of every embedding cache key)."""
    return digest("kbsync:embedder-params", IDENTITY_SCHEMA_VERSION, provider, *settings)[:16]


def object_signature(*parts: str) -> int:
    """A 63-bit digest of an object store's version signals (ETag, version id, time), kept
    in the stat gate's inode column (it fits a signed 64-bit integer)."""
    h = hashlib.blake2b(digest_size=8, person=b"kbsync-object")
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big") + data)
    return int.from_bytes(h.digest(), "big") >> 1


def payload_signature(payload_digest: str) -> int:
    """A 63-bit digest of a WARC record's payload digest (``sha1:...``), kept in the stat
    gate's inode column: the same payload under a new capture passes the gate unread."""
    h = hashlib.blake2b(payload_digest.encode("utf-8", "surrogatepass"), digest_size=8,
                        person=b"kbsync-warc")
    return int.from_bytes(h.digest(), "big") >> 1


def weights_hash(blocks: Iterable[bytes]) -> str:
    """A short hash of a model's weight files read in order (part of a local embedder's
    identity: other weights under the same name are another model)."""
    h = hashlib.blake2b(digest_size=8)
    for block in blocks:
        h.update(block)
    return h.hexdigest()


def tokenizer_hash(definition: bytes) -> str:
    """The identity of a tokenizer by its definition file (part of chunker parameters that
    count in a model's tokens, and so of chunk identities)."""
    return "tokenizer-" + hashlib.blake2b(definition, digest_size=8).hexdigest()


def page_digest(body: bytes) -> str:
    """The digest of a web page's body that its revisit schedule compares."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


class ChunkIdentity:
    """Computes chunk identities for one chunker configuration.

    ``H(identity_schema_version, normalizer_version, chunker_id, params_hash, text)``;
    the fixed prefix is hashed once and copied for every chunk.
    """

    __slots__ = ("_prefix", "prefix")

    def __init__(self, normalizer_version: int, chunker_id: str, parameters_hash: str) -> None:
        prefix = canonical_bytes(
            "kbsync:chunk", IDENTITY_SCHEMA_VERSION, normalizer_version, chunker_id, parameters_hash
        )
        self.prefix = prefix
        """The encoded fixed fields (the compiled kernel hashes chunks from them too)."""
        self._prefix = hashlib.blake2b(prefix, digest_size=_DIGEST_SIZE)

    def __call__(self, text: str) -> str:
        payload = text.encode("utf-8")
        h = self._prefix.copy()
        h.update(b"s" + len(payload).to_bytes(8, "big"))
        h.update(payload)
        return h.hexdigest()
