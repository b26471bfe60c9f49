"""The console scripts fa3-opt and fa3-compile of an installed package
(pip install .): they run the binaries the wheel holds in fa3/_bin."""
import os
import sys
from pathlib import Path

TOOLS = ("fa3-opt", "fa3-compile")


def tool_path(name: str) -> Path:
    """The installed binary `name` (fa3-opt or fa3-compile): fa3/_bin/<name>.
    It is absent in a runtime-only install and in a source checkout (there:
    build/bin/<name>)."""
    if name not in TOOLS:
        raise ValueError(f"tool_path: {name!r} is not one of {', '.join(TOOLS)}")
    return Path(__file__).resolve().parent / "_bin" / name


def _run(name: str):
    path = tool_path(name)
    if not os.access(path, os.X_OK):
        sys.exit(f"{name}: this install has no {path} (a runtime-only install, "
                 f"FA3_RUNTIME_ONLY, has no compiler tools)")
    os.execv(path, [name] + sys.argv[1:])


def fa3_opt():
    _run("fa3-opt")


def fa3_compile():
    _run("fa3-compile")
