"""Record real SmolLM2-135M-Instruct outputs as fixtures for the answer-extractor tests.

Run once (about a minute); the outputs are kept in tests/fixtures/smollm2_outputs.json and
labelled by hand there with what each extractor should return.

    python scripts/record_answer_fixtures.py
"""

import json
from pathlib import Path

import rnr_lens as R
from rnr_lens.questions import tasks

CASES = [
    # (label, prompt, max_new_tokens)
    ("prefix-add", R.ChatPrompt("What is 4 + 5?", assistant_prefix="The answer is "), 16),
    ("prefix-wrong", R.ChatPrompt("What is 7 + 1?", assistant_prefix="The answer is "), 16),
    ("no-prefix-restates", R.ChatPrompt("What is 6 + 3?"), 40),
    ("no-prefix-word", R.ChatPrompt("Tom has 3 apples and buys 5 more. How many apples does Tom have now?"), 48),
    ("gsm8k-style", R.ChatPrompt(tasks.get("../shared/data/gsm8k_test.jsonl")[0].prompt + " End with '#### <number>'."), 64),
    ("boxed", R.ChatPrompt("What is 12 - 5? Put the final answer in \\boxed{}."), 48),
    ("choice", R.ChatPrompt("Which is a metal?\nA. wood\nB. iron\nC. glass\nAnswer with the letter.", assistant_prefix="The answer is "), 12),
    ("never-answers", R.ChatPrompt("Write one sentence about the sea."), 24),
    ("raw-text", "Question: What is 8 + 6?\nAnswer:", 16),
]


def main() -> None:
    model = R.load_model("smollm2-135m-instruct")
    out = []
    for label, prompt, tokens in CASES:
        gen = model.generate([prompt], max_new_tokens=tokens)[0]
        prefix = prompt.assistant_prefix if isinstance(prompt, R.ChatPrompt) else ""
        out.append({"label": label, "prefix": prefix, "output": gen.text, "expected": {}})
        print(label, repr(gen.text))
    path = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "smollm2_outputs.recorded.json (review, then merge into smollm2_outputs.json)"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}; copy the outputs into smollm2_outputs.json and label them")


if __name__ == "__main__":
    main()
