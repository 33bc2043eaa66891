"""``rnr-lens export``: an audit's tries and questions as parquet or csv files."""

from __future__ import annotations

import argparse
import os

from rnr_lens.cli.shell import existing_store
from rnr_lens.errors import RnrLensError

NAME = "export"
HELP = "write an audit's tries and questions as parquet or csv"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store")
    p.add_argument("--audit", help="audit id (may be left out when the store holds one)")
    p.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    p.add_argument("--out", default=".", help="folder to write into")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rnr_lens.results import AuditResult

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise RnrLensError(f"--out {out} is a file; export writes two files into a folder, so give a folder path")
    result = AuditResult.load(existing_store(args.store), args.audit)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".rnr_lens_write_test.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise RnrLensError(f"cannot write into --out {out} ({exc.strerror or exc}); choose a folder you can write to") from None
    written = []
    for name, frame in (("tries", result.tries), ("questions", result.questions)):
        path = out / f"{result.id}-{name}.{args.format}"
        tmp = path.with_suffix(path.suffix + ".tmp")
        if args.format == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
        tmp.replace(path)
        written.append(str(path))
    print("\n".join(written))
    return 0
