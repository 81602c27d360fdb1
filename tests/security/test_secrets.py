"""The API key never leaks: not to stdout, stderr, logs, ``--json`` output or the state directory.

A canary key is set in the environment variable the OpenAI-compatible embedder
reads. A local server on 127.0.0.1 plays every failure a provider can have
(401, 429, 500, a timeout, an answer that is not JSON, vectors of the wrong
dimension, a refused connection) and, to be as hostile as possible, echoes the
``Authorization`` header it received into each error body. The command line
runs with ``--debug`` and every logger (httpx and httpcore included) at DEBUG
on stderr. Then the canary, and a long piece of it, must occur nowhere.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from kbsync.engine import init_config
from tests.fixtures.web.servers import reset, serving

ROOT = Path(__file__).resolve().parents[2]
KEY_ENV = "KBSYNC_TEST_EMBEDDINGS_KEY"
CANARY = "sk-canary-7f3e9b1c4d2a48e6b5c0d9e8f7a6b5c4"
PIECES = (CANARY, CANARY[10:30], CANARY[-16:])
DIMENSION = 8

COMMANDS = [
    ["--debug", "sync", "--json"],
    ["sync"],
    ["--debug", "search", "--json", "harbour"],
    ["search", "harbour"],
    ["status", "--json"],
]
SEPARATOR = "=== kbsync command done ==="

# Runs every command in one interpreter (one start-up instead of five), each as the
# command line would, and marks where each one's output ends.
_RUNNER = f"""
import json, logging, sys, traceback
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                    format="%(levelname)s %(name)s %(message)s")
for name in ("httpx", "httpcore", "kbsync"):
    logging.getLogger(name).setLevel(logging.DEBUG)
from kbsync.cli import main
codes = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["kbsync", *argv]
    try:
        main()
        codes.append(0)
    except SystemExit as exc:
        codes.append(exc.code if isinstance(exc.code, int) else 1)
    except Exception:  # with --debug an error propagates: the interpreter would print this
        traceback.print_exc()
        codes.append(1)
    for stream in (sys.stdout, sys.stderr):
        print("{SEPARATOR}", file=stream, flush=True)
print(json.dumps(codes))
"""


def _echo(request: Request) -> str:
    return request.headers.get("Authorization", "<no header>")


def _error(status: int) -> Callable[[Request], Response]:
    def respond(request: Request) -> Response:
        body = {"error": {"message": f"Incorrect API key provided: {_echo(request)}",
                          "type": "invalid_request_error"}}
        headers = {"Retry-After": "0", "X-Echo": _echo(request)}
        return Response(json.dumps(body), status=status, headers=headers,
                        content_type="application/json")
    return respond


def _slow(request: Request) -> Response:
    time.sleep(1.5)
    return _error(500)(request)


def _not_json(request: Request) -> Response:
    return Response(f"<html>proxy error for {_echo(request)}</html>", status=200,
                    content_type="application/json")


def _wrong_dimension(request: Request) -> Response:
    inputs = json.loads(request.get_data())["input"]
    data = [{"index": i, "embedding": [0.5] * (DIMENSION - 3), "object": _echo(request)}
            for i in range(len(inputs))]
    return Response(json.dumps({"data": data, "model": _echo(request)}), status=200,
                    content_type="application/json")


SCENARIOS: dict[str, Callable[[Request], Response] | None] = {
    "unauthorized-401": _error(401),
    "rate-limited-429": _error(429),
    "server-error-500": _error(500),
    "timeout": _slow,
    "not-json": _not_json,
    "wrong-dimension": _wrong_dimension,
    "connection-refused": None,
}


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    with serving(threaded=True) as s:
        yield s


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kb(tmp_path: Path, base_url: str) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Harbour\n\nThe harbour master logs every ship at dawn.\n")
    (docs / "b.txt").write_text("Lighthouse keepers trim the wicks before dusk.\n")
    config = init_config(tmp_path, ["docs"])
    text = config.file.read_text(encoding="utf-8")
    head, _, rest = text.partition("[embedder]")
    tail = rest[rest.find("\n[", 1):] if "\n[" in rest[1:] else "\n"
    embedder = "\n".join([
        "[embedder]", 'kind = "openai"', 'model = "canary-embed"',
        f'base_url = "{base_url}"', f'api_key_env = "{KEY_ENV}"', f"dimension = {DIMENSION}",
        "max_retries = 1", "backoff = 0.0", "retry_after_cap = 0.0", "timeout = 0.5",
        "max_input_tokens = 512",
    ])
    config.file.write_text(head + embedder + "\n" + tail, encoding="utf-8")
    return tmp_path


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str


def _cli(kb: Path) -> list[Run]:
    """Every command of COMMANDS against ``kb``, with the canary key in the environment."""
    env = {**os.environ, KEY_ENV: CANARY, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, json.dumps(COMMANDS)], cwd=kb, env=env,
        capture_output=True, text=True, timeout=300, check=False,
    )
    *outs, last = done.stdout.split(SEPARATOR + "\n")
    errs = done.stderr.split(SEPARATOR + "\n")
    assert done.returncode == 0, (done.returncode, done.stdout[-1500:], done.stderr[-1500:])
    codes = json.loads(last)
    assert len(outs) == len(codes) == len(COMMANDS), done.stderr[-3000:]
    return [Run(c, o, e) for c, o, e in zip(codes, outs, errs, strict=False)]


def _hits(data: bytes) -> list[str]:
    return [p for p in PIECES if p.encode() in data]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_no_error_path_leaks_the_api_key(
    server: HTTPServer, tmp_path: Path, scenario: str
) -> None:
    handler = SCENARIOS[scenario]
    if handler is None:
        base_url = f"http://127.0.0.1:{_closed_port()}/v1"
    else:
        reset(server).expect_request("/v1/embeddings", method="POST").respond_with_handler(
            handler)
        base_url = server.url_for("/v1")
    kb = _kb(tmp_path, base_url)
    runs = _cli(kb)
    if handler is not None:  # the key did reach the server, so the echo was real
        assert any(request.headers.get("Authorization") == f"Bearer {CANARY}"
                   for request, _ in server.log), "the server never saw the key"
    sync = runs[0]
    assert sync.code != 0, sync.stdout[-2000:]  # the failure was noticed
    assert "DEBUG" in sync.stderr  # debug logging was on
    assert "Traceback" not in runs[1].stderr
    assert "Traceback" not in runs[3].stderr
    assert all(run.code in (0, 1, 4) for run in runs), [run.code for run in runs]
    for run in runs:
        assert _hits(run.stdout.encode()) == [], run.stdout[-3000:]
        assert _hits(run.stderr.encode()) == [], run.stderr[-3000:]
    stored = [p for p in kb.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in stored), stored
    for path in stored:
        assert _hits(path.read_bytes()) == [], path
