"""Chat runtimes under evaluation: the adapter boundary, the registry of specs, the adapters."""

from eval_pipeline.runtimes.base import ChatRuntime, ChatSession, RuntimeSpecError, TurnResponse
from eval_pipeline.runtimes.registry import build_runtime, register_runtime

__all__ = [
    "ChatRuntime",
    "ChatSession",
    "RuntimeSpecError",
    "TurnResponse",
    "build_runtime",
    "register_runtime",
]
