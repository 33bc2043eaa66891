"""lm-evaluation-harness tasks: the harness builds the questions and scores every try.

A task named ``lm-eval:NAME`` (a task lm-eval knows) or ``lm-eval:PATH.yaml`` (a task YAML of
the user's; its folder is lm-eval's include path) is built by lm-eval's own code: its
``TaskManager`` loads the task, ``build_all_requests`` makes every document's prompt (the
few-shot context with its seeded sampler, in document order, as ``lm_eval`` builds it), and
its generation kwargs give the stop strings and the token budget. A try is scored by the
task's own filter pipeline (``strict-match``, ``flexible-extract``, ...) and the first metric
of its ``metric_list`` (``exact_match``): rnr_lens re-implements none of it. Append
``:FILTER`` to choose the filter that decides *realized* (default: the task's first).

Invariant: a question's ``prompt`` is exactly the text lm-eval feeds the model, its id is
lm-eval's ``doc_id``, and :meth:`LmEvalScoring.grade` returns what lm-eval would log for that
text (the filtered response, and whether the metric scores it 1). lm-eval is an optional
extra (``pip install -e ".[lm-eval]"``); nothing here imports it until such a task is asked
for.

    >>> parse_spec("lm-eval:gsm8k:flexible-extract")
    LmEvalSpec(task='gsm8k', include=None, filter='flexible-extract')
    >>> str(parse_spec("lm-eval:tasks/gsm8k_local.yaml"))
    'lm-eval:tasks/gsm8k_local.yaml'
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import io
import json
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rnr_lens.core.untrusted import quoted, read_small
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.questions.answers import canonical_number
from rnr_lens.questions.tasks.core import Question, Task

PREFIX = "lm-eval:"
INSTALL = "pip install 'rnr-lens[lm-eval]' (lm-eval and accelerate)"
_IDENTITY_SKIPS = ("dataset_path", "dataset_name", "dataset_kwargs", "metadata")
"""Config keys the deployment's identity leaves out: where the data lie (the questions'
fingerprint covers the data themselves) and lm-eval's bookkeeping."""


@dataclass(frozen=True)
class LmEvalSpec:
    """Which lm-eval task, found where, read by which filter.

    Attributes:
        task: The task's name (``gsm8k``), or a task YAML's path.
        include: The folder lm-eval searches for task YAMLs besides its own (a YAML's folder).
        filter: The filter that decides *realized* (None: the task's first).
    """

    task: str
    include: Path | None = None
    filter: str | None = None

    def __str__(self) -> str:
        where = str(self.include / Path(self.task).name) if self.include is not None and self.task.endswith((".yaml", ".yml")) else self.task
        return f"{PREFIX}{where}" + (f":{self.filter}" if self.filter else "")


def is_spec(name: str) -> bool:
    """Does ``name`` name an lm-eval task (``lm-eval:...``)?"""
    return name.startswith(PREFIX)


def parse_spec(name: str) -> LmEvalSpec:
    """``lm-eval:NAME[:FILTER]`` or ``lm-eval:PATH.yaml[:FILTER]`` as a spec."""
    rest = name[len(PREFIX) :] if is_spec(name) else name
    head, sep, tail = rest.rpartition(":")
    body, filter_ = (head, tail) if sep and tail and not tail.startswith(("/", "\\")) else (rest, None)
    if not body:
        raise RnrLensError(f"task {name!r} names no lm-eval task; write lm-eval:NAME (e.g. lm-eval:gsm8k) or lm-eval:PATH.yaml")
    if body.endswith((".yaml", ".yml")):
        path = Path(body).expanduser()
        return LmEvalSpec(path.name, path.parent, filter_)
    return LmEvalSpec(body, None, filter_)


def rebase(name: str, folder: Path) -> str:
    """``name`` with a relative task YAML read against ``folder`` where it lies there (a grid
    file's tasks resolve against the grid's folder); other names unchanged."""
    spec = parse_spec(name)
    if spec.include is None or spec.include.is_absolute() or not (folder / spec.include / spec.task).exists():
        return name
    return str(LmEvalSpec(spec.task, folder / spec.include, spec.filter))


def _lm_eval() -> Any:
    try:
        import lm_eval
    except ImportError:
        raise RnrLensError(f"lm-eval tasks need lm-evaluation-harness, which is not installed: {INSTALL}") from None
    return lm_eval


@cache
def _task_manager(include: Path | None, stock: bool = True) -> Any:
    """lm-eval's index of the task files in ``include`` and, where ``stock``, of its own
    (about 14,000 files: 6 s of CPU), built once per process."""
    from lm_eval.tasks import TaskManager

    with _quiet():  # its index warns when a user's task includes a stock one (as the how-to's does)
        return TaskManager(include_path=str(include) if include is not None else None, include_defaults=stock, verbosity="ERROR")


def task_name(spec: LmEvalSpec) -> str:
    """The name lm-eval knows the task by: ``spec.task``, or the ``task:`` line of its YAML
    (what ``lm_eval --tasks`` takes, with ``--include_path spec.include``)."""
    return _yaml_task_name(spec.include / spec.task) if spec.include is not None else spec.task


