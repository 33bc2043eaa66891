"""``rnr-lens export``: an audit's tries and questions as parquet or csv files."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

from rnr_lens.cli.shell import existing_store
from rnr_lens.core.files import write_atomic
from rnr_lens.core.records import check_audit_id
from rnr_lens.core.untrusted import safe_csv
from rnr_lens.errors import RnrLensError

NAME = "export"
HELP = "write an audit's tries and questions as parquet or csv"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store")
    p.add_argument("--audit", help="audit id (may be left out when the store holds one)")
    p.add_argument(
        "--format",
        choices=["parquet", "csv"],
        default="parquet",
        help="parquet keeps every cell exact; csv is spreadsheet-safe: a text cell that begins with = + - @, a tab or a return gets a leading '",
    )
    p.add_argument("--out", default=".", help="folder to write into")


def run(args: argparse.Namespace) -> int:

    from rnr_lens.measure.results import AuditResult

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise RnrLensError(f"--out {out} is a file; export writes two files into a folder, so give a folder path")
    result = AuditResult.load(existing_store(args.store), args.audit)
    audit_id = check_audit_id(result.id, args.store)  # it becomes a file name: only an id the tool makes
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RnrLensError(f"cannot write into --out {out} ({exc.strerror or exc}); choose a folder you can write to") from None
    written = []
    # the questions' columns name each probe by its label (reachable[sampling]); each try says it too
    tries = result.tries.assign(probe_label=result.tries["probe"].map(lambda p: result.labels.get(p, p)))
    for name, frame in (("tries", tries), ("questions", result.questions)):
        path = out / f"{audit_id}-{name}.{args.format}"
        if args.format == "parquet":
            buffer = io.BytesIO()
            frame.to_parquet(buffer, index=False)
            data = buffer.getvalue()
        else:
            data = safe_csv(frame)
        write_atomic(path, data)
        written.append(str(path))
    print("\n".join(written))
    return 0
