"""Every code block of README.md (and of the docs/ pages) is marked `<!-- tested: ... -->` and is
compiled or run as written, so that a README that drifts from the code fails the suite. C blocks
are compiled against include/cai.h with -Wall -Werror (the README's "c11 program" as it is, which
scripts/test-packaging.sh also links and runs; a docs "file" block with stand-ins declared for
the names a reader supplies: device_pointer, my_stream, launch_my_kernel); the C++ block likewise
as C++17. The README's first 40 lines must hold the two commands, the quick tier and the routes'
index, and every relative link between the README and docs/ must resolve. The host-memory Python
block runs as written; the device one with stand-ins for what needs a GPU framework: a CuPy-like
object over the fake CUDA driver's memory (a test double), a fake stream, a ctypes function for
`my_c_library.process`, and a `torch.as_tensor` that reads the interface. The pybind11 compile
line is run on the example's source and the module it makes imported."""

import os
import re
import subprocess

import pytest

from conftest import DEVICE_BUFFER, FAKE, ROOT

README = (ROOT / "README.md").read_text()
TESTED = r"<!-- tested: ([^>]*?) -->\n```(\w+)\n(.*?)```"
BLOCKS = re.findall(TESTED, README, re.S)
DOCS = sorted((ROOT / "docs").glob("*.md"))
DOC_BLOCKS = [block for page in DOCS for block in re.findall(TESTED, page.read_text(), re.S)]


def block(marker):
    """The one README block whose marker begins with `marker`."""
    [code] = [code for how, _, code in BLOCKS if how.startswith(marker)]
    return code

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
        ("run by scripts/test-packaging.sh", "sh"), ("what .ci/run runs", "sh"), ("c11 program", "c"),
        ("run by scripts/test-packaging.sh", "cmake"), ("run by scripts/test-packaging.sh", "sh"),
        ("run by scripts/test-packaging.sh", "sh"), ("c++17 file", "cpp"), ("run by scripts/python-env.sh", "sh"),
        ("host memory, run as written by python/tests/test_readme_blocks.py", "python"),
        ("with stand-ins for cupy_array, my_stream, my_c_library, torch and ptr", "python"),
        ("run by python/tests/test_cffi_declarations.py", "python"),
        ("examples/pybind11_extension/arrays.cpp", "cpp"),
        ("compile line, run by python/tests/test_readme_blocks.py on examples/pybind11_extension/arrays.cpp", "sh"),
        ("cython module", "cython"),
        ("offer example, pybind11", "cpp"), ("offer example, nanobind", "cpp"), ("offer example, Cython", "cython"),
        ("doctest (cargo test runs the README's Rust blocks)", "rust"),
        ("cargo add lines run in a scratch crate and compared with examples/pyo3_extension/Cargo.toml, which "
         "test_extensions.py builds with maturin", "sh"),
        ("examples/pyo3_extension/src/lib.rs", "rs"), ("examples/pyo3_extension/src/matrix.rs", "rs")]


def test_the_docs_pages_mark_their_code_blocks():
    """A docs/ page's block is tested as the README's are (only C ones there so far)."""
    fenced = sum(len(re.findall(r"^```\w", page.read_text(), re.M)) for page in DOCS)
    assert len(DOC_BLOCKS) == fenced
    assert [(how.split(" (")[0], lang) for how, lang, _ in DOC_BLOCKS] == [
        ("proposal declarations", "c"), *[("extension file", "c")] * 3, ("file", "c"), ("function body", "c")]


def test_the_c_level_cai_pages_declarations_are_the_headers():
    """The page's normative declarations are include/cai_python.h's, line for line."""
    [code] = [code for how, _, code in DOC_BLOCKS if how.startswith("proposal declarations")]
    header = (ROOT / "include" / "cai_python.h").read_text().splitlines()
    missing = [line for line in code.splitlines() if line.strip() and line not in header]
    assert missing == []


