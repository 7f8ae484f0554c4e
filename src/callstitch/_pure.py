"""Load a module the compiled build also compiles as the Python it is written in, for the pure twin.

_slots.py is one definition for both twins: the compiled build turns it into an extension module,
which an import then finds first. The pure twin must run the Python itself, so that it is what
runs where nothing was compiled, and so that the tests of the [py] twin test that Python.
"""

from __future__ import annotations

import sys
from importlib import import_module
from importlib.util import find_spec, module_from_spec, spec_from_file_location
from pathlib import Path
from types import ModuleType

__all__ = ["python_source"]


def python_source(name: str) -> ModuleType:
    """Return the package's module name run from its .py source, whether or not it is also compiled."""
    full = f"{__package__}.{name}"
    spec = find_spec(full)
    if spec is not None and spec.origin is not None and spec.origin.endswith(".py"):
        return import_module(full)  # not compiled here: the import already runs the source
    source_name = f"{full}_py"
    module = sys.modules.get(source_name)
    if module is None:
        source = spec_from_file_location(source_name, Path(__file__).with_name(f"{name}.py"))
        if source is None or source.loader is None:
            raise ImportError(f"callstitch: the source of {full} is missing")
        module = module_from_spec(source)
        sys.modules[source_name] = module
        try:
            source.loader.exec_module(module)
        except BaseException:
            del sys.modules[source_name]
            raise
    return module
