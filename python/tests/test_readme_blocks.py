"""Every code block of README.md marked `<!-- tested: ... -->` is compiled or run as written, so
that a README that drifts from the code fails the suite. C blocks are compiled against
include/cai.h with -Wall -Werror (a "function body" block inside a function, a "file" block as
a file), with stand-ins declared for the names a reader supplies (device_pointer, my_stream,
launch_my_kernel). The Python block runs with stand-ins for what needs a GPU framework: a
CuPy-like object over the fake CUDA driver's memory (a test double), a fake stream, a ctypes
function for `my_c_library.process`, and a `torch.as_tensor` that reads the interface."""

import os
import re
import subprocess

import pytest

from conftest import DEVICE_BUFFER, FAKE, ROOT

README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"<!-- tested: ([^>]*?) -->\n```(\w+)\n(.*?)```", README, re.S)

C_STAND_INS = """#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "cai.h"
static void *device_pointer = (void *)0x10000;
static void *my_stream = (void *)0;
static void launch_my_kernel(uint64_t data, int32_t ndim, const int64_t *shape, const int64_t *strides,
                             const char *typestr, void *stream) {
  (void)data, (void)ndim, (void)shape, (void)strides, (void)typestr, (void)stream;
}
"""


def test_the_readme_marks_its_code_blocks():
    """Every fenced block says how the test command exercises it."""
    assert len(BLOCKS) == len(re.findall(r"^```\w", README, re.M))
    assert [(how.split(":")[0], lang) for how, lang, _ in BLOCKS] == [
        ("run by scripts/test-packaging.sh", "sh"), ("what .ci/run runs", "sh"), ("function body", "c"),
        ("file", "c"), ("run by scripts/test-packaging.sh", "cmake"), ("run by scripts/test-packaging.sh", "sh"),
        ("doctest (cargo test runs the README's Rust blocks)", "rust"),
        ("with stand-ins for cupy_array, my_stream, my_c_library, torch and ptr", "python"),
        ("examples/pybind11_extension/arrays.cpp", "cpp"), ("cython module", "cython"),
        ("examples/pyo3_extension/src/lib.rs", "rs")]


def test_the_rust_block_of_the_readme_is_a_doctest():
    """cargo test runs it: the crate root includes the README as a doctest-only item."""
    lib = (ROOT / "src" / "lib.rs").read_text()
    assert '#[cfg(doctest)]\n#[doc = include_str!("../README.md")]' in lib


def test_ci_runs_the_readmes_test_command_and_packaging_runs_its_other_shell_blocks():
    [(_, _, command)] = [block for block in BLOCKS if block[0] == "what .ci/run runs"]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == command.strip()
    packaging = (ROOT / "scripts" / "test-packaging.sh").read_text()
    assert all(f"readme_block {lang} {n}" in packaging for lang, n in [("sh", 0), ("cmake", 0), ("sh", 2)])


@pytest.mark.parametrize("index", [i for i, (_, lang, _) in enumerate(BLOCKS) if lang == "c"])
def test_a_c_block_of_the_readme_compiles(index, tmp_path):
    how, _, code = BLOCKS[index]
    code = code.replace('#include "cai.h"\n', "")
    if how == "function body":
        source = C_STAND_INS + "void readme_block(void) {\n" + code + "}\n"
    else:
        source = C_STAND_INS + code
    path = tmp_path / "block.c"
    path.write_text(source)
    built = subprocess.run(
        [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-variable",
         "-Wno-unused-function", "-c", str(path), f"-I{ROOT / 'include'}", "-o", str(tmp_path / "block.o")],
        capture_output=True, text=True)
    assert built.returncode == 0, f"README block {index}:\n{source}\n{built.stderr}"


def test_the_python_block_of_the_readme_runs_fake_driver(capsys):
    import cai

    [(_, _, code)] = [block for block in BLOCKS if block[1] == "python"]

    class CupyLike:
        __cuda_array_interface__ = {"shape": (2, 3), "typestr": "<f4", "data": (DEVICE_BUFFER, False),
                                    "version": 3, "stream": FAKE.stream()}

    class MyCLibrary:
        calls = []

        def process(self, array):  # a C function taking a CaiArray*: libcai's own validate
            self.calls.append(cai.lib.cai_validate(array, None))

    class Torch:
        @staticmethod
        def as_tensor(obj, device):
            assert device == "cuda" and obj.__cuda_array_interface__["data"][0] == DEVICE_BUFFER
            return obj

    stand_ins = {"cupy_array": CupyLike(), "my_stream": FAKE.stream(), "my_c_library": MyCLibrary(),
                 "torch": Torch(), "ptr": DEVICE_BUFFER}
    exec(compile(code, "README.md", "exec"), stand_ins)
    assert stand_ins["a"].shape == (2, 3) and MyCLibrary.calls == [0]
    assert "CAI_ERROR_INVALID_STREAM: stream 0 is disallowed" in capsys.readouterr().out


def test_the_readme_shows_the_pybind11_example_as_it_is():
    """The example itself is built and run by test_extensions.py."""
    [(_, _, code)] = [block for block in BLOCKS if block[1] == "cpp"]
    assert code == (ROOT / "examples" / "pybind11_extension" / "arrays.cpp").read_text()


def test_the_readme_shows_the_pyo3_example_as_it_is():
    """The example itself is built and run by test_extensions.py (marked `rs`, which cargo's
    README doctest leaves alone: the `cai` crate does not depend on PyO3)."""
    [(_, _, code)] = [block for block in BLOCKS if block[1] == "rs"]
    assert code == (ROOT / "examples" / "pyo3_extension" / "src" / "lib.rs").read_text()


def test_the_cython_block_of_the_readme_builds_and_runs(tmp_path):
    """Cythonized and compiled against the installed package only, then run on a CAI dict."""
    import sys

    sys.path.insert(0, str(ROOT / "python" / "tests" / "extensions"))
    import build

    [(_, _, code)] = [block for block in BLOCKS if block[1] == "cython"]
    (tmp_path / "readme_block.pyx").write_text(code)
    subprocess.run([sys.executable, "-m", "cython", "-3", str(tmp_path / "readme_block.pyx"), "-o",
                    str(tmp_path / "readme_block.c")], check=True)
    build.compile_module([tmp_path / "readme_block.c"], tmp_path / f"readme_block{build.SUFFIX}", cpp=False)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(PYTHONPATH=str(tmp_path), CAI_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    done = subprocess.run(
        [sys.executable, "-c", "import readme_block; print(readme_block.nbytes("
         "{'shape': (2, 3), 'typestr': '<f8', 'data': (4096, False), 'version': 3}))"],
        env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "48\n", done.stdout + done.stderr
