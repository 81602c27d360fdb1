"""The OpenAI-compatible embedder against a real HTTP server on 127.0.0.1.

The server speaks the ``/v1/embeddings`` JSON and answers vectors derived from a
hash of each text, so every expected vector is known. Waits between attempts go
to a list instead of the clock.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

pytest.importorskip("httpx")
pytest_httpserver = pytest.importorskip("pytest_httpserver")

from pytest_httpserver import HTTPServer  # noqa: E402
from werkzeug import Request, Response  # noqa: E402

from kbsync.embed import Embedder  # noqa: E402
from kbsync.embed.providers.openai import OpenAIEmbedder, OpenAISettings  # noqa: E402
from kbsync.errors import DependencyMissingError, EmbeddingError, ParameterError  # noqa: E402

KEY = "sk-kbsync-test-SECRET-4f1d9c2e7b"
ENV = "KBSYNC_TEST_OPENAI_KEY"
DIM = 8
MODEL = "test-embed"

Reply = Callable[[Request, list[str]], Response]


def raw_vector(text: str, dim: int = DIM) -> list[float]:
    """The server's vector of ``text``: bytes of its SHA-256, centred, not normalized."""
    data = hashlib.sha256(text.encode()).digest()
    return [b / 255.0 - 0.5 for b in (data * (dim // 32 + 1))[:dim]]


def expected(texts: list[str]) -> npt.NDArray[np.float64]:
    rows = np.array([raw_vector(t) for t in texts], dtype=np.float64)
    unit: npt.NDArray[np.float64] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def answer(
    texts: list[str],
    *,
    order: Callable[[list[int]], list[int]] = lambda ix: ix[::-1],
    vector: Callable[[str], Any] = raw_vector,
    index: Callable[[int], Any] = lambda i: i,
) -> Response:
    """A 200 answer; by default in reverse order, as servers are allowed to answer."""
    data = [
        {"object": "embedding", "index": index(i), "embedding": vector(texts[i])}
        for i in order(list(range(len(texts))))
    ]
    body = {"object": "list", "data": data, "model": MODEL, "usage": {"total_tokens": 1}}
    return Response(json.dumps(body), status=200, content_type="application/json")


def ok(request: Request, texts: list[str]) -> Response:
    return answer(texts)


def status(code: int, headers: dict[str, str] | None = None, echo_key: bool = True) -> Reply:
    """An error answer; it echoes the Authorization header, as a careless server might."""

    def reply(request: Request, texts: list[str]) -> Response:
        seen = request.headers.get("Authorization", "") if echo_key else ""
        body = {"error": {"message": f"failure {code} for credentials {seen!r}", "type": "x"}}
        return Response(json.dumps(body), status=code, headers=headers or {},
                        content_type="application/json")

    return reply


class Api:
    """The embeddings endpoint: records every request; replies follow a script, then ``ok``."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.inputs: list[list[str]] = []
        self.bodies: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.script: list[Reply] = []
        self.waits: list[float] = []
        self.release = threading.Event()
        self._lock = threading.Lock()
        server.expect_request("/v1/embeddings", method="POST").respond_with_handler(self.handle)

    def handle(self, request: Request) -> Response:
        body = request.get_json()
        with self._lock:
            self.bodies.append(body)
            self.inputs.append(body["input"])
            self.auth.append(request.headers.get("Authorization"))
            reply = self.script.pop(0) if self.script else ok
        return reply(request, body["input"])

    @property
    def base_url(self) -> str:
        return self.server.url_for("/v1")

    def embedder(self, **options: Any) -> OpenAIEmbedder:
        settings: dict[str, Any] = {"base_url": self.base_url, "api_key_env": ENV,
                                    "timeout": 5.0}
        settings.update(options)
        return _embedder(MODEL, sleep=self.waits.append, seed=1, **settings)

    @property
    def sizes(self) -> list[int]:
        return [len(batch) for batch in self.inputs]


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    try:
        yield server
    finally:
        server.clear()
        server.stop()


@pytest.fixture
def api(server: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    server.clear()
    monkeypatch.setenv(ENV, KEY)
    endpoint = Api(server)
    try:
        yield endpoint
    finally:
        endpoint.release.set()  # lets any handler still holding a request go


def _embedder(model: str, *, sleep: Callable[[float], None] = time.sleep,
              seed: int | None = None, **settings: Any) -> OpenAIEmbedder:
    """An embedder of ``model`` with these settings (checked as the table is)."""
    return OpenAIEmbedder(OpenAISettings(model, **settings), sleep=sleep, seed=seed)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def words(n: int, seed: int = 0) -> str:
    """``n`` distinct lower-case words, one estimated token each."""
    return " ".join(f"w{chr(97 + (seed + i) % 26)}{chr(97 + (seed + i) // 26 % 26)}"
                    for i in range(n))


# -- the happy path -----------------------------------------------------------------------


def test_vectors_come_back_in_input_order_normalized_when_the_server_reverses_them(
    api: Api,
) -> None:
    texts = ["alpha", "beta", "gamma", "delta"]
    with api.embedder(dimension=DIM) as embedder:
        assert isinstance(embedder, Embedder)
        vectors = embedder.embed(texts)
    assert vectors.dtype == np.float32
    assert vectors.shape == (4, DIM)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert api.bodies == [{"model": MODEL, "input": texts}]


def test_results_are_placed_by_their_index_field_in_any_order(api: Api) -> None:
    texts = [f"text {i}" for i in range(9)]
    permutation = [4, 0, 8, 2, 6, 1, 7, 3, 5]
    api.script = [lambda request, batch: answer(batch, order=lambda ix: permutation)]
    vectors = api.embedder().embed(texts)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)


def test_normalize_false_keeps_the_servers_vectors(api: Api) -> None:
    vectors = api.embedder(normalize=False).embed(["alpha", "beta"])
    np.testing.assert_allclose(vectors, [raw_vector("alpha"), raw_vector("beta")], atol=1e-6)


def test_base64_vectors_are_decoded(api: Api) -> None:
    import base64

    def encoded(text: str) -> str:
        return base64.b64encode(np.asarray(raw_vector(text), dtype="<f4").tobytes()).decode()

    api.script = [lambda request, batch: answer(batch, vector=encoded)]
    embedder = api.embedder(extra_body={"encoding_format": "base64"})
    vectors = embedder.embed(["alpha", "beta"])
    np.testing.assert_allclose(vectors, expected(["alpha", "beta"]), atol=1e-6)
    assert api.bodies[0]["encoding_format"] == "base64"


def test_extra_body_fields_are_sent_with_every_request(api: Api) -> None:
    api.embedder(extra_body={"dimensions": DIM, "user": "kb"}, batch_size=1).embed(["a", "b"])
    assert [(b["dimensions"], b["user"]) for b in api.bodies] == [(DIM, "kb"), (DIM, "kb")]


def test_empty_texts_get_zero_rows_without_a_request_and_no_texts_an_empty_matrix(
    api: Api,
) -> None:
    embedder = api.embedder(dimension=DIM)
    vectors = embedder.embed(["", "alpha", ""])
    assert api.inputs == [["alpha"]]
    assert not vectors[0].any()
    assert not vectors[2].any()
    np.testing.assert_allclose(vectors[1], expected(["alpha"])[0], atol=1e-6)
    assert embedder.embed([]).shape == (0, DIM)
    assert len(api.inputs) == 1


# -- batching -----------------------------------------------------------------------------


def test_batches_are_bounded_by_count(api: Api) -> None:
    texts = [f"text {i}" for i in range(7)]
    vectors = api.embedder(batch_size=3).embed(texts)
    assert api.sizes == [3, 3, 1]
    assert [t for batch in api.inputs for t in batch] == texts
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)


def test_batches_are_bounded_by_the_estimated_tokens(api: Api) -> None:
    short = [words(4, seed) for seed in range(3)]
    long = words(30, 50)
    texts = [short[0], short[1], long, short[2]]
    embedder = api.embedder(batch_tokens=10)
    assert embedder.count_tokens(texts) == [4, 4, 30, 4]
    vectors = embedder.embed(texts)
    # Two short texts fill the budget; the long one, over it alone, still goes (alone).
    assert api.inputs == [[short[0], short[1]], [long], [short[2]]]
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)


# -- retries ------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [429, 500, 502, 503, 504])
def test_a_passing_server_fault_is_retried_and_then_succeeds(api: Api, code: int) -> None:
    api.script = [status(code)]
    vectors = api.embedder(backoff=0.5).embed(["alpha", "beta"])
    np.testing.assert_allclose(vectors, expected(["alpha", "beta"]), atol=1e-6)
    assert api.sizes == [2, 2]
    [wait] = api.waits
    assert 0.0 <= wait <= 0.5


def test_a_permanent_500_exhausts_the_retries_with_growing_jittered_waits(api: Api) -> None:
    api.script = [status(500)] * 4
    with pytest.raises(EmbeddingError, match="after 4 attempts") as caught:
        api.embedder(max_retries=3, backoff=0.5).embed(["alpha"])
    assert "HTTP 500" in str(caught.value)
    assert api.sizes == [1, 1, 1, 1]
    assert len(api.waits) == 3
    for retry, wait in enumerate(api.waits):
        assert 0.0 <= wait <= 0.5 * 2**retry
    # The jitter is seeded: the same seed waits the same.
    first = list(api.waits)
    api.waits.clear()
    api.script = [status(500)] * 4
    with pytest.raises(EmbeddingError):
        api.embedder(max_retries=3, backoff=0.5).embed(["alpha"])
    assert api.waits == first


@pytest.mark.parametrize(
    ("code", "retry_after", "wait"),
    [
        (429, "2", 2.0),
        (503, "1.5", 1.5),
        (429, "1000", 5.0),  # capped by retry_after_cap
        (429, email.utils.format_datetime(datetime.now(UTC) + timedelta(days=1), usegmt=True), 5.0),
        (503, "Sat, 01 Jan 2000 00:00:00 GMT", 0.0),  # a date in the past: go now
    ],
)
def test_retry_after_on_429_and_503_is_honoured_up_to_the_cap(
    api: Api, code: int, retry_after: str, wait: float
) -> None:
    api.script = [status(code, {"Retry-After": retry_after})]
    api.embedder(retry_after_cap=5.0).embed(["alpha"])
    assert api.waits == [wait]


@pytest.mark.parametrize(("code", "retry_after"), [(500, "7"), (429, "soon")])
def test_retry_after_elsewhere_or_unreadable_falls_back_to_jitter(
    api: Api, code: int, retry_after: str
) -> None:
    api.script = [status(code, {"Retry-After": retry_after})]
    api.embedder(backoff=0.25).embed(["alpha"])
    [wait] = api.waits
    assert 0.0 <= wait <= 0.25


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(api: Api, code: int) -> None:
    api.script = [status(code)]
    with pytest.raises(EmbeddingError, match=f"HTTP {code}"):
        api.embedder().embed(["alpha"])
    assert api.sizes == [1]
    assert api.waits == []


def test_a_401_names_the_key_variable(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    api.script = [status(401), status(401)]
    with pytest.raises(EmbeddingError, match=f"check the API key in \\${ENV}"):
        api.embedder().embed(["alpha"])
    monkeypatch.delenv(ENV)
    with pytest.raises(EmbeddingError, match=f"\\${ENV} is not set"):
        api.embedder().embed(["alpha"])
    assert api.sizes == [1, 1]


def test_connection_errors_are_retried_then_reported() -> None:
    waits: list[float] = []
    embedder = _embedder(MODEL, base_url=f"http://127.0.0.1:{_closed_port()}/v1",
                         max_retries=2, sleep=waits.append, seed=3)
    with pytest.raises(EmbeddingError, match="after 3 attempts: ConnectError"):
        embedder.embed(["alpha"])
    assert len(waits) == 2


# -- deadlines ----------------------------------------------------------------------------


def test_a_server_slower_than_the_timeout_is_cut_off_and_retried(api: Api) -> None:
    # The server would answer after 30 s (or at teardown): only the client's timeout, not a
    # measured duration, can make this call fail with a timeout.
    def stall(request: Request, texts: list[str]) -> Response:
        api.release.wait(30.0)
        return answer(texts)

    api.script = [stall, stall]
    with pytest.raises(EmbeddingError, match=r"after 2 attempts: timed out.*0\.3 s"):
        api.embedder(timeout=0.3, max_retries=1).embed(["alpha"])
    assert len(api.waits) == 1


def test_a_dripping_answer_is_cut_off_by_the_total_deadline(api: Api) -> None:
    # Every byte comes well within a read timeout; only the total deadline stops it.
    def drip(request: Request, texts: list[str]) -> Response:
        def body() -> Iterator[bytes]:
            for _ in range(600):  # 30 s of drip, or until teardown
                if api.release.wait(0.05):
                    return
                yield b" "

        return Response(body(), status=200, content_type="application/json")

    api.script = [drip]
    with pytest.raises(EmbeddingError, match="timed out"):
        api.embedder(timeout=0.4, max_retries=0).embed(["alpha"])


# -- validation ---------------------------------------------------------------------------


def _count_off(request: Request, texts: list[str]) -> Response:
    return answer(texts, order=lambda ix: ix[:-1])


def test_a_wrong_number_of_vectors_is_an_error_not_retried(api: Api) -> None:
    api.script = [_count_off]
    with pytest.raises(EmbeddingError, match=r"expected 3 vectors \(one per input\), got 2"):
        api.embedder().embed(["a", "b", "c"])
    assert api.sizes == [3]
    assert api.waits == []


def test_a_vector_of_the_wrong_dimension_is_an_error_naming_both(api: Api) -> None:
    api.script = [lambda request, texts: answer(texts, vector=lambda t: raw_vector(t, 7))]
    with pytest.raises(EmbeddingError, match="expected 8, got 7"):
        api.embedder(dimension=DIM).embed(["alpha"])
    assert api.waits == []


def test_vectors_of_different_dimensions_in_one_answer_are_an_error(api: Api) -> None:
    api.script = [lambda request, texts: answer(texts, vector=lambda t: raw_vector(t, len(t)))]
    with pytest.raises(EmbeddingError, match="differ in dimension: 2 and 5"):
        api.embedder().embed(["ab", "abcde"])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e300])
def test_non_finite_values_are_an_error(api: Api, bad: float) -> None:
    api.script = [
        lambda request, texts: answer(
            texts, vector=lambda t: [*raw_vector(t)[:-1], bad] if t == "beta" else raw_vector(t)
        )
    ]
    with pytest.raises(EmbeddingError, match="input 1 has non-finite values"):
        api.embedder().embed(["alpha", "beta"])
    assert api.waits == []


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (lambda i: 0, "not 0..2 once each"),
        (lambda i: i + 1, "not 0..2 once each"),
        (lambda i: str(i), "integer 'index'"),
    ],
)
def test_duplicate_missing_or_malformed_indices_are_an_error(
    api: Api, index: Callable[[int], Any], message: str
) -> None:
    api.script = [lambda request, texts: answer(texts, index=index)]
    with pytest.raises(EmbeddingError, match=message):
        api.embedder().embed(["a", "b", "c"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>oops</html>", "not JSON"),
        (b'{"object": "list"}', "no 'data' list"),
        (b'{"data": [{"index": 0, "embedding": "not base64!"}]}', "not a list of numbers"),
        (b'{"data": [{"index": 0, "embedding": [[1, 2]]}]}', "not a flat vector"),
    ],
)
def test_malformed_answers_are_an_error(api: Api, body: bytes, message: str) -> None:
    api.script = [lambda request, texts: Response(body, status=200)]
    with pytest.raises(EmbeddingError, match=message):
        api.embedder().embed(["alpha"])


def test_when_one_batch_of_several_fails_embed_raises_for_the_whole_call(api: Api) -> None:
    api.script = [ok, ok, status(400)]
    embedder = api.embedder(batch_size=2)
    with pytest.raises(EmbeddingError, match="HTTP 400"):
        embedder.embed([f"text {i}" for i in range(8)])
    # The fourth batch is never sent; nothing of the first two is returned.
    assert api.sizes == [2, 2, 2]


# -- the key ------------------------------------------------------------------------------


def test_the_api_key_is_sent_as_a_bearer_token_read_at_each_request(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = api.embedder()
    embedder.embed(["alpha"])
    monkeypatch.setenv(ENV, "sk-rotated")
    embedder.embed(["beta"])
    monkeypatch.delenv(ENV)
    embedder.embed(["gamma"])
    api.embedder(api_key_env=None).embed(["delta"])
    assert api.auth == [f"Bearer {KEY}", "Bearer sk-rotated", None, None]


def _scenarios(api: Api) -> dict[str, Callable[[], object]]:
    """Every way to fail, each with the key set and echoed back by the server where it can."""

    def failing(*script: Reply, **options: Any) -> Callable[[], object]:
        def run() -> object:
            api.script = list(script)
            return api.embedder(**options).embed(["alpha", "beta"])

        return run

    def stall(request: Request, texts: list[str]) -> Response:
        api.release.wait(1.0)
        return answer(texts)

    refused = f"http://user:{KEY}@127.0.0.1:{_closed_port()}/v1"
    return {
        "400": failing(status(400)),
        "401": failing(status(401)),
        "403": failing(status(403)),
        "404": failing(status(404)),
        "redirect": failing(status(307, {"Location": f"http://elsewhere/?key={KEY}"})),
        "429 exhausted": failing(*[status(429, {"Retry-After": "1"})] * 2, max_retries=1),
        "500 exhausted": failing(*[status(500)] * 2, max_retries=1),
        "timeout": failing(stall, timeout=0.2, max_retries=0),
        "refused": lambda: api.embedder(base_url=refused, max_retries=1).embed(["alpha"]),
        "count": failing(_count_off),
        "dimension": failing(
            lambda request, texts: answer(texts, vector=lambda t: raw_vector(t, 3)), dimension=DIM
        ),
        "nan": failing(lambda request, texts: answer(texts, vector=lambda t: [float("nan")] * 8)),
        "not json": failing(lambda request, texts: Response(KEY, status=200)),
        "invalid settings": lambda: api.embedder(base_url=f"ftp://u:{KEY}@h/v1"),
    }


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def test_the_key_never_appears_in_errors_reprs_identity_or_logs(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    failures: dict[str, BaseException] = {}
    for name, scenario in _scenarios(api).items():
        with pytest.raises((EmbeddingError, ParameterError)) as caught:
            scenario()
        failures[name] = caught.value
    assert set(failures) == set(_scenarios(api))
    for name, error in failures.items():
        for exc in _chain(error):
            assert KEY not in str(exc), name
            assert KEY not in repr(exc), name
        assert KEY not in "".join(traceback.format_exception(error)), name
    embedder = api.embedder(dimension=DIM)
    assert KEY not in repr(embedder)
    assert KEY not in embedder.identity
    # Our own log lines never hold the key; no library logs the request's headers. (httpcore
    # does log response headers at DEBUG, where the redirect above echoes the key itself.)
    assert any(r.name.startswith("kbsync") for r in caplog.records)
    assert all(KEY not in r.getMessage() for r in caplog.records if r.name.startswith("kbsync"))
    assert f"Bearer {KEY}" not in caplog.text
    assert "[redacted]" in str(failures["400"])  # the server's echo, scrubbed


# -- identity and dimension ---------------------------------------------------------------


def test_identity_is_stable_free_of_the_key_and_follows_the_parameters(api: Api) -> None:
    port = api.server.port
    identity = api.embedder(dimension=DIM).identity
    assert identity.startswith(f"openai:{MODEL}@127.0.0.1:{port}:")
    assert identity.endswith(f":{DIM}")
    assert KEY not in identity
    assert api.inputs == []  # a given dimension needs no request
    same = [
        api.embedder(dimension=DIM, api_key_env="OTHER", timeout=9.0, batch_size=2),
        api.embedder(dimension=DIM, base_url=api.server.url_for("/other/v1/")),
    ]
    assert {e.identity for e in same} == {identity}
    different = [
        api.embedder(dimension=DIM, normalize=False),
        api.embedder(dimension=DIM, extra_body={"dimensions": DIM}),
        api.embedder(dimension=16),
        _embedder("other-model", base_url=api.base_url, dimension=DIM),
    ]
    assert len({identity} | {e.identity for e in different}) == 5
    a = api.embedder(dimension=DIM, extra_body={"x": 1, "y": [1, 2]}).identity
    b = api.embedder(dimension=DIM, extra_body={"y": [1, 2], "x": 1}).identity
    assert a == b


def test_identity_is_pinned() -> None:
    embedder = _embedder("text-embedding-3-small", dimension=1536)
    assert embedder.identity == "openai:text-embedding-3-small@api.openai.com:f56d6a000cbd3db6:1536"


def test_the_dimension_is_discovered_with_one_probe_and_cached(api: Api) -> None:
    embedder = api.embedder()
    assert embedder.dimension == DIM
    assert embedder.identity.endswith(f":{DIM}")
    assert len(api.inputs) == 1
    assert len(api.inputs[0]) == 1  # the probe: one short text
    assert embedder.dimension == DIM
    assert len(api.inputs) == 1


def test_the_first_batch_fixes_the_dimension_without_a_probe(api: Api) -> None:
    embedder = api.embedder(batch_size=1)
    embedder.embed(["alpha", "beta"])
    assert api.inputs == [["alpha"], ["beta"]]
    assert embedder.dimension == DIM
    assert len(api.inputs) == 2


def test_max_input_tokens_and_token_counts_are_exposed(api: Api) -> None:
    embedder = api.embedder(max_input_tokens=512)
    assert embedder.max_input_tokens == 512
    assert embedder.count_tokens(["", "one two three", words(10)]) == [0, 3, 10]


# -- settings and the optional dependency -------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"base_url": "ftp://example.com/v1"},
        {"base_url": "not an address"},
        {"dimension": 0},
        {"batch_size": 0},
        {"batch_tokens": 0},
        {"max_input_tokens": 0},
        {"max_retries": -1},
        {"backoff": -1.0},
        {"retry_after_cap": float("inf")},
        {"timeout": 0.0},
        {"extra_body": {"input": ["x"]}},
        {"extra_body": {"x": object()}},
        {"extra_body": {"x": float("nan")}},
    ],
)
def test_invalid_settings_are_rejected(options: dict[str, Any]) -> None:
    with pytest.raises(ParameterError):
        _embedder(MODEL, **options)


def test_an_empty_model_name_is_rejected() -> None:
    with pytest.raises(ParameterError, match="model"):
        _embedder("")


def test_without_httpx_building_one_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(DependencyMissingError, match=r"kbsync\[openai\]") as caught:
        _embedder(MODEL)
    assert caught.value.module == "httpx"


def test_importing_the_providers_does_not_import_httpx() -> None:
    code = (
        "import sys, kbsync.embed.providers.openai, kbsync.embed.providers; "
        "print('httpx' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"
