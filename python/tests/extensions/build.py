"""Builds the test extensions against the installed cai package only: its headers come from
cai.get_include() (and cai/capi.pxd from the package), the interpreter's from sysconfig, and
no libcai is named on any command line. Usage: python build.py OUT_DIR [NAME ...]."""

import os
import pathlib
import subprocess
import sys
import sysconfig

import cai

HERE = pathlib.Path(__file__).resolve().parent
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
PYTHON_INCLUDE = sysconfig.get_paths()["include"]


def compile_module(sources, out, cpp, extra_includes=(), extra_flags=()):
    compiler = os.environ.get("CXX", "c++") if cpp else os.environ.get("CC", "cc")
    standard = "-std=c++17" if cpp else "-std=c11"
    includes = [f"-I{d}" for d in (cai.get_include(), PYTHON_INCLUDE, HERE, *extra_includes)]
    command = [compiler, standard, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-pthread",
               "-fvisibility=hidden", *extra_flags, *includes, *map(str, sources), "-o", str(out)]
    subprocess.run(command, check=True)
    return out


# nanobind_add_module's FREE_THREADED: the module declares it keeps the GIL off.
FREE_THREADED_NANOBIND = ["-DNB_FREE_THREADED"] if sysconfig.get_config_var("Py_GIL_DISABLED") else []

# A module built with NO_IMPORT is the same module whose init never calls cai_python_import().
NO_IMPORT = ["-DCAI_TEST_NO_IMPORT"]


def build_c(out_dir, suffix="", flags=()):
    return compile_module([HERE / "c_ext.c"], out_dir / f"cai_c_ext{suffix}{SUFFIX}", cpp=False, extra_flags=flags)


# The pybind11, nanobind and Cython builders build the test module, or `source` as the module
# `name` (the README's examples).
def build_pybind11(out_dir, suffix="", flags=(), source=HERE / "pybind11_ext.cpp", name="cai_pybind11_ext"):
    import pybind11

    return compile_module([source], out_dir / f"{name}{suffix}{SUFFIX}", cpp=True,
                          extra_includes=[pybind11.get_include()], extra_flags=flags)


def build_nanobind(out_dir, suffix="", flags=(), source=HERE / "nanobind_ext.cpp", name="cai_nanobind_ext"):
    import nanobind

    # nanobind's support library is compiled into the module (what nanobind_add_module does).
    root = pathlib.Path(nanobind.source_dir()).parent
    return compile_module([source, root / "src" / "nb_combined.cpp"],
                          out_dir / f"{name}{suffix}{SUFFIX}", cpp=True,
                          extra_includes=[nanobind.include_dir(), root / "ext" / "robin_map" / "include"],
                          # as nanobind's own build compiles it (FREE_THREADED on a free-threaded
                          # CPython, so that importing the module keeps the GIL off)
                          extra_flags=["-fno-strict-aliasing", *FREE_THREADED_NANOBIND, *flags])


def build_cython(out_dir, suffix="", flags=(), source=None, name="cai_cython_ext"):
    source = source or HERE / ("cython_no_import_ext.pyx" if flags else "cython_ext.pyx")
    name = f"{name}{suffix}"
    generated = out_dir / f"{name}.c"
    subprocess.run([sys.executable, "-m", "cython", "-3", "--module-name", name, str(source),
                    "-o", str(generated)], check=True)
    return compile_module([generated], out_dir / f"{name}{SUFFIX}", cpp=False)


def build_pyo3(out_dir, suffix="", flags=(), crate=HERE / "pyo3_ext"):
    """A PyO3 module (by default the test module: PyO3 0.28 in pyo3_ext, 0.30 in pyo3_030, each
    with its own lockfile), built by maturin as a Rust author builds one, the build kept in
    target/pyo3 between runs; its module taken out of the wheel."""
    import zipfile

    wheels = out_dir / f"{pathlib.Path(crate).name}_wheels"
    env = {**os.environ, "CARGO_TARGET_DIR": str(HERE.parents[2] / "target" / "pyo3")}
    subprocess.run([sys.executable, "-m", "maturin", "build", "--release", "--quiet", "--manifest-path",
                    str(pathlib.Path(crate) / "Cargo.toml"), "--interpreter", sys.executable, "--out", str(wheels)],
                   check=True, env=env)
    (wheel,) = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (member,) = [name for name in archive.namelist() if name.endswith(".so")]
        out = out_dir / pathlib.PurePosixPath(member).name
        out.write_bytes(archive.read(member))
    return out


BUILDERS = {"c": build_c, "pybind11": build_pybind11, "nanobind": build_nanobind, "cython": build_cython,
            "pyo3": build_pyo3}
# The modules of the same names with "_no_import" appended, their inits without the import
# (cai-python reads the table on first use in every module: no such variant of the PyO3 one).
NO_IMPORT_BUILDERS = {name: (lambda out_dir, build=build: build(out_dir, "_no_import", NO_IMPORT))
                      for name, build in BUILDERS.items() if name != "pyo3"}

if __name__ == "__main__":
    out_dir = pathlib.Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:] or BUILDERS:
        print(BUILDERS[name](out_dir))
