"""The two ``gh`` calls a workflow step makes, served from the emulated runs and artifacts.

``gh run list`` with ``--json databaseId --jq '.[0].databaseId // empty'`` and ``gh run
download RUN --name N --dir D``: the flags the shipped workflow uses, each checked. Anything
else exits 2 naming what is not emulated. Like the real ``gh`` in a workflow, it needs
``GH_TOKEN``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

LIST_FLAGS = {"--repo", "--workflow", "--branch", "--event", "--status", "--limit", "--json", "--jq"}
DOWNLOAD_FLAGS = {"--repo", "--name", "--dir"}
JQ_FIRST_ID = ".[0].databaseId // empty"


def parse(args: list[str], allowed: set[str]) -> tuple[list[str], dict[str, str]]:
    positional, flags = [], {}
    it = iter(args)
    for arg in it:
        if arg.startswith("-"):
            if arg not in allowed:
                raise SystemExit(f"gh (emulated): flag {arg} is not emulated")
            flags[arg] = next(it)
        else:
            positional.append(arg)
    return positional, flags


def main(argv: list[str], root: str) -> int:
    if not os.environ.get("GH_TOKEN"):
        print("gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable.",
              file=sys.stderr)
        return 4
    runs = json.loads((Path(root) / "runs.json").read_text())
    repository = os.environ["GITHUB_REPOSITORY"]
    if argv[:2] == ["run", "list"]:
        _, f = parse(argv[2:], LIST_FLAGS)
        assert f.get("--repo") == repository, f
        if f.get("--json") != "databaseId" or f.get("--jq") != JQ_FIRST_ID:
            print(f"gh (emulated): --json {f.get('--json')} --jq {f.get('--jq')} not emulated", file=sys.stderr)
            return 2
        match = [r for r in reversed(runs)
                 if f["--workflow"] in (r["workflow"], r["path"])
                 and r["branch"] == f.get("--branch", r["branch"])
                 and r["event"] == f.get("--event", r["event"])
                 and r["conclusion"] == f.get("--status", r["conclusion"])][: int(f.get("--limit", 20))]
        if match:
            print(match[0]["id"])
        return 0
    if argv[:2] == ["run", "download"]:
        pos, f = parse(argv[2:], DOWNLOAD_FLAGS)
        assert f.get("--repo") == repository and len(pos) == 1, (pos, f)
        src = Path(root) / "artifacts" / pos[0] / f["--name"]
        if not src.is_dir():
            print("no valid artifacts found to download", file=sys.stderr)
            return 1
        shutil.copytree(src, f.get("--dir", "."), dirs_exist_ok=True)
        return 0
    print(f"gh (emulated): {' '.join(argv[:2])} is not emulated", file=sys.stderr)
    return 2
