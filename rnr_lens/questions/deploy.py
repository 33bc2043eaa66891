"""The default deployment: a fixed, hashed prompt format, decoding rule and extractor.

A question is *realized* when the deployment described by a :class:`DeploymentConfig`
answers it correctly. Every stored result carries the config's :meth:`~DeploymentConfig.hash`;
results made under different hashes are never mixed in one table.

    >>> cfg = DeploymentConfig.default_for("number")
    >>> cfg.assistant_prefix
    'The answer is '
    >>> DeploymentConfig.from_json(cfg.to_json()).hash() == cfg.hash()
    True
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from rnr_lens.core.records import short_hash
from rnr_lens.core.untrusted import load_yaml, read_small
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.model.prompts import ChatPrompt, PromptLike
from rnr_lens.questions.answers import extractors_for, get_extractor, is_correct_as
from rnr_lens.questions.shots import Shots, resolve
from rnr_lens.questions.tasks import load_file, train_split
from rnr_lens.questions.tasks.core import Question, Scoring, Task

CONFIG_VERSION = 4
"""The version a config without worked examples is written at. Version 4 made
``concluding-exact`` the default extractor for numbers (the concluding rule on every output: an
operand of any unevaluated expression states no answer, and numbers are graded exactly; issue
54), version 3 ``concluding-token`` (a digit glued to a word states no answer), version 2
``concluding-number``; a config of an earlier version that names no extractor meant that
version's default and is read so (its hash stays what it was)."""
SHOTS_VERSION = 5
"""Version 5 added ``shots``, worked examples before each question (:mod:`rnr_lens.questions.shots`); a
config with shots is written at it, one without keeps version 4 and the hash it always had."""
READABLE_VERSIONS = (1, 2, 3, 4, 5)
DEFAULT_EXTRACTOR = {1: "number", 2: "concluding-number", 3: "concluding-token", 4: "concluding-exact", 5: "concluding-exact"}
"""The numeric extractor each config version defaults to."""
BASE_SHOTS = 1
"""Worked examples in a base model's default deployment (issue 55): the smallest N whose realized
accuracy is not resolved below the best, measured on Gemma-3-270M over three train splits
(docs/shots.md; ``tests/questions/test_shots.py`` keeps it equal to the committed measurement's decision)."""
MAX_NEW_TOKENS = 8192
"""Longest generation budget a config may ask for (the model's context is checked per audit)."""


