"""Judgments as a batch job: ``python -m harness.batch export`` / ``import`` (``docs/protocol.md#batch-files``).

``export --out DIR`` (with the suite's options: ``--profile``, ``--splits``, ``--subset-pairs``,
``--grader-sample``, ``--cache-dir`` ... and ``--rankers a,b``) writes every judgment request the run
would still send, cache misses only, as OpenAI batch JSONL (``custom_id``, ``method``, ``url``,
``body``): one ``<judge>.jsonl`` per judge (rankers with the same judge key share it), beside it
``<judge>.index.jsonl`` (what each ``custom_id`` stands for: its score-cache key, one to one) and
``manifest.json`` (per judge: the key, the prompt version, the model, the count). Only LLM judges on
``backend = "openai"`` have requests to export (their bodies are exactly what the online client
sends); in-process backends judge on this machine and are listed as skipped. A batch export sends
nothing to a server, so it checks none (it says so, once). A later pytest run whose judgments are all stored
(imported) needs no server either: a judge whose server does not answer is judged from the score cache alone, and
fails its rows, before any request, only if a judgment is missing there.

Any engine that reads OpenAI batch files turns a request file into a result file (``vllm run-batch``,
a hosted Batch API, Ray Data over the file: README "Scale out"); ``import FILE`` then checks every
result line — a known ``custom_id``, not repeated, a 200 response from the expected model with an
answer the judge can read — and stores the good ones in the score cache exactly as the online path
does (the same reading, the same row; the ``endpoint`` recorded is ``batch:<file name>``). A line
that fails is named with its line number and never cached; requests with no result line are named
by their line in the request file. A later pytest run reads the stored judgments like any others.

Listwise and pairwise judges depend on earlier answers within a window (RankGPT's sliding
sub-windows, PRP's bubble passes): the export holds each window's next round only (the step its
algorithm reaches through what the cache holds), so such a judge takes one export -> process ->
import cycle per round until an export is empty; all-pair comparisons and designated pairs are one
round.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


from fixtures.settings import pin_cpu_kernels
from harness.batch_export import BatchError, exportable, write_export
from harness.batch_import import import_results
from harness.options import OptionError, argument_parser, fit_to_data, path_option, read_profile, \
    resolve_before_work, settings_from
from harness.session import Evaluation


def _export_main(argv: Sequence[str]) -> int:
    parser = argument_parser("python -m harness.batch export", "Write every judgment request the run would still "
                             "send (cache misses only) as OpenAI batch JSONL, one file per judge.")
    parser.add_argument("--out", required=True, help="folder to write the batch files and manifest.json into "
                                                     "(replaced whole)")
    parser.add_argument("--rankers", default=None, help="comma-separated window rankers (default: every LLM judge "
                                                        "on backend 'openai')")
    args = parser.parse_args(argv)
    try:
        settings = settings_from(lambda name: getattr(args, name))
        profile = read_profile(settings)
        settings = fit_to_data(settings, profile)  # the splits the declared dataset holds, its rows checked
        chosen = [n.strip() for n in args.rankers.split(",") if n.strip()] if args.rankers else None
        unknown = [n for n in chosen or () if n not in profile.rankers]
        if unknown:
            raise OptionError(f"--rankers: {unknown} are not declared in {profile.path}")
        skipped = {d.name: why for d in profile.ordered() if d.is_window and (why := exportable(d)) is not None}
        refused = [f"{n}: {skipped[n]}" for n in chosen or () if n in skipped]
        if refused:
            raise OptionError("--rankers: no batch requests for " + "; ".join(refused))
        names = chosen or [d.name for d in profile.ordered() if d.is_window and d.name not in skipped]
        resolve_before_work(settings, profile, lambda decl: decl.name in names)
    except OptionError as exc:
        parser.exit(2, f"error: {exc}\n")
    out = path_option(args.out)
    print(f"exporting without checking any server (a batch export sends nothing): the requests of {', '.join(names)}"
          if names else "exporting without checking any server: no ranker has batch requests")
    manifest = write_export(Evaluation(settings, profile, contact=False), out, names,
                            {n: why for n, why in skipped.items() if chosen is None})
    for judge in manifest["judges"]:
        print(f"{out / judge['file']}: {judge['count']} requests for {', '.join(judge['rankers'])} "
              f"(prompt {judge['prompt_version']}, model {judge['model']})")
    for entry in manifest["skipped"]:
        print(f"skipped {entry['ranker']}: {entry['reason']}")
    return 0


def _import_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.batch import", description="Check a batch result file "
                                     "line by line and store its judgments in the score cache as the online path "
                                     "would.")
    parser.add_argument("file", help="the result JSONL (OpenAI batch output: custom_id, response.body, error)")
    parser.add_argument("--export", default=None, help="the folder `export` wrote (default: the file's folder)")
    parser.add_argument("--cache-dir", default=None, help="score-cache folder (default: the export's)")
    args = parser.parse_args(argv)
    results = path_option(args.file)
    if not results.is_file():
        parser.exit(2, f"error: {results} is not a file\n")
    try:
        done = import_results(results, path_option(args.export) if args.export else results.parent,
                              path_option(args.cache_dir) if args.cache_dir else None)
    except (BatchError, OSError, json.JSONDecodeError, KeyError) as exc:
        parser.exit(2, f"error: {exc}\n")
    for problem in done.problems:
        print(problem, file=sys.stderr)
    print(f"{results}: {done.stored} judgments stored, {len(done.problems)} problems, {done.missing} requests "
          "without a result")
    return 1 if done.problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"export": _export_main, "import": _import_main}
    if argv and argv[0] in commands:
        if argv[0] == "export":
            pin_cpu_kernels()  # as the suite does, before anything loads torch: a pool built here is the suite's pool
        return commands[argv[0]](argv[1:])
    parser = argparse.ArgumentParser(prog="python -m harness.batch", description=__doc__.splitlines()[0],
                                     epilog="Each command has its own --help.")
    parser.add_argument("command", choices=list(commands), help="export: write the requests a run would still send; "
                                                                 "import: store a result file's judgments")
    parser.parse_args(argv)  # exits: 0 on --help, 2 on a missing or unknown command (a known one returned above)
    return 2


if __name__ == "__main__":
    sys.exit(main())
