"""lm-evaluation-harness tasks: built and scored by lm-eval's own code, in parity with `lm_eval`.

Guards against rnr_lens drifting from lm-eval: a prompt built otherwise than `lm_eval` builds it
(few-shot sampling, its seed, the order of documents), a try scored by anything but the task's
filters and metric, a deployment whose identity misses the task's config, and (the parity
tests) greedy answers that differ from those `lm_eval --log_samples` writes for the same model.
The tasks read small GSM8K-format files the tests write (the real GSM8K file in ../shared/data
is read where present), so nothing here needs the Hugging Face hub.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import rnr_lens as R
from rnr_lens import RnrLensError
from rnr_lens.questions import tasks
from rnr_lens.questions.deploy import DeploymentConfig, deployment_for_task
from rnr_lens.questions.tasks import lm_eval as adapter
from tests.background import child
from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[3]
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


PARITY = child(
    "lm-eval-parity",
    ["tests/questions/tasks/test_lm_eval.py::test_smollm2_parity_on_real_gsm8k"],
    lambda folder: [
        sys.executable, str(ROOT / "scripts" / "lm-eval-parity"), "--task", "assets/lm-eval/gsm8k_local.yaml", "--limit", "3", "--out", str(folder / "parity"),
    ],
    env=OFFLINE,
    needs=SHARED_DATA.is_dir,  # the test skips without the real data
)  # fmt: skip


def stock_yaml(name: str) -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks" / name / f"{name}.yaml"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="module")
def local_task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's task YAML as the how-to writes it: `include:` the stock GSM8K task, point it at a
    local file (eight GSM8K-format problems), two shots, a short budget for a tiny model."""
    folder = tmp_path_factory.mktemp("lm-eval-task")
    docs = [{"question": f"What is {a} + {b}?", "answer": f"{a} + {b} = <<{a}+{b}={a + b}>>{a + b}\n#### {a + b}"} for a, b in
            [(3, 4), (12, 5), (2, 9), (7, 7), (10, 1), (6, 3), (4, 15), (8, 2)]]  # fmt: skip
    data = folder / "tiny_gsm8k.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    config = {
        "include": str(stock_yaml("gsm8k")),
        "task": "tiny_gsm8k",
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "fewshot_split": "test",
        "num_fewshot": 2,
        "generation_kwargs": {"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": False, "temperature": 0.0, "max_gen_toks": 12},
    }
    path = folder / "tiny_gsm8k.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_spec_round_trips_and_names_its_filter():
    spec = adapter.parse_spec("lm-eval:gsm8k:flexible-extract")
    assert (spec.task, spec.include, spec.filter) == ("gsm8k", None, "flexible-extract")
    assert str(spec) == "lm-eval:gsm8k:flexible-extract"
    path_spec = adapter.parse_spec("lm-eval:some/dir/my_task.yaml")
    assert path_spec.include == Path("some/dir") and path_spec.filter is None
    assert adapter.parse_spec(str(path_spec)) == path_spec
    with pytest.raises(RnrLensError, match="names no lm-eval task"):
        adapter.parse_spec("lm-eval:")


def test_asset_task_is_the_stock_gsm8k_apart_from_its_local_lines():
    """assets/lm-eval/gsm8k_local.yaml copies lm-eval's stock task so it runs anywhere: it must
    stay that task (an lm-eval upgrade that changes the stock file fails here)."""
    stock = yaml.safe_load(stock_yaml("gsm8k").read_text())
    lines = (ROOT / "assets" / "lm-eval" / "gsm8k_local.yaml").read_text().splitlines()
    local = {line.split(":")[0].strip() for line in lines if line.rstrip().endswith("# local") and not line.startswith(" ")}
    mine = yaml.safe_load("\n".join(lines))
    assert local == {"task", "dataset_path", "dataset_name", "dataset_kwargs", "training_split", "fewshot_split"}
    assert {k: v for k, v in mine.items() if k not in local} == {k: v for k, v in stock.items() if k not in local | {"tag"}}


