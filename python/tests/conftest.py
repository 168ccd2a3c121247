"""Locates the built libcai for tests that call the C ABI directly through ctypes."""

import ctypes
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def library_path():
    explicit = os.environ.get("CAI_LIBRARY")
    if explicit:
        return pathlib.Path(explicit)
    for profile in ("release", "debug"):
        candidate = ROOT / "target" / profile / "libcai.so"
        if candidate.exists():
            return candidate
    raise FileNotFoundError("libcai.so not built: run `cargo build` or set CAI_LIBRARY")


@pytest.fixture(scope="session")
def libcai():
    return ctypes.CDLL(str(library_path()))
