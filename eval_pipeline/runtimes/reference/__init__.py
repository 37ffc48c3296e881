"""The embedded deterministic reference runtime (the default runtime)."""

from eval_pipeline.runtimes.reference.pack import Concept, ConceptPack, default_pack
from eval_pipeline.runtimes.reference.runtime import ReferenceRuntime, ReferenceSession

__all__ = ["Concept", "ConceptPack", "ReferenceRuntime", "ReferenceSession", "default_pack"]
