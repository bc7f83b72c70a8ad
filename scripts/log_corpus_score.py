"""The log corpus's pass count with strict severity: how many real logs get exactly their
expected findings (no more, no fewer), each at its expected severity, and their phase.

    python scripts/log_corpus_score.py [-v]

`tests/test_log_corpus.py` checks each case's expected findings and holds the strict count
(`STRICT_MISSES_AT_MOST`); this prints the count and, with -v, what each other case got.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eaglebug.checks.logs.parse import analyze_file  # noqa: E402
from tests.logjson import strict_misses  # noqa: E402

CORPUS = REPO / "tests" / "fixtures" / "logs" / "corpus"


def main() -> int:
    verbose = "-v" in sys.argv
    cases = sorted(CORPUS.glob("*.json"))
    passed = 0
    for path in cases:
        case = json.loads(path.read_text(encoding="utf-8"))
        wrong = strict_misses(case, analyze_file(path.with_suffix(".log")).to_json())
        passed += not wrong
        if wrong and verbose:
            print(f"MISS {path.stem}: " + "; ".join(wrong))
    print(f"{passed} of {len(cases)} cases read exactly (findings, severity, phase)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
