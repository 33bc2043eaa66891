"""The planted model fixture shared by the mining, failure-set, figure and widget tests: a task
on the tiny model whose failures are answered right exactly when MLP 2 is silenced."""

import re

import rnr_lens as R
from rnr_lens.measure.audits import audit
from rnr_lens.measure.store import RunStore
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks import Question, Task, get

PLANTED = R.Ablation(2, "mlp")
CONFIG = DeploymentConfig.default_for("string").with_(max_new_tokens=6)


def answer_text(generated: str) -> str:
    """The generated answer as the model wrote it (its own tokens), up to the sentence end."""
    return re.split(r"[.\n!?]", generated, maxsplit=1)[0]


def round_trips(model, gen) -> bool:
    """Whether the answer text re-tokenizes to the tokens the model generated (random byte-level
    tokens often decode to replacement characters that do not)."""
    text = answer_text(gen.text)
    ids = model.tokenizer(text, add_special_tokens=False)["input_ids"]
    return "\ufffd" not in text and ids == gen.token_ids[: len(ids)]


def build_planted(tiny, db_path, with_realized: bool = True):
    """Audit a task whose failures are answered right exactly when MLP 2 is silenced (and, with
    ``with_realized``, as many questions the model already gets right)."""
    base = list(get("add-two-digit", n=300, seed=2))
    prompts = [CONFIG.prompt(q) for q in base]
    clean = tiny.generate(prompts, max_new_tokens=CONFIG.max_new_tokens, stop=CONFIG.stop)
    ablated = tiny.generate(prompts, max_new_tokens=CONFIG.max_new_tokens, stop=CONFIG.stop, ablations=[PLANTED])
    questions = []
    for q, c, a in zip(base, clean, ablated):
        clean_ans, ablated_ans = CONFIG.extract(c.text), CONFIG.extract(a.text)
        if clean_ans is None or ablated_ans is None or not (round_trips(tiny, c) and round_trips(tiny, a)):
            continue
        if len(questions) % 2 == 0 and clean_ans != ablated_ans:
            questions.append(Question(q.id, q.prompt, answer_text(a.text)))  # fails clean, right with mlp2 off
        elif len(questions) % 2 == 1:
            questions.append(Question(q.id, q.prompt, answer_text(c.text)))  # realized
    task = Task("planted", tuple(questions[:16] if with_realized else questions[:16:2]), "string")
    store = RunStore(db_path)
    result = audit(tiny, task, ["ablation:component=mlp"], CONFIG, store=store, progress=False)
    return result, store