@dataclass(frozen=True)
class DeploymentConfig:
    """How the model is deployed: prompt format, decoding and answer extraction.

    Attributes:
        chat: Render prompts with the model's chat template (else raw text).
        system_prompt: System message (None: the template's own default).
        instruction: Text placed before the question in the user message.
        assistant_prefix: Text the assistant's turn starts with (e.g. ``"The answer is "``);
            the extractor reads it together with the generated text.
        max_new_tokens: Generation budget per answer.
        stop: Stop strings.
        extractor: Name of an extractor in :mod:`rnr_lens.questions.answers`.
        temperature: 0 (greedy) for the default deployment.
        shots: Worked examples before each question (:class:`rnr_lens.questions.shots.Shots`; None:
            zero-shot). Each is its question and its answer in this deployment's own format
            (``The answer is 14.``), an earlier turn under a chat template.
        version: The config's version: :data:`SHOTS_VERSION` with shots, else
            :data:`CONFIG_VERSION` (None: chosen so).
        harness: Empty for rnr_lens's own prompt format; else the identity of the harness whose
            prompts and scoring this deployment uses (an lm-eval task's: its version and the
            task's resolved config, hashed): each question's prompt is used verbatim, raw, and
            ``extractor`` names the harness's filter that decides *realized*.
        scoring: That harness's scorer (not part of the config's identity; a config read back
            from a store holds none and cannot grade).
    """

    chat: bool = True
    system_prompt: str | None = None
    instruction: str = ""
    assistant_prefix: str = "The answer is "
    max_new_tokens: int = 16
    stop: tuple[str, ...] = ("\n",)
    extractor: str = DEFAULT_EXTRACTOR[CONFIG_VERSION]
    temperature: float = 0.0
    shots: Shots | None = None
    version: int | None = None
    harness: str = ""
    scoring: Scoring | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        def need(name: str, ok: bool, what: str) -> None:
            if not ok:
                raise RnrLensError(f"deployment config field {name} must be {what}, got {getattr(self, name)!r}")

        stop = self.stop
        if isinstance(stop, str):  # one stop string, not its characters
            stop = (stop,)
        need("stop", isinstance(stop, (list, tuple)) and all(isinstance(x, str) and x for x in stop), "a list of non-empty strings")
        object.__setattr__(self, "stop", tuple(stop))
        need("chat", isinstance(self.chat, bool), "true or false")
        need("system_prompt", self.system_prompt is None or isinstance(self.system_prompt, str), "text or null (the template's own default)")
        for name in ("instruction", "assistant_prefix", "extractor"):
            need(name, isinstance(getattr(self, name), str), "text")
        need(
            "max_new_tokens",
            isinstance(self.max_new_tokens, int) and not isinstance(self.max_new_tokens, bool) and 1 <= self.max_new_tokens <= MAX_NEW_TOKENS,
            f"an integer from 1 to {MAX_NEW_TOKENS}",
        )
        need(
            "temperature",
            isinstance(self.temperature, (int, float))
            and not isinstance(self.temperature, bool)
            and math.isfinite(self.temperature)
            and self.temperature >= 0,
            "a finite number >= 0",
        )
        if isinstance(self.shots, dict):
            object.__setattr__(self, "shots", Shots.from_dict(self.shots))
        need("shots", self.shots is None or isinstance(self.shots, Shots), "a mapping with n, source and seed, or null")
        if self.version is None or (self.version == SHOTS_VERSION and self.shots is None):  # one zero-shot config, one hash
            object.__setattr__(self, "version", SHOTS_VERSION if self.shots else CONFIG_VERSION)
        need("version", self.version in READABLE_VERSIONS, f"one of {READABLE_VERSIONS} (the deployment config versions this rnr_lens reads)")
        if self.shots is not None and (self.version or 0) < SHOTS_VERSION:
            raise RnrLensError(
                f"worked examples (shots) need deployment config version {SHOTS_VERSION}; set version: {SHOTS_VERSION} or leave version out"
            )
        need("harness", isinstance(self.harness, str), "text")
        if not self.harness:
            get_extractor(self.extractor)  # validates the name
            return
        need("chat", not self.chat, "false for a harness's task (its prompts are raw text)")
        need("shots", self.shots is None, "null for a harness's task (it keeps its harness's own few-shot context)")
        if self.scoring is not None and self.extractor not in self.scoring.readers:
            raise RnrLensError(
                f"deployment config extractor {self.extractor!r} is not a filter of its task; choose one of {', '.join(self.scoring.readers)}"
            )

    @classmethod
    def default_for(cls, answer_type: str, *, chat: bool = True) -> DeploymentConfig:
        """The default deployment per answer type (measured on SmolLM2: see README).

        ``chat=False`` gives the same deployment as raw text, the default of a model whose
        tokenizer has no chat template (a base model): library calls that hold the model
        (``audit``, ``check_format``, ``train``, ``report``) choose it that way."""
        if answer_type == "number":
            return cls(chat=chat)
        if answer_type == "choice":
            return cls(instruction="Answer with the letter of the correct choice.\n", extractor="choice-letter", max_new_tokens=8, chat=chat)
        if answer_type == "string":
            return cls(extractor="answer-is-string", max_new_tokens=24, chat=chat)
        raise RnrLensError(f"no default deployment for answer type {answer_type!r}")

    @classmethod
    def for_harness(cls, scoring: Scoring) -> DeploymentConfig:
        """The deployment a harness prescribes for its task: its prompts raw and verbatim, its
        stop strings and token budget, greedy, graded by its first reader."""
        return cls(
            chat=False,
            assistant_prefix="",
            max_new_tokens=scoring.max_new_tokens,
            stop=scoring.stop,
            extractor=scoring.readers[0],
            harness=scoring.identity,
            scoring=scoring,
        )

    # -- use ------------------------------------------------------------------------------
    def prompt(self, question: Question) -> PromptLike:
        """The prompt the model sees for ``question``: its worked examples first (raw text: each
        a question and its answer, a blank line apart; chat: earlier user and assistant turns),
        then the question and the assistant prefix. The one owner of the prompt's shape."""
        if self.harness:
            return question.prompt  # the harness built it whole (few-shot context and all)
        user = f"{self.instruction}{question.prompt}"
        solved = self.worked(question.prompt)
        if self.chat:
            return ChatPrompt(user, system=self.system_prompt, assistant_prefix=self.assistant_prefix, turns=solved)
        head = f"{self.system_prompt}\n\n" if self.system_prompt else ""
        context = "".join(f"{asked}\n{answered}\n\n" for asked, answered in solved)
        return f"{head}{context}{user}\n{self.assistant_prefix}"

    def worked(self, question: str) -> tuple[tuple[str, str], ...]:
        """The worked examples placed before ``question``, each as (asked, answered) in this
        deployment's own format: the instruction, the example's question, then the assistant
        prefix and its answer (``The answer is 14.``). The one owner of an example's wording."""
        examples = self.shots.examples_for(question) if self.shots else ()
        return tuple((f"{self.instruction}{e.question}", f"{self.assistant_prefix}{e.answer}.") for e in examples)

    def for_task(self, task: Task, shots_file: Task | str | os.PathLike[str] | None = None) -> DeploymentConfig:
        """This deployment fitted to ``task``: refused where it cannot score it
        (:func:`check_config_fits`), its worked examples drawn from their source for ``task``
        (:func:`rnr_lens.questions.shots.resolve`; ``shots_file``: the file a ``file:NAME`` source names,
        as a path or a loaded task; a path is read as ``task``'s answer type, so a file whose
        answers are of another type is refused by its line)."""
        check_config_fits(self, task)
        if shots_file is not None:
            check_shots_file(self)
            if not isinstance(shots_file, Task):
                shots_file = load_file(Path(shots_file), answer_type=task.answer_type)
        return self if self.shots is None else replace(self, shots=resolve(self.shots, task, shots_file))

    def extract(self, generated: str) -> str | None:
        """The answer in a generated continuation (read after the assistant prefix).

        A harness's deployment reads an answer against its question: use :meth:`grade`."""
        if self.harness:
            raise RnrLensError(
                f"this deployment is read by its harness's filters ({self.harness}), which need the question; call grade(text, question, answer_type)"
            )
        return get_extractor(self.extractor)(self.assistant_prefix + generated)

    def grade(self, generated: str, question: Question, answer_type: str) -> tuple[str | None, bool]:
        """``(extracted answer, correct)`` for one generated continuation (a harness's task:
        what its filter reads, and whether its metric scores that right)."""
        return self.read_with(self.extractor, generated, question, answer_type)

    def gold_continuation(self, question: Question) -> str:
        """The gold answer as this deployment's model should write it after the prompt, for
        teacher forcing: the gold itself after the assistant prefix, or a harness's reference
        answer (an lm-eval task's target: GSM8K's worked solution)."""
        return self._scoring().continuation(question) if self.harness else question.answer

    def readers(self, answer_type: str) -> tuple[str, ...]:
        """Every reader that could read this deployment's answers, its own first: the
        extractors of ``answer_type``, or a harness's filters."""
        others = self._scoring().readers if self.harness else extractors_for(answer_type)
        return tuple(dict.fromkeys((self.extractor, *others)))

    def read_with(self, reader: str, generated: str, question: Question, answer_type: str) -> tuple[str | None, bool]:
        """``(answer, correct)`` as reader ``reader`` (one of :meth:`readers`) reads a continuation."""
        if self.harness:
            return self._scoring().grade(generated, question, reader)
        extracted = get_extractor(reader)(self.assistant_prefix + generated)
        return extracted, is_correct_as(reader, extracted, question.answer, answer_type)

    def generation(self) -> dict[str, Any]:
        """The fields that decide what the model generates: all but the reader (``extractor``,
        and ``version``, which only names the default reader). Two configs that agree here give
        the same tries' texts, so a try's text can be re-read under either
        (:mod:`rnr_lens.grids.regrade`)."""
        return {k: v for k, v in self.to_dict().items() if k not in ("extractor", "version")}

    def _scoring(self) -> Scoring:
        if self.scoring is None:
            raise RnrLensError(
                f"this deployment is scored by a harness ({self.harness}) and holds no scorer (it was read back from a store); "
                "build it from its task: deployment_for_task(model, task)"
            )
        return self.scoring

    # -- identity and files -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The config's fields (``harness`` only where set, so that configs of rnr_lens's own
        format keep the hash they always had; never the scorer)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "scoring"}
        data["stop"] = list(self.stop)
        if not self.harness:
            del data["harness"]
        if self.shots is None:
            del data["shots"]  # a zero-shot config keeps the hash it always had
        else:
            data["shots"] = self.shots.to_dict()
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def hash(self) -> str:
        """A stable 16-hex-digit content hash."""
        return short_hash(self.to_json())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeploymentConfig:
        known = {f.name for f in fields(cls)} - {"scoring"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RnrLensError(f"unknown deployment config field {unknown[0]!r}; known fields: {', '.join(sorted(known))}")
        version = data.get("version", SHOTS_VERSION if data.get("shots") else CONFIG_VERSION)
        if "extractor" not in data and version in DEFAULT_EXTRACTOR:
            data = {**data, "extractor": DEFAULT_EXTRACTOR[version]}  # that version's default: the file means what it meant
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> DeploymentConfig:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> None:
        path = Path(path)
        text = yaml.safe_dump(self.to_dict(), sort_keys=True) if path.suffix in (".yaml", ".yml") else self.to_json() + "\n"
        path.write_text(text)

    @classmethod
    def load(cls, path: str | Path) -> DeploymentConfig:
        path = Path(path)
        if not path.is_file():
            raise RnrLensError(f"deployment config {path} does not exist")
        data = load_yaml(read_small(path, "deployment config"), path)  # YAML is a superset of JSON
        if not isinstance(data, dict):
            raise RnrLensError(f"{path} must hold a mapping of config fields")
        return cls.from_dict(data)

    def with_(self, **changes: Any) -> DeploymentConfig:
        """A copy with ``changes``; adding shots to a zero-shot config raises its version to
        :data:`SHOTS_VERSION`, removing them lowers it back."""
        if "shots" in changes and "version" not in changes and self.version in (CONFIG_VERSION, SHOTS_VERSION):
            changes["version"] = SHOTS_VERSION if changes["shots"] else CONFIG_VERSION
        return replace(self, **changes)


def deployment_for(model_or_tokenizer: Any, answer_type: str) -> DeploymentConfig:
    """The default deployment of ``answer_type`` for this model: chat prompts where its
    tokenizer has a chat template, raw text where it has none (a base model).

    The one place the default is chosen. Takes a loaded model or only its tokenizer
    (:func:`rnr_lens.model.models.load_tokenizer` reads one without the weights, so the CLI, a Ray
    driver and its workers choose alike); ``None`` means a chat model.
    """
    chat = model_or_tokenizer is None or bool(getattr(model_or_tokenizer, "chat_template", None))
    return DeploymentConfig.default_for(answer_type, chat=chat)


def deployment_for_task(
    model_or_tokenizer: Any, task: Task, config: DeploymentConfig | None = None, shots_file: Task | str | os.PathLike[str] | None = None
) -> DeploymentConfig:
    """The deployment of ``task`` for this model, fitted to the task: ``config`` where given
    (:meth:`DeploymentConfig.for_task`: checked, its shots drawn), else the default: the one
    its harness prescribes (an ``lm-eval:`` task: the task's own prompts, stops and scoring), a
    chat model's :func:`deployment_for` its answer type, and for a model without a chat
    template (a base model) the same as raw text with :data:`BASE_SHOTS` worked examples
    (:func:`default_shots`). Every caller that holds a task chooses here. A ``shots_file`` is
    refused unless ``config`` names a ``file:NAME`` source (no default deployment reads one)."""
    if shots_file is not None:
        check_shots_file(config)
    if config is not None:
        return config.for_task(task, shots_file)
    if task.scoring is not None:
        return DeploymentConfig.for_harness(task.scoring)
    chosen = deployment_for(model_or_tokenizer, task.answer_type)
    if not chosen.chat:
        chosen = chosen.with_(shots=default_shots(task))
    return chosen.for_task(task, shots_file)


def default_shots(task: Task) -> Shots:
    """A base model's default worked examples for ``task``: :data:`BASE_SHOTS` of them, from
    the built-in task's train split, else from the task itself (each question left out of its
    own context), seed 0."""
    return Shots(BASE_SHOTS, "train" if train_split(task) is not None else "self")


def check_shots_file(config: DeploymentConfig | None) -> None:
    """Refuse a shots file for a deployment that does not read one (no config, or shots from
    another source): it would be ignored."""
    if config is None or config.shots is None or not config.shots.source.startswith("file:"):
        raise RnrLensError(
            "a shots file is read only for a deployment whose shots source is file:NAME; "
            f"set shots: {{n: N, source: file:NAME}} in the deployment config ({arg('config')})"
        )


def check_config_fits(config: DeploymentConfig, task: Task) -> None:
    """Refuse a deployment that cannot score ``task``: a harness's task graded otherwise than by
    its harness, or a harness's config on another task."""
    if task.scoring is not None and (config.harness != task.scoring.identity or config.scoring is None):
        raise RnrLensError(
            f"task {task.name} is prompted and scored by its harness ({task.scoring.identity}); drop {arg('config')} (its deployment comes from the task)"
        )
    if task.scoring is None and config.harness:
        raise RnrLensError(f"this deployment is a harness's ({config.harness}); task {task.name} is not that harness's task")