@pytest.mark.slow
def test_task_is_built_by_lm_eval(local_task, offline):
    """Prompts, order, gold and stop strings are lm-eval's; the deployment prescribes them."""
    task = tasks.get(f"lm-eval:{local_task}", trust_code=True)
    assert len(task) == 8 and task.answer_type == "number" and task.ids == [str(i) for i in range(8)]
    assert [q.answer for q in task] == ["7", "17", "11", "14", "11", "9", "19", "10"]
    q = task[0]
    assert q.metadata["split"] == "test", "the documents lm-eval evaluates: `train` refuses them"
    assert q.prompt.endswith("Question: What is 3 + 4?\nAnswer:") and q.prompt.count("Question:") == 3, "two shots, then the question"
    assert "What is 3 + 4?" not in q.prompt[: -len("Question: What is 3 + 4?\nAnswer:")], "the question is not one of its own shots"

    from lm_eval.tasks import TaskManager

    theirs = TaskManager(include_path=str(local_task.parent)).load_task_or_group(["tiny_gsm8k"])["tiny_gsm8k"]
    theirs.set_fewshot_seed(1234)
    theirs.build_all_requests(limit=3)
    assert [i.args[0] for i in theirs.instances] == [x.prompt for x in task.first(3)], "the contexts of `lm_eval --limit 3`"

    config = deployment_for_task(None, task)
    assert (config.chat, config.stop, config.max_new_tokens, config.extractor) == (False, ("Question:", "</s>", "<|im_end|>"), 12, "strict-match")
    assert config.prompt(q) == q.prompt
    assert config.harness.startswith("lm-eval 0.4") and "tiny_gsm8k" in config.harness
    assert DeploymentConfig.from_json(config.to_json()).hash() == config.hash()


def test_a_task_file_of_ones_own_is_found_in_its_folder_without_the_stock_index(local_task, offline, tmp_path, monkeypatch):
    """lm-eval's index of its own 14,000 task files costs 6 s of CPU in every process that
    loads a task; a task file of the user's is found in its folder's index alone, and its
    prompts are lm-eval's (``test_task_is_built_by_lm_eval`` compares them with the whole
    index's). A file that index cannot read is refused as the whole index refuses it."""
    from lm_eval.tasks._index import TaskIndex

    indexed: list[list[Path]] = []
    build = TaskIndex.build
    monkeypatch.setattr(TaskIndex, "build", staticmethod(lambda paths, **kw: indexed.append(list(paths)) or build(paths, **kw)))
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / local_task.name).write_text(local_task.read_text())
    task = tasks.get(f"lm-eval:{folder / local_task.name}", trust_code=True)
    assert len(task) == 8 and indexed == [[folder]], "the folder's index alone"
    (folder / "broken.yaml").write_text("task: broken_task\ninclude: no_such_file.yaml\n")
    with pytest.raises(RnrLensError, match="lm-eval knows no task 'broken_task'"):
        tasks.get(f"lm-eval:{folder / 'broken.yaml'}", trust_code=True)
    assert indexed[1:] == [[stock_yaml("gsm8k").parents[1], folder]], "the refusal is the whole index's"


@pytest.mark.slow
def test_tries_are_scored_by_the_tasks_filters_and_metric(local_task, offline):
    task = tasks.get(f"lm-eval:{local_task}", trust_code=True)
    config = deployment_for_task(None, task)
    q = task[0]  # gold 7
    assert config.grade(" 3 + 4 = 7\n#### 7", q, task.answer_type) == ("7", True)
    assert config.grade(" The answer is 7.", q, task.answer_type) == (None, False), "strict-match reads only '#### N'"
    assert config.read_with("flexible-extract", " The answer is 7.", q, task.answer_type) == ("7.", True), "exact_match ignores a final '.'"
    assert config.read_with("flexible-extract", " 7.0", q, task.answer_type) == ("7.0", False), "exact_match is not numeric equality"
    assert config.readers(task.answer_type) == ("strict-match", "flexible-extract")
    assert config.gold_continuation(q) == " 3 + 4 = <<3+4=7>>7\n#### 7", "teacher forcing reads the target as the shots write it"
    flexible = tasks.get(f"lm-eval:{local_task}:flexible-extract", trust_code=True)
    assert deployment_for_task(None, flexible).extractor == "flexible-extract"
    assert deployment_for_task(None, flexible).hash() != config.hash(), "the deciding filter is part of the identity"
    with pytest.raises(RnrLensError, match=r"need the question; call grade"):
        config.extract(" 3 + 4 = 7\n#### 7")  # not rnr_lens's own extractor named 'strict-match'
    assert adapter.task_name(adapter.parse_spec(f"lm-eval:{local_task}")) == "tiny_gsm8k", "what `lm_eval --tasks` takes"


