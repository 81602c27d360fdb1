#!/usr/bin/env bash
# Each light extra in a clean virtual environment: build kbsync's wheel once, then for each
# extra make a fresh venv, `pip install 'kbsync[EXTRA]'` from that wheel and use the extra
# on one document (scripts/extras_smoke.py). An extra whose dependencies fail to import on
# a fresh install (as trafilatura did without lxml_html_clean) fails here, loudly.
# The heavy extras (local: torch) are left to the main test environment.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=(${KBSYNC_CHECK_EXTRAS:-html pdf office web tiktoken watch fsspec})
# Any Python 3.11+ with pip runs the installs (the project's .venv when there is one).
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
pip=("$PYTHON" -m pip --disable-pip-version-check --quiet)

"${pip[@]}" wheel --no-deps --wheel-dir "$work/wheel" .
wheel=$(ls "$work"/wheel/kbsync-*.whl)
cp scripts/extras_smoke.py "$work/"
# kbsync and its required dependencies once, in a venv without pip (one pip drives them
# all, through --python); each extra gets a copy of it, so it holds that extra alone.
"$PYTHON" -m venv --without-pip "$work/base"
"${pip[@]}" --python "$work/base/bin/python" install "$wheel"

failed=()
for extra in "${EXTRAS[@]}"; do
    venv="$work/venv-$extra"
    began=$SECONDS
    cp -a "$work/base" "$venv"
    if ! "${pip[@]}" --python "$venv/bin/python" install "kbsync[$extra] @ file://$wheel" \
            >"$work/pip-$extra.log" 2>&1; then
        cat "$work/pip-$extra.log" >&2
        failed+=("$extra (install)")
        continue
    fi
    # From an empty folder, so the installed package is used, never the source tree.
    if (cd "$work" && "$venv/bin/python" extras_smoke.py "$extra"); then
        echo "extra $extra: ok ($((SECONDS - began)) s)"
    else
        failed+=("$extra")
    fi
    rm -rf "$venv"
done

echo "extras checked in $((SECONDS - start)) s"
if ((${#failed[@]})); then
    echo "FAILED extras on a clean install: ${failed[*]}" >&2
    exit 1
fi
