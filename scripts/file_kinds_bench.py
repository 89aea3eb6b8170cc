"""Time and memory of reading each file kind (providers.extractors) and of chunking a 1 MiB
single-word document, each case in a fresh interpreter so that its RSS growth is its own
(the imports of eragraph and of the readers are measured apart, before the read).

    PYTHONPATH=shared python scripts/file_kinds_bench.py [--out bench-results/file-kinds.json]

The files are built here (fpdf2, python-docx), as the tests build them: an all-ASCII PDF (the
case the issue saw ingested as 6 chunks of PDF syntax), PDFs of 500 pages, a DOCX of 5,000
paragraphs, a 1 MB HTML page. RSS growth = peak RSS after the read and chunking minus RSS
after the imports."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "shared"))
from eragraph.bench.common import run_record  # noqa: E402

PARAGRAPH = ("The harbour master of Gdynia logged every ship that passed the breakwater, with its "
             "flag, its cargo and the hour. ")


def build(folder: Path) -> dict[str, Path]:
    from file_builders import docx_bytes, pdf_bytes

    files = {
        "pdf-ascii-3-pages": ("a.pdf", pdf_bytes([PARAGRAPH * 12] * 3, ascii_only=True)),
        "pdf-ascii-500-pages": ("b.pdf", pdf_bytes([PARAGRAPH * 12] * 500, ascii_only=True)),
        "pdf-compressed-500-pages": ("c.pdf", pdf_bytes([PARAGRAPH * 12] * 500)),
        "docx-5000-paragraphs": ("d.docx", docx_bytes([PARAGRAPH] * 5000)),
        "html-1mb": ("e.html", ("<!DOCTYPE html><html><head><title>Log</title><script>x()</script></head><body>"
                                + f"<h2>Entry</h2><p>{PARAGRAPH}</p>" * 8000 + "</body></html>").encode()),
        "text-1mib-single-word": ("f.txt", b"x" * (1 << 20)),
    }
    out = {}
    for case, (name, data) in files.items():
        path = folder / name
        path.write_bytes(data)
        out[case] = path
    return out


CHILD = r"""
import json, sys, time
def rss_kb(field="VmRSS:"):  # VmHWM: the peak (ru_maxrss would carry the parent's over exec)
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field))
path, case = sys.argv[1], sys.argv[2]
before = rss_kb()
t0 = time.perf_counter()
from eragraph.domain.text import chunk_text, regex_offsets
from eragraph.providers import extractors
from eragraph.providers.extractors import extract
for module in extractors.PACKAGES:  # the readers' imports, measured apart from the read
    __import__(module)
import docx.table, lxml.html
imported = rss_kb()
import_s = time.perf_counter() - t0
start = time.perf_counter()
got = extract(open(path, "rb").read(), path)
read_s = time.perf_counter() - start
chunks = chunk_text(got.text, regex_offsets, 200, 32)
total_s = time.perf_counter() - start
peak = rss_kb("VmHWM:")
print(json.dumps({"kind": got.kind, "characters": len(got.text), "read_seconds": round(read_s, 3),
                  "read_and_chunk_seconds": round(total_s, 3), "chunks": len(chunks),
                  "max_chunk_characters": max(len(c.text) for c in chunks),
                  "import_seconds": round(import_s, 3), "import_rss_mb": round((imported - before) / 1024, 1),
                  "read_and_chunk_rss_growth_mb": round(max(0, peak - imported) / 1024, 1)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "shared"))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case, path in build(Path(tmp)).items():
            run = subprocess.run([sys.executable, "-c", CHILD, str(path), case], env=env, check=True,
                                 capture_output=True, text=True)
            results[case] = {"bytes": path.stat().st_size, **json.loads(run.stdout)}
            print(case, results[case], flush=True)
    report = {"command": "PYTHONPATH=shared python scripts/file_kinds_bench.py --out bench-results/file-kinds.json",
              "run": run_record(ROOT), "chunking": "regex tokens, 200-token chunks, 32 overlap",
              "cases": results}
    if args.out:  # other keys of an existing file (a CLI comparison recorded by hand) are kept
        out = Path(args.out)
        if out.is_file():
            kept = {k: v for k, v in json.loads(out.read_text(encoding="utf-8")).items() if k not in ("machine", "date")}
            report = {**kept, **report}
        out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
