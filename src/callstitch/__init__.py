"""callstitch: reassemble the tool calls that LLM APIs stream as fragments."""

from importlib import import_module
from typing import TYPE_CHECKING

from ._accumulator import IMPLEMENTATION, Accumulator
from ._api import reassemble
from ._batch.run import reassemble_many
from ._limits import Limits
from ._results import ArgumentsError, Choice, Result, StreamError, ToolCall

__version__ = "0.1.0"

if TYPE_CHECKING:  # what __getattr__ imports on first use, for type checkers and editors
    from ._tee import atee, tee
    from ._validate.toolset import Problem, Toolset, Verdict

# Imported on first use: the command line and batch workers start faster without them.
_LAZY = {"Toolset": "_validate.toolset", "Problem": "_validate.toolset", "Verdict": "_validate.toolset", "tee": "_tee",
         "atee": "_tee"}


def __getattr__(name: str):
    """Import a name of _LAZY on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the public names and the module's own dunders, not the helpers it imports for itself."""
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")})

__all__ = ["Accumulator", "ArgumentsError", "Choice", "IMPLEMENTATION", "Limits", "Problem", "Result",
           "StreamError", "ToolCall", "Toolset", "Verdict", "__version__", "atee", "reassemble", "reassemble_many",
           "tee"]
