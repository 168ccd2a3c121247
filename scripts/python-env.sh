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
echo "python-env: the test tools into $venv (python/test-requirements.txt; the first time about 4.5 GB to download and 7.2 GB installed, most of it torch and the CUDA libraries its wheel pulls)"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$PYTHON" -m pip install --quiet --disable-pip-version-check -r python/test-requirements.txt
echo "python-env: building and installing the package (pip install ./python, maturin; about a minute)"
# The README's install command as written (scripts/readme-block.py), run with this environment's
# pip and quiet, reinstalling flags, and with the test-oracle feature: the suite's build also
# registers `_native._from_object_reference`, which test_hot_path.py compares cai.from_object
# with (python/Cargo.toml); nothing else of the build differs from a user's.
install=$(python3 scripts/readme-block.py sh 4)
case "$install" in
  "pip install "*) ;;
  *) echo "python-env: README.md's install block is not a pip install: $install" >&2; exit 1 ;;
esac
MATURIN_PEP517_ARGS="--features test-oracle" "$PYTHON" -m $install --quiet --disable-pip-version-check \
  --force-reinstall --no-deps
export PYTHON
