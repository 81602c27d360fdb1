"""Sync knowledge bases one after another in a fresh process and print what each cost, as JSON.

Run as ``python -m tests.integration.measured_sync WARMUP_KB KB...``. The first
knowledge base warms the process up (every extractor imported, the store
created), so what is measured for the others is the sync alone:

- ``extra_rss_bytes``: the peak resident memory during the sync above the
  resident memory before it (Linux ``VmHWM``, reset through ``clear_refs``
  before each sync; elsewhere the growth of ``ru_maxrss``). Each case runs in
  a child forked from the warm process, so each starts from the same memory;
- ``seconds``: wall time of the sync, for the record; a hang is cut by an
  alarm after ``CASE_SECONDS`` and reported as ``"hung": true``;
- ``opened``: every path the process asked to open during the sync (audit
  events ``open`` and ``sqlite3.connect``; a path opened relative to a
  directory descriptor is recorded as given, one name);
- the report's failures, warnings and action counts, and ``verify``'s findings.

Why a separate process: peak memory and audit hooks are process-wide, and an
audit hook cannot be removed once added.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kbsync.app.knowledge_base import KnowledgeBase

CASE_SECONDS = 120
ROOT = Path(__file__).resolve().parents[2]

_opened: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _opened is None or event not in ("open", "sqlite3.connect"):
        return
    path = args[0] if args else None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, str):
        _opened.append(path)


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            found = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) if found else None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _on_alarm(signum: int, frame: object) -> None:
    raise TimeoutError(f"the sync took longer than {CASE_SECONDS} s")


def _measure(kb: Path) -> dict[str, Any]:
    global _opened
    resettable = _reset_peak()
    before = _status_kib("VmRSS") if resettable else None
    before_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    opened: list[str] = []
    result: dict[str, Any] = {"kb": str(kb), "hung": False}
    with KnowledgeBase.open(kb) as engine:
        signal.alarm(CASE_SECONDS)
        started = time.monotonic()
        _opened = opened
        try:
            report = engine.sync()
        except TimeoutError:
            result["hung"] = True
            return result
        finally:
            _opened = None
            signal.alarm(0)
            result["seconds"] = round(time.monotonic() - started, 3)
        peak = _status_kib("VmHWM") if resettable else None
        if peak is not None and before is not None:
            result["extra_rss_bytes"] = max(0, peak - before) * 1024
        else:
            grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_max
            result["extra_rss_bytes"] = max(0, grown) * 1024
        source = report.sources[0]
        result["failures"] = dict(source.failures)
        result["warnings"] = list(source.warnings)
        result["actions"] = {a: report.total(a) for a in ("new", "failed", "unchanged")}
        result["verify"] = list(engine.verify().problems)
        name = engine.sources[0].name
        result["keys"] = sorted(engine.store.manifest(name))
        result["texts"] = {}
        for key in result["keys"]:
            document = engine.store.document(key, name)
            result["texts"][key] = document.text[:2000] if document is not None else None
    result["opened"] = opened
    return result


def measure_in_child(warmup: Path, kbs: list[Path]) -> list[dict[str, Any]]:
    """Run this module in a fresh interpreter over the knowledge bases; one result each."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.measured_sync", str(warmup), *map(str, kbs)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGALRM, _on_alarm)
    sys.addaudithook(_audit)
    warmup, *kbs = (Path(a) for a in argv[1:])
    _measure(warmup)
    results = [_forked(kb) for kb in kbs]
    print(json.dumps(results))
    return 0


def _forked(kb: Path) -> dict[str, Any]:
    """``_measure(kb)`` in a child forked from the warm process, so every case starts from
    the same memory: memory freed by an earlier case cannot hide a later one's growth."""
    if not hasattr(os, "fork"):
        return _measure(kb)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, send the result, leave without cleanup handlers
        os.close(read_end)
        code = 0
        try:
            payload = json.dumps(_measure(kb)).encode()
        except BaseException as exc:  # reported by the parent as the case's failure
            payload = json.dumps({"kb": str(kb), "hung": False, "crash": repr(exc)}).encode()
            code = 1
        with os.fdopen(write_end, "wb") as out:
            out.write(payload)
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as source:
        data = source.read()
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    if "crash" in result:
        raise RuntimeError(f"measuring {kb} failed: {result['crash']}")
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv))