def first_screen_facts(text):
    """What the README's first 40 lines promise a newcomer: the build command, the test command
    (each as a fenced block), the contributors' quick tier (scripts/test-quick.sh, named inline) and a
    link to each route's section."""
    head = "\n".join(text.splitlines()[:40])
    routes = {"C": r"C\b.*pkg-config.*CMake", "C++": r"C\+\+", "Python": r"Python.*`cai` package",
              "ctypes": r"ctypes", "cffi": r"cffi", "compiled extensions": r"Compiled Python extensions",
              "pybind11": r"pybind11", "nanobind": r"nanobind", "Cython": r"Cython", "Rust crate": r"Rust.*crate",
              "PyO3": r"PyO3"}
    links = re.findall(r"^- \[([^\]]+)\]\(#([^)]+)\)", head, re.M)
    missing = [name for name, pattern in routes.items() if not any(re.search(pattern, label) for label, _ in links)]
    if "```sh\nbash scripts/build.sh\n```" not in head:
        missing.append("the build command")
    if "```sh\nbash scripts/test.sh\n```" not in head:
        missing.append("the test command")
    if "`bash scripts/test-quick.sh`" not in head or not (ROOT / "scripts" / "test-quick.sh").is_file():
        missing.append("the quick tier")
    return missing, [anchor for _, anchor in links]


def github_anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text):
    return {github_anchor(heading) for heading in re.findall(r"^#+ (.*)$", text, re.M)}


def test_the_readmes_first_40_lines_hold_both_commands_and_every_route():
    missing, route_anchors = first_screen_facts(README)
    assert missing == [], f"README.md's first 40 lines lack: {missing}"
    assert set(route_anchors) <= anchors(README), "a route's link names no section of the README"


def test_the_first_screen_check_catches_a_readme_that_lacks_them():
    """The check above refuses the README as it was before this rule (commands at lines 51 and
    74, no index), and one whose index lost a route."""
    old = "# libcai\n\n" + "A paragraph.\n" * 45 + "```sh\nbash scripts/build.sh\n```\n```sh\nbash scripts/test.sh\n```\n"
    assert {"the build command", "the test command", "the quick tier", "PyO3"} <= set(first_screen_facts(old)[0])
    assert first_screen_facts(README.replace("- [PyO3 extensions", "- [Rust extensions"))[0] == ["PyO3"]


def test_every_relative_link_between_the_readme_and_docs_resolves():
    broken = []
    for page in [ROOT / "README.md", *DOCS]:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and anchor not in anchors(linked.read_text()):
                broken.append(f"{page.name}: {target} (no such section)")
    assert broken == []


def test_the_rust_block_of_the_readme_is_a_doctest():
    """cargo test runs it: the crate root includes the README as a doctest-only item."""
    lib = (ROOT / "src" / "lib.rs").read_text()
    assert '#[cfg(doctest)]\n#[doc = include_str!("../README.md")]' in lib


def test_ci_runs_the_readmes_test_command_and_packaging_runs_its_other_shell_blocks():
    [(_, _, command)] = [block for block in BLOCKS if block[0] == "what .ci/run runs"]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == command.strip()
    packaging = (ROOT / "scripts" / "test-packaging.sh").read_text()
    assert all(f"readme_block {lang} {n}" in packaging for lang, n in [("sh", 0), ("cmake", 0), ("sh", 2), ("sh", 3)])
    shell = [code for _, lang, code in BLOCKS if lang == "sh"]
    assert shell[2].startswith("export PKG_CONFIG_PATH=") and "--static" in shell[3]
    assert shell[4] == block("run by scripts/python-env.sh") == "pip install ./python\n"
    assert "scripts/readme-block.py sh 4" in (ROOT / "scripts" / "python-env.sh").read_text()


@pytest.mark.parametrize("index", [i for i, (_, lang, _) in enumerate(BLOCKS + DOC_BLOCKS) if lang == "c"])
def test_a_c_block_of_the_readme_or_docs_compiles(index, tmp_path):
    how, _, code = (BLOCKS + DOC_BLOCKS)[index]
    include = [f"-I{ROOT / 'include'}"]
    if how.startswith("c11 program"):  # as a user pastes it: its own includes and main
        source = code
    elif how.startswith("function body"):
        source = C_STAND_INS + "void readme_block(void) {\n" + code + "}\n"
    elif how.startswith("proposal declarations"):
        import sysconfig

        source = "#include <Python.h>\n" + C_STAND_INS + code.replace('#include "cai.h"\n', "")
        include.append(f"-I{sysconfig.get_paths()['include']}")
    elif how.startswith("extension file"):
        import sysconfig

        source = code.replace('#include "cai.h"\n', "")
        include.append(f"-I{sysconfig.get_paths()['include']}")
    else:
        source = C_STAND_INS + code.replace('#include "cai.h"\n', "")
    path = tmp_path / "block.c"
    path.write_text(source)
    built = subprocess.run(
        [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-variable",
         "-Wno-unused-function", "-c", str(path), *include, "-o", str(tmp_path / "block.o")],
        capture_output=True, text=True)
    assert built.returncode == 0, f"README block {index}:\n{source}\n{built.stderr}"