def _yaml_task_name(path: Path) -> str:
    import yaml

    if not path.is_file():
        raise RnrLensError(f"lm-eval task file {path} does not exist; give the path to a task YAML or a task name lm-eval knows")
    try:
        data = yaml.safe_load(read_small(path, "lm-eval task file").replace("!function", "function"))  # lm-eval's tags need its loader
    except yaml.YAMLError as exc:
        raise RnrLensError(f"{path} is not valid YAML ({quoted(str(exc).splitlines()[0])})") from None
    except RecursionError:  # nested 200,000 deep (issue 73)
        raise RnrLensError(f"{path} nests YAML too deeply to be a task file") from None
    except (ValueError, OverflowError, TypeError) as exc:  # a value YAML recognised but cannot build (the date 2001-13-45)
        raise RnrLensError(f"{path} holds a value that cannot be read ({quoted(str(exc))}); write it as plain text or a number") from None
    if not isinstance(data, dict) or not isinstance(data.get("task"), str):
        raise RnrLensError(f"{path} names no task (a 'task: NAME' line); an lm-eval task YAML needs one")
    return data["task"]


@cache
def _load_harness_task(spec: LmEvalSpec) -> Any:
    """lm-eval's task object for ``spec`` (its ``ConfigurableTask``), loaded once per process.

    A task file of the user's is looked up in its own folder's index first: lm-eval reads its
    ``include:`` lines by path, and a name in the folder overrides a stock one in the whole
    index, so where the folder alone loads it, the whole index loads the same task. Only a
    task that needs the stock index (a group of stock tasks) falls through to it, and any
    refusal is the whole index's."""
    _lm_eval()
    name = task_name(spec)
    if spec.include is not None:
        with contextlib.suppress(RnrLensError):
            return _task_from(_task_manager(spec.include, stock=False), name)
    return _task_from(_task_manager(spec.include), name)


