"""``rnr-lens models``: the known offline models and whether each is cached."""

from __future__ import annotations

import argparse
import json

from rnr_lens.cli.shell import print_table

NAME = "models"
HELP = "list the known offline models and whether each is cached"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    from rnr_lens.model.model_cache import list_models

    rows = list_models()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows, ["name", "cached", "description", "path"])
    return 0
