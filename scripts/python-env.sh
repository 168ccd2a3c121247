#!/usr/bin/env bash
# Makes (or refreshes) the test suites' Python environment: a virtual environment in
# target/venv with the test tools, and libcai's Python package installed into it the way a
# user installs it (`pip install ./python`, which builds the extension with maturin).
# Source it: it sets PYTHON to the environment's interpreter.
set -euo pipefail
venv="$PWD/target/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
PYTHON="$venv/bin/python"
echo "python-env: the test tools into $venv (python/test-requirements.txt; the first time about 4.2 GB, 3 GB of it torch and the CUDA libraries its wheel pulls)"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$PYTHON" -m pip install --quiet --disable-pip-version-check -r python/test-requirements.txt
echo "python-env: building and installing the package (pip install ./python, maturin; about a minute)"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps ./python
export PYTHON