def test_the_cpp_block_of_the_readme_compiles(tmp_path):
    path = tmp_path / "block.cpp"
    path.write_text(block("c++17 file"))
    built = subprocess.run(
        [os.environ.get("CXX", "c++"), "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-c", str(path),
         f"-I{ROOT / 'include'}", "-o", str(tmp_path / "block.o")],
        capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


def test_the_python_block_of_the_readme_runs_fake_driver(capsys):
    import cai

    code = block("with stand-ins for")

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


def test_the_host_memory_python_block_of_the_readme_runs_as_written(capsys):
    """Taken with allow_host=True and handed to numpy by DLPack, without a warning (host memory
    has no pointer to check)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(compile(block("host memory"), "README.md", "exec"), {})
    assert capsys.readouterr().out == "(2, 3) <f4 24\n"


def test_the_pybind11_compile_line_of_the_readme_builds_the_example(tmp_path):
    """The README's compile line as written, in a folder holding the example's source, with this
    environment's python first on the PATH; its last line imports the module and calls it."""
    import pathlib
    import shutil
    import sys

    shutil.copy(ROOT / "examples" / "pybind11_extension" / "arrays.cpp", tmp_path)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(PATH=f"{pathlib.Path(sys.executable).parent}:{env['PATH']}", CAI_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block("compile line")], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "<f4 (2, 3), 24 bytes\n"


def test_the_readme_shows_the_pybind11_example_as_it_is():
    """The example itself is built and run by test_extensions.py."""
    assert block("examples/pybind11_extension/") == (ROOT / "examples" / "pybind11_extension" / "arrays.cpp").read_text()


def test_the_readme_shows_the_pyo3_example_as_it_is():
    """Both files of it; the example itself is built and run by test_extensions.py (marked `rs`, which cargo's
    README doctest leaves alone: the `cai` crate does not depend on PyO3)."""
    example = ROOT / "examples" / "pyo3_extension" / "src"
    assert block("examples/pyo3_extension/src/lib.rs") == (example / "lib.rs").read_text()
    assert block("examples/pyo3_extension/src/matrix.rs") == (example / "matrix.rs").read_text()


def test_the_pyo3_install_lines_of_the_readme_make_the_examples_dependencies(tmp_path):
    """The README's `cargo add` lines, run in a new crate (offline: cargo's cache has what
    libcai's own build fetched), give the dependencies of examples/pyo3_extension, the crate
    test_extensions.py builds with maturin; the rest installs the package and builds."""
    import tomllib

    lines = block("cargo add lines").replace("<libcai>", str(ROOT)).splitlines()
    assert lines[3:] == [f"pip install {ROOT}/python maturin", "maturin develop"]
    subprocess.run(["cargo", "new", "--lib", "--quiet", str(tmp_path / "ext")], check=True)
    for line in lines[:3]:
        assert line.startswith("cargo add ")
        done = subprocess.run([*line.split(), "--offline", "--quiet"], cwd=tmp_path / "ext", capture_output=True,
                              text=True)
        assert done.returncode == 0, f"{line}: {done.stderr}"
    made = tomllib.loads((tmp_path / "ext" / "Cargo.toml").read_text())["dependencies"]
    example_dir = ROOT / "examples" / "pyo3_extension"
    example = tomllib.loads((example_dir / "Cargo.toml").read_text())["dependencies"]
    assert sorted(made) == sorted(example)
    for name, wanted in example.items():
        got = made[name]
        assert got.get("features", []) == wanted.get("features", []), name
        if "path" in wanted:
            assert (tmp_path / "ext" / got["path"]).resolve() == (example_dir / wanted["path"]).resolve(), name
        else:
            assert got["version"] == wanted["version"], name


def test_the_cython_block_of_the_readme_builds_and_runs(tmp_path):
    """Cythonized and compiled against the installed package only, then run on a CAI dict."""
    import sys

    sys.path.insert(0, str(ROOT / "python" / "tests" / "extensions"))
    import build

    code = block("cython module")
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