@pytest.mark.slow
def test_bad_lm_eval_tasks_are_refused_in_one_line(local_task, offline, tmp_path):
    with pytest.raises(RnrLensError, match="has no filter 'lenient'; choose one of strict-match, flexible-extract"):
        tasks.get(f"lm-eval:{local_task}:lenient", trust_code=True)
    with pytest.raises(RnrLensError, match="does not exist"):
        tasks.get(f"lm-eval:{tmp_path / 'missing.yaml'}")
    with pytest.raises(RnrLensError, match="lm-eval knows no task 'no_such_task'"):
        tasks.get("lm-eval:no_such_task")
    choice = tmp_path / "mc.yaml"
    data = tmp_path / "mc.jsonl"
    data.write_text(json.dumps({"q": "1 + 1?", "choices": ["1", "2"], "label": 1}) + "\n")
    choice.write_text(yaml.safe_dump({
        "task": "tiny_mc", "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data)}}, "test_split": "test",
        "output_type": "multiple_choice", "doc_to_text": "{{q}}", "doc_to_choice": "{{choices}}", "doc_to_target": "{{label}}",
    }))  # fmt: skip
    with pytest.raises(RnrLensError, match="scored by multiple_choice .* rnr_lens audits generate_until tasks"):
        tasks.get(f"lm-eval:{choice}", trust_code=True)
    task = tasks.get(f"lm-eval:{local_task}", trust_code=True)
    with pytest.raises(RnrLensError, match="prompted and scored by its harness .* drop config="):
        R.audits.plan(task, [], seed=0).with_config(DeploymentConfig()).deployed(None)
    with pytest.raises(RnrLensError, match="does not apply to an lm-eval task"):
        tasks.get(f"lm-eval:{local_task}", n=3, trust_code=True)


@pytest.mark.slow  # over 5 s on two cores (CONTRIBUTING's table)
def test_a_task_yaml_of_ones_own_is_code_and_runs_only_with_the_opt_in(local_task, offline, tmp_path):
    """lm-eval runs a task file as code: it imports a `!function`'s module, and renders its
    templates with an unsandboxed Jinja, as it loads the task."""
    marker, jinja_marker = tmp_path / "ran", tmp_path / "ran-jinja"
    (tmp_path / "helpers.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\ndef docs(ds):\n    return ds\n")
    (tmp_path / "base.yaml").write_text("process_docs: !function helpers.docs\n")
    config = yaml.safe_load(local_task.read_text()) | {"task": "tiny_gsm8k_code", "include": [str(stock_yaml("gsm8k")), "base.yaml"]}
    task_yaml = tmp_path / "code.yaml"
    task_yaml.write_text(yaml.safe_dump(config, sort_keys=False))
    jinja = tmp_path / "jinja.yaml"
    template = "{{ cycler.__init__.__globals__.os.system('touch " + str(jinja_marker) + "') }}Question: {{question}}"
    jinja.write_text(yaml.safe_dump(yaml.safe_load(local_task.read_text()) | {"task": "tiny_gsm8k_jinja", "doc_to_text": template}))
    for path in (task_yaml, jinja, local_task):
        with pytest.raises(RnrLensError, match=r"is a task file, and lm-eval runs a task file as code .* trust_code=True"):
            tasks.get(f"lm-eval:{path}")
    assert not marker.exists() and not jinja_marker.exists(), "refused before lm-eval read it"
    assert len(tasks.get(f"lm-eval:{task_yaml}", trust_code=True)) == 8 and marker.exists(), "the opt-in runs it"
    assert main_cli_refuses(["check-format", "--task", f"lm-eval:{jinja}", "--limit", "2"]) and not jinja_marker.exists()


def main_cli_refuses(argv: list[str]) -> bool:
    """The command line refuses ``argv`` in one line, exit 2."""
    from rnr_lens.cli import main

    return main(argv) == 2