def _task_from(manager: Any, name: str) -> Any:
    if name not in manager.all_tasks:
        close = difflib.get_close_matches(name, manager.all_tasks, n=3)
        hint = f" (similar: {', '.join(close)})" if close else ""
        raise RnrLensError(f"lm-eval knows no task {name!r}{hint}; `lm_eval ls tasks` lists them, or give a task YAML's path")
    try:
        with _quiet():
            loaded = manager.load_task_or_group([name])
    except Exception as exc:  # lm-eval raises whatever its dataset loader raised
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RnrLensError(
            f"lm-eval could not load task {name!r} ({first}); offline, point its dataset at local files: see docs/howto/lm-eval.md"
        ) from None
    tasks = _leaves(loaded)
    if len(tasks) != 1:
        raise RnrLensError(f"lm-eval:{name} is a group of {len(tasks)} tasks ({', '.join(sorted(tasks)[:5])}); audit one of them")
    task = next(iter(tasks.values()))
    if task.OUTPUT_TYPE != "generate_until":
        raise RnrLensError(
            f"lm-eval task {name!r} is scored by {task.OUTPUT_TYPE} (answer likelihoods), not by a generated answer; "
            "rnr_lens audits generate_until tasks (many tasks have a generative variant)"
        )
    return task


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """lm-eval's own progress bars and warnings off (a one-line error stays one line; rnr_lens
    shows its own progress)."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def _leaves(loaded: dict[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in loaded.items():
        if isinstance(value, dict):
            out.update(_leaves(value))
        else:
            out[str(key)] = value
    return out


@dataclass(frozen=True)
class LmEvalScoring:
    """How lm-eval scores one task's tries; the deployment of an lm-eval task grades with it.

    Attributes:
        spec: The task spec it was built from (rebuilt from it after pickling, e.g. on a Ray worker).
        identity: lm-eval's version, the task's name and a hash of its resolved config (less
            where the data lie), recorded in the deployment config and so in every audit's id.
        readers: The task's filter names, the one that decides *realized* first.
        stop: The stop strings of its ``generation_kwargs`` (``until``).
        max_new_tokens: Its token budget (``max_gen_toks``, lm-eval's default 256).
        metric: The metric that decides correct (the first of its ``metric_list``).
    """

    spec: LmEvalSpec
    identity: str
    readers: tuple[str, ...]
    stop: tuple[str, ...]
    max_new_tokens: int
    metric: str

    def grade(self, text: str, question: Question, reader: str) -> tuple[str | None, bool]:
        """``(filtered answer, correct)``: filter ``reader``'s reading (None: it read nothing),
        and whether the task's metric scores it 1, as lm-eval's ``process_results`` does for
        this document."""
        filtered, fallbacks = self._filter(text, question, reader)
        doc = question.metadata["doc"]
        score = float(self._task().process_results(doc, [filtered])[self.metric])
        if score not in (0.0, 1.0):
            raise RnrLensError(
                f"lm-eval task {self.spec.task}'s metric {self.metric} gave {score} for one answer; rnr_lens needs a metric that scores "
                "an answer right (1) or wrong (0), such as exact_match"
            )
        value = filtered if isinstance(filtered, str) else str(filtered)
        return (None if value in fallbacks else value), score == 1.0

    def continuation(self, question: Question) -> str:
        """The task's target after its target delimiter, as its few-shot examples write an
        answer after the prompt (GSM8K: " " and the worked solution ending in "#### 18")."""
        task = self._task()
        target = task.doc_to_target(question.metadata["doc"])
        return f"{task.config.target_delimiter}{target[0] if isinstance(target, list) else target}"

    def _filter(self, text: str, question: Question, reader: str) -> tuple[Any, set[str]]:
        """The task's filter pipeline ``reader`` applied to one response, as lm-eval applies it
        to a document's responses; and the fallbacks its steps answer with when they read nothing."""
        ensemble = next((f for f in self._task()._filters if f.name == reader), None)
        if ensemble is None:
            raise RnrLensError(f"lm-eval task {self.spec.task} has no filter {reader!r}; its filters: {', '.join(self.readers)}")
        resps: Any = [[text]]
        fallbacks: set[str] = set()
        for make in ensemble.filters:
            step = make()
            resps = step.apply(resps, [question.metadata["doc"]])
            if isinstance(getattr(step, "fallback", None), str):
                fallbacks.add(step.fallback)
        (filtered,) = list(resps)
        return filtered, fallbacks

    def _task(self) -> Any:
        return _load_harness_task(self.spec)


def _identity(task: Any) -> str:
    lm_eval = _lm_eval()
    config = {k: v for k, v in task.dump_config().items() if k not in _IDENTITY_SKIPS}
    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"lm-eval {getattr(lm_eval, '__version__', '?')} {task.config.task} {digest}"


def _gold(task: Any, doc: dict[str, Any], metric_kwargs: dict[str, Any]) -> str:
    """The gold answer for display and the chance level: the task's target, less what its
    metric ignores (``regexes_to_ignore``: GSM8K's worked solution before ``#### ``). Never used
    to decide correct; the metric decides that."""
    target = task.doc_to_target(doc)
    if isinstance(target, list):
        target = target[0] if target else ""
    text = str(target)
    for pattern in metric_kwargs.get("regexes_to_ignore", ()) or ():
        text = re.sub(pattern, "", text)
    return text.strip()


def load(name: str, trust_code: bool = False) -> Task:
    """The lm-eval task ``name`` (``lm-eval:NAME[:FILTER]``) as rnr_lens questions, every test
    document in lm-eval's order, with the :class:`LmEvalScoring` that grades them.

    A task YAML of the user's (``lm-eval:PATH.yaml``) is code: lm-eval renders its templates
    with an unsandboxed Jinja, imports its ``!function`` modules and may load its metrics from
    files. It is refused unless ``trust_code`` (``--trust-task-code``). lm-eval's own installed
    tasks (``lm-eval:NAME``) are trusted as the package is.
    """
    spec = parse_spec(name)
    if spec.include is not None and not trust_code:
        task_name(spec)  # a missing or malformed file says so first (read as plain YAML, nothing run)
        raise RnrLensError(
            f"{spec.include / spec.task} is a task file, and lm-eval runs a task file as code (its templates, !function and metric names can run "
            f"Python); read it and what it includes, then pass {arg('trust_code')} to run it"
        )
    task = _load_harness_task(spec)
    readers = tuple(f.name for f in task._filters)
    if spec.filter is not None and spec.filter not in readers:
        raise RnrLensError(f"lm-eval task {task.config.task} has no filter {spec.filter!r}; choose one of {', '.join(readers)}")
    if spec.filter is not None:
        readers = (spec.filter, *(r for r in readers if r != spec.filter))
    from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs

    kwargs = normalize_gen_kwargs(dict(task.config.generation_kwargs or {}))
    if kwargs.get("do_sample") or float(kwargs.get("temperature") or 0.0) > 0:
        raise RnrLensError(f"lm-eval task {task.config.task} samples its answers (do_sample); rnr_lens's realized answer is the greedy one")
    metric = next(iter(task._metric_fn_list))
    from lm_eval.defaults import DEFAULT_OTHER_SEED

    task.set_fewshot_seed(seed=DEFAULT_OTHER_SEED)  # as `lm_eval` seeds it (its --fewshot_random_seed default)
    with _quiet():
        task.build_all_requests(limit=None)  # every document, in order: the first N contexts are those of `lm_eval --limit N`
    questions = []
    for instance in task.instances:
        doc, (context, _) = instance.doc, instance.args
        questions.append(
            Question(str(instance.doc_id), context, _gold(task, doc, task._metric_fn_kwargs[metric]), metadata={"doc": doc, "split": "test"})
        )
    golds = [q.answer for q in questions]
    answer_type = "number" if all(canonical_number(g) is not None for g in golds) else "string"
    scoring = LmEvalScoring(
        spec=spec,
        identity=_identity(task),
        readers=readers,
        stop=tuple(handle_stop_sequences(kwargs.get("until"), eos=None)),
        max_new_tokens=int(kwargs["max_gen_toks"]),
        metric=metric,
    )
    return Task(str(spec), tuple(questions), answer_type, source=f"lm-eval task {task.config.task}", scoring=scoring)
