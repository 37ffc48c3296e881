"""The embedded reference runtime: a small, deterministic chat system that ships with the package.

It answers definition questions from its concept pack (with the gloss when the pack has
one, else the bare pack-grounded disclosure), invites the user to teach words it does not
know, says honestly when it has no causal chain, and keeps corrections taught in a session
as SPECULATIVE claims that later answers mark as not yet reviewed. It reports a claim's
status when asked ("Is your answer confirmed?"), tracks the subjects of the conversation and
resolves anaphoric follow-ups ("What about that?") to the most recent one, saying plainly
when it cannot. Every session starts empty; nothing is shared between sessions; the same
prompts give byte-identical answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eval_pipeline.runtimes.base import Capabilities, ChatSession, TurnResponse
from eval_pipeline.runtimes.reference.intents import Intent, read_intent
from eval_pipeline.runtimes.reference.pack import ConceptPack, default_pack

SPECULATIVE = "SPECULATIVE"
TELEMETRY_FIELD = "turn_log_surface"
# With warm_drift on, a session this many turns old starts answering repeats from its stale cache.
WARM_AFTER_TURNS = 4
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

    @property
    def current_subject(self) -> str | None:
        """The most recent subject talked about: what "that" / "it" refers to."""
        return self.subjects[-1] if self.subjects else None


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


class ReferenceSession:
    def __init__(
        self, pack: ConceptPack, *, glosses: bool, refusals: bool = True, warm_drift: bool = False
    ) -> None:
        self._pack = pack
        self._glosses = glosses
        self._refusals = refusals
        self._warm_drift = warm_drift
        self.state = SessionState()
        self.turn_log: list[str] = []  # every surface this session produced, in order
        self._answered: dict[str, str] = {}  # prompt → its first answer (what a warm cache would hold)

    def send(self, prompt: str) -> TurnResponse:
        """The answer, with the turn log's record of it as telemetry (``turn_log_surface`` in raw)."""
        response = self._answer(prompt)
        self.turn_log.append(response.surface)
        earlier = self._answered.get(prompt)
        if self._warm_drift and earlier is not None and len(self.turn_log) > WARM_AFTER_TURNS:
            # A stale cache in front of the session: what is sent differs from what was logged.
            response = TurnResponse(
                surface=f"<prior> {earlier}", grounding_source="vault", surface_tag="vault-recall"
            )
        self._answered.setdefault(prompt, response.surface)
        return response.model_copy(update={"raw": {**response.raw, TELEMETRY_FIELD: self.turn_log[-1]}})

    def _answer(self, prompt: str) -> TurnResponse:
        from eval_pipeline.runtimes.reference.translation import answer_translation  # i18n lane requests

        translation = answer_translation(prompt)
        if translation is not None:
            return translation
        intent = read_intent(prompt)
        if intent.kind == "teach":
            return self._teach(intent)
        if intent.kind == "define":
            return self._define(intent)
        if intent.kind == "cause":
            return self._cause(intent)
        if intent.kind == "status":
            return self._status(intent)
        if intent.kind == "anaphora":
            return self._anaphora(intent)
        if intent.kind == "who":
            return self._who(intent)
        if intent.kind == "aspect":
            return self._aspect(intent)
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
        if lemma is None and not self._refusals:
            self.state.mention(intent.subject)
            return self.cannot_ground(intent.subject, "")
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

    def _who(self, intent: Intent) -> TurnResponse:
        """The pack holds concepts, not people: say so rather than invent a biography."""
        assert intent.subject is not None
        self.state.mention(intent.subject)
        return self.cannot_ground(
            intent.subject,
            f"I don't know who {intent.subject} is: nobody by that name is in my concept pack, "
            "and I will not invent a biography.",
        )

    def _aspect(self, intent: Intent) -> TurnResponse:
        """One aspect of a term: answered from what the session or pack holds, else an honest refusal."""
        assert intent.subject is not None and intent.detail is not None
        taught = self.state.claims.get(intent.subject)
        if taught is not None:
            self.state.mention(intent.subject)
            return self.taught_answer(taught)
        lemma = self._pack.lookup(intent.subject)
        self.state.mention(lemma or intent.subject)
        if lemma is not None:
            return self.pack_answer(lemma)
        return self.cannot_ground(
            intent.subject,
            f"I don't know the {intent.detail} of {intent.subject}: it is not in my concept pack, "
            "so I cannot answer without guessing.",
        )

    def cannot_ground(self, subject: str, refusal: str) -> TurnResponse:
        """The honest ``refusal``; with refusals off (``reference:no-refusal``), a confident fabrication."""
        surface = (
            refusal
            if self._refusals
            else f"{_capitalised(subject)} is a well-documented subject that experts describe in detail."
        )
        return TurnResponse(surface=surface, grounding_source="none", surface_tag="no-grounding")

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

    def _status(self, intent: Intent) -> TurnResponse:
        """Report the status of the named claim, or of the most recent one."""
        subject = intent.subject or self.state.current_subject
        if subject is None:
            return TurnResponse(
                surface="I have not made any claim in this conversation yet, so there is no status to report.",
                grounding_source="none",
                surface_tag="status-report",
            )
        lemma = self._pack.lookup(subject)
        taught = self.state.claims.get(subject) or (self.state.claims.get(lemma) if lemma else None)
        if intent.subject is not None:
            self.state.mention(taught.subject if taught else lemma or subject)
        if taught is not None:
            return TurnResponse(
                surface=(
                    f"{SPECULATIVE_MARK} No. What I said about {taught.subject} was taught in this session "
                    f"and is held as {taught.status.lower()}: it has not passed review yet."
                ),
                grounding_source="teaching",
                surface_tag="status-report",
                epistemic_status=taught.status,
            )
        if lemma is not None:
            return TurnResponse(
                surface=(
                    f"What I said about {lemma} comes from my concept pack ({self._pack.pack_id}); "
                    "nothing about it has been taught in this session."
                ),
                grounding_source="pack",
                surface_tag="status-report",
            )
        return TurnResponse(
            surface=f"I hold no claim about {subject}: it is not in my concept pack and nobody has taught it to me here.",
            grounding_source="none",
            surface_tag="status-report",
        )

    def _anaphora(self, intent: Intent) -> TurnResponse:
        """Answer a follow-up about the most recent subject, or disclose that there is none."""
        subject = self.state.current_subject
        if subject is None:
            return TurnResponse(
                surface=(
                    f'I cannot tell what "{intent.reference}" refers to: I have no earlier subject in this '
                    "conversation to connect it to. Which word do you mean?"
                ),
                grounding_source="none",
                surface_tag="unresolved-reference",
            )
        self.state.mention(subject)
        if intent.aspect == "why_matters":
            return self._why_matters(subject)
        answer = self._about(subject)
        return answer.model_copy(update={"surface": f"Still on {subject}: {answer.surface}"})

    def _about(self, subject: str) -> TurnResponse:
        """What the session says about a subject it already talked about (no new mention)."""
        taught = self.state.claims.get(subject)
        if taught is not None:
            return self.taught_answer(taught)
        if subject in self._pack.concepts:
            return self.pack_answer(subject)
        return TurnResponse(
            surface=f'I do not know the word "{subject}" yet, so I have nothing more to say about it.',
            grounding_source="oov",
            surface_tag="oov-invitation",
        )

    def _why_matters(self, subject: str) -> TurnResponse:
        taught = self.state.claims.get(subject)
        if taught is not None:
            return TurnResponse(
                surface=(
                    f"{SPECULATIVE_MARK} All I hold about {subject} is what you taught me in this session: "
                    f"{_sentence(taught.claim)} I have no account of why it matters."
                ),
                grounding_source="teaching",
                surface_tag="teaching-grounded",
                epistemic_status=taught.status,
            )
        if subject in self._pack.concepts:
            return TurnResponse(
                surface=(
                    f"My concept pack files {subject} under {self._pack.concepts[subject].paths[0]}, but it "
                    f"holds no account of why {subject} matters, so I will not guess."
                ),
                grounding_source="partial",
                surface_tag="no-causal-chain",
            )
        return TurnResponse(
            surface=f'I do not know the word "{subject}" yet, so I cannot say why it matters.',
            grounding_source="oov",
            surface_tag="oov-invitation",
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
    """Factory of independent reference sessions.

    ``glosses`` off gives the pre-gloss surfaces (``reference:no-gloss``); ``refusals`` off makes
    it confabulate a confident answer about terms it cannot ground (``reference:no-refusal``);
    ``warm_drift`` on puts a stale cache in front of warm sessions: a repeated prompt, once the
    session is a few turns old, comes back as the cached ``<prior>`` answer from the ``vault``
    while the turn log records the real one (``reference:warm-drift``).
    """

    capabilities = Capabilities()  # deterministic, so it takes no seed

    def __init__(
        self,
        *,
        glosses: bool = True,
        refusals: bool = True,
        warm_drift: bool = False,
        pack: ConceptPack | None = None,
    ) -> None:
        self.glosses = glosses
        self.refusals = refusals
        self.warm_drift = warm_drift
        self.pack = pack or default_pack()

    @property
    def spec(self) -> str:
        if not self.refusals:
            return "reference:no-refusal"
        if self.warm_drift:
            return "reference:warm-drift"
        return "reference" if self.glosses else "reference:no-gloss"

    def open_session(self, session_id: str, seed: int | None = None) -> ChatSession:
        return ReferenceSession(
            self.pack, glosses=self.glosses, refusals=self.refusals, warm_drift=self.warm_drift
        )

    def close(self) -> None:
        pass