def lm_eval_samples(folder: Path, task_yaml: Path, task_name: str, limit: int, out: Path) -> dict[str, dict]:
    """`lm_eval --model hf --log_samples` on a model folder: each document's greedy text and
    each filter's (reading, correct)."""
    cmd = [
        sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={folder},dtype=float32",
        "--tasks", task_name, "--include_path", str(task_yaml.parent), "--limit", str(limit), "--batch_size", "1",
        "--device", "cpu", "--log_samples", "--output_path", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env={**os.environ, **OFFLINE}, capture_output=True)
    (samples,) = list(out.rglob(f"samples_{task_name}_*.jsonl"))
    rows: dict[str, dict] = {}
    for line in samples.read_text().splitlines():
        s = json.loads(line)
        row = rows.setdefault(str(s["doc_id"]), {"prompt": s["arguments"]["gen_args_0"]["arg_0"], "text": s["resps"][0][0]})
        row[s["filter"]] = s["exact_match"] == 1.0
    return rows


@pytest.mark.slow
def test_realized_answers_match_lm_eval_on_a_tiny_model(local_task, offline, tmp_path):
    """The parity the README shows for SmolLM2, on a tiny random Llama saved as a folder: the
    same prompts, greedy texts and per-filter correctness as `lm_eval`'s logged samples."""
    folder = R.tiny_model(n_layers=4, seed=0).save_pretrained(tmp_path / "tiny")
    theirs = lm_eval_samples(folder, local_task, "tiny_gsm8k", 6, tmp_path / "lm-eval")
    model = R.load_model(str(folder))
    task = tasks.get(f"lm-eval:{local_task}", trust_code=True).first(6)
    result = R.audit(model, task, [], progress=False)
    config = deployment_for_task(model, task)
    texts = result.tries.set_index("question_id")["text"]
    assert [theirs[q.id]["prompt"] for q in task] == [config.prompt(q) for q in task]
    assert {q.id: theirs[q.id]["text"] for q in task} == {q.id: texts[q.id] for q in task}
    for reader in ("strict-match", "flexible-extract"):
        ours = {q.id: config.read_with(reader, str(texts[q.id]), q, task.answer_type)[1] for q in task}
        assert ours == {q.id: theirs[q.id][reader] for q in task}, reader
    realized = result.tries.set_index("question_id")["correct"]
    assert {q.id: bool(realized[q.id]) for q in task} == {q.id: theirs[q.id]["strict-match"] for q in task}


@pytest.mark.slow
def test_smollm2_parity_on_real_gsm8k(shared_data):
    """The README's parity on its first three GSM8K questions, through the script it quotes."""
    run = PARITY.result()  # started when the session started (tests/background.py)
    totals = json.loads((run.folder / "parity" / "parity.json").read_text())["totals"]
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert totals["same_prompt"] == totals["same_text"] == 3


@pytest.mark.slow
def test_check_format_reads_with_every_filter_of_the_task(local_task, tmp_path):
    """`rnr-lens check-format` on an lm-eval task: the task's filters are its readers."""
    folder = R.tiny_model(n_layers=4, seed=0).save_pretrained(tmp_path / "tiny")
    cmd = [
        sys.executable,
        "-m",
        "rnr_lens",
        "check-format",
        "--model",
        str(folder),
        "--task",
        f"lm-eval:{local_task}",
        "--trust-task-code",
        "--limit",
        "4",
        "--json",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **OFFLINE})
    assert run.returncode == 0, run.stderr[-2000:]
    check = json.loads(run.stdout)
    assert check["extractor"] == "strict-match" and check["n"] == 4
    assert [r["extractor"] for r in check["readings"]] == ["strict-match", "flexible-extract"]
    refused = subprocess.run(
        [*cmd[:-1], "--config", str(ROOT / "assets" / "deployment.yaml")], capture_output=True, text=True, env={**os.environ, **OFFLINE}
    )
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1 and "drop --config" in refused.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("task: x\nmetadata: " + "[" * 200_000 + "]" * 200_000 + "\n", "nests YAML too deeply"),
        ("task: x\nwhen: 2001-13-45\n", "holds a value that cannot be read"),
    ],
    ids=["nested-200000-deep", "an-impossible-date"],
)
def test_a_task_yaml_that_does_not_read_is_one_line_without_the_opt_in(tmp_path, text, said):
    """Issue 73: both ended in a traceback before the opt-in was asked for."""
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(RnrLensError, match=said) as refused:
        tasks.get(f"lm-eval:{path}")
    assert "\n" not in str(refused.value)
