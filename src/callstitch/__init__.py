"""callstitch: reassemble the tool calls that LLM APIs stream as fragments."""

from ._accumulator import IMPLEMENTATION, Accumulator
from ._api import make_reassemble
from ._batch import reassemble_many
from ._limits import Limits
from ._results import ArgumentsError, Choice, Result, StreamError, ToolCall
from ._tee import atee, tee
from ._toolset import Problem, Toolset, Verdict

__version__ = "0.1.0"

reassemble = make_reassemble(Accumulator)

__all__ = ["Accumulator", "ArgumentsError", "Choice", "IMPLEMENTATION", "Limits", "Problem", "Result",
           "StreamError", "ToolCall", "Toolset", "Verdict", "__version__", "atee", "reassemble", "reassemble_many",
           "tee"]
