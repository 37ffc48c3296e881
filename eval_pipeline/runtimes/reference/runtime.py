"""The embedded reference runtime: a small, deterministic chat system that ships with the package.

It answers definition questions from its concept pack (with the gloss when the pack has
one, else the bare pack-grounded disclosure), invites the user to teach words it does not
know, says honestly when it has no causal chain, and keeps corrections taught in a session
as SPECULATIVE claims that later answers mark as not yet reviewed. Every session starts
empty; nothing is shared between sessions; the same prompts give byte-identical answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eval_pipeline.runtimes.base import ChatSession, TurnResponse
from eval_pipeline.runtimes.reference.intents import Intent, read_intent
from eval_pipeline.runtimes.reference.pack import ConceptPack, default_pack

SPECULATIVE = "SPECULATIVE"
SPECULATIVE_MARK = "(speculative, not yet reviewed)"


@dataclass
class TaughtClaim:
    subject: str
    claim: str
    status: str = SPECULATIVE


@dataclass
class SessionState:
    """What one conversation remembers: taught claims and the subjects talked about, in order."""

    claims: dict[str, TaughtClaim] = field(default_factory=dict)
    subjects: list[str] = field(default_factory=list)

    def mention(self, subject: str) -> None:
        self.subjects.append(subject)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


class ReferenceSession:
    def __init__(self, pack: ConceptPack, *, glosses: bool) -> None:
        self._pack = pack
        self._glosses = glosses
        self.state = SessionState()

    def send(self, prompt: str) -> TurnResponse:
        intent = read_intent(prompt)
        if intent.kind == "teach":
            return self._teach(intent)
        if intent.kind == "define":
            return self._define(intent)
        if intent.kind == "cause":
            return self._cause(intent)
        return TurnResponse(
            surface="I could not find a concept to talk about in that message. Could you name the word you mean?",
            grounding_source="none",
            surface_tag="no-grounding",
        )

    def close(self) -> None:
        pass

    def _teach(self, intent: Intent) -> TurnResponse:
        assert intent.subject is not None and intent.claim is not None
        self.state.claims[intent.subject] = TaughtClaim(intent.subject, intent.claim)
        self.state.mention(intent.subject)
        return TurnResponse(
            surface=f"Thank you. I have recorded your correction about {intent.subject}; it will be held for review.",
            grounding_source="teaching",
            surface_tag="teaching-grounded",
        )

    def _define(self, intent: Intent) -> TurnResponse:
        assert intent.subject is not None
        taught = self.state.claims.get(intent.subject)
        if taught is not None:
            self.state.mention(intent.subject)
            return self.taught_answer(taught)
        lemma = self._pack.lookup(intent.subject)
        if lemma is None:
            self.state.mention(intent.subject)
            return TurnResponse(
                surface=(
                    f'I do not know the word "{intent.subject}" yet. If you teach me what it means, '
                    "I can use it in this conversation."
                ),
                grounding_source="oov",
                surface_tag="oov-invitation",
            )
        self.state.mention(lemma)
        return self.pack_answer(lemma)

    def _cause(self, intent: Intent) -> TurnResponse:
        assert intent.subject is not None
        lemma = self._pack.lookup(intent.subject)
        subject = lemma or intent.subject
        self.state.mention(subject)
        return TurnResponse(
            surface=(
                f"I have no causal chain for {subject} in my concept pack, so I cannot say what causes it "
                "without guessing."
            ),
            grounding_source="partial" if lemma else "none",
            surface_tag="no-causal-chain",
        )

    def taught_answer(self, taught: TaughtClaim) -> TurnResponse:
        return TurnResponse(
            surface=f"{SPECULATIVE_MARK} {_capitalised(taught.subject)} is {_sentence(taught.claim)[:-1]}, as taught in this session.",
            grounding_source="teaching",
            surface_tag="teaching-grounded",
            epistemic_status=taught.status,
        )

    def pack_answer(self, lemma: str) -> TurnResponse:
        concept = self._pack.concepts[lemma]
        if self._glosses and concept.gloss:
            surface = f"{_sentence(concept.gloss)} Pack-grounded ({self._pack.pack_id})."
        else:
            inventory = "; ".join(concept.paths)
            surface = f"{lemma} — pack-grounded ({self._pack.pack_id}): {inventory}. No session evidence yet."
        return TurnResponse(surface=surface, grounding_source="pack", surface_tag="pack-grounded")


class ReferenceRuntime:
    """Factory of independent reference sessions."""

    def __init__(self, *, glosses: bool = True, pack: ConceptPack | None = None) -> None:
        self.glosses = glosses
        self.pack = pack or default_pack()

    @property
    def spec(self) -> str:
        return "reference" if self.glosses else "reference:no-gloss"

    def open_session(self, session_id: str) -> ChatSession:
        return ReferenceSession(self.pack, glosses=self.glosses)

    def close(self) -> None:
        pass
