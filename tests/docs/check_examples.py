#!/usr/bin/env python3
"""The documentation's examples, run: every example in README.md and docs/**/*.md must print what the
page says it prints, so the docs cannot drift from the program.

An example is a ```text block whose first line starts with `$ census`. Each line starting with `$ `
is a command (a line ending in a backslash continues on the next), run by bash from a scratch folder
that sees the repository's files, with `census` the binary under test; the lines up to the next
command are its output, stdout and stderr as a terminal shows them (trailing spaces aside). A pipe
(`| head -5`) is part of the command. ```python blocks with `>>>` lines run as doctests where the
census module is importable (--python-path), their whitespace normalized.

Usage: check_examples.py --census BUILD/census [--python-path BUILD/python] [--update] [FILE.md ...]
With --update, each example's output is rewritten with what the command prints (the Python examples
are checked, not rewritten). Without FILE arguments, README.md and every page under docs/ are read,
so a new page is checked as soon as it exists.
"""
import argparse
import difflib
import doctest
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\s*$")


def blocks(lines):
    """(language, first line index, last line index exclusive) of each fenced block's body."""
    at = 0
    while at < len(lines):
        opened = FENCE.match(lines[at])
        if not opened:
            at += 1
            continue
        end = at + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        yield opened.group(1), at + 1, end
        at = end + 1


def examples(body):
    """(command, expected output lines, start, end) of each `$ ` command in a block's body lines."""
    at = 0
    while at < len(body):
        if not body[at].startswith("$ "):
            at += 1
            continue
        command_lines = [body[at][2:]]
        while command_lines[-1].rstrip().endswith("\\") and at + 1 < len(body):
            at += 1
            command_lines.append(body[at])
        start = at + 1
        end = start
        while end < len(body) and not body[end].startswith("$ "):
            end += 1
        yield "\n".join(command_lines), body[start:end], start, end
        at = end


def normalized(lines):
    out = [line.rstrip() for line in lines]
    while out and out[-1] == "":
        out.pop()
    return out


def run(command, scratch, census_dir):
    env = dict(os.environ, PATH=census_dir + os.pathsep + os.environ.get("PATH", ""))
    done = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600, check=False)
    return done.stdout.splitlines()


def python_examples(path, text, python_path):
    """Run the ```python blocks with >>> lines of a page as one doctest; (failures, tried)."""
    lines = text.splitlines()
    source = "\n".join("\n".join(lines[start:end]) for language, start, end in blocks(lines)
                       if language == "python" and any(l.lstrip().startswith(">>>") for l in lines[start:end]))
    if not source:
        return 0, 0
    sys.path.insert(0, python_path)
    try:
        test = doctest.DocTestParser().get_doctest(source, {}, str(path), str(path), 0)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        old = os.getcwd()
        os.chdir(ROOT)
        try:
            runner.run(test)
        finally:
            os.chdir(old)
        return runner.failures, runner.tries
    finally:
        sys.path.remove(python_path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--census", required=True, help="the census binary whose output the docs show")
    parser.add_argument("--python-path", help="where the census Python package is built (build/python)")
    parser.add_argument("--update", action="store_true", help="rewrite each example's output with the real one")
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    args = parser.parse_args()
    files = args.files or [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    census = pathlib.Path(args.census).resolve()

    failures, checked, updated = 0, 0, 0
    python_failures, python_tried, python_skipped = 0, 0, []
    with tempfile.TemporaryDirectory(prefix="census-docs-") as scratch:
        # The commands see the repository's files (configs, test data) and write into the scratch folder.
        for entry in ROOT.iterdir():
            if not entry.name.startswith(".") and not entry.name.startswith("build"):
                os.symlink(entry, os.path.join(scratch, entry.name))
        bin_dir = os.path.join(scratch, ".bin")
        os.mkdir(bin_dir)
        os.symlink(census, os.path.join(bin_dir, "census"))
        for path in files:
            text = path.read_text()
            lines = text.splitlines()
            rewritten = list(lines)
            shift = 0
            for language, start, end in blocks(lines):
                body = lines[start:end]
                if language != "text" or not body or not body[0].startswith("$ census"):
                    continue
                for command, expected, first, last in examples(body):
                    checked += 1
                    actual = normalized(run(command, scratch, bin_dir))
                    if actual == normalized(expected):
                        continue
                    where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{start + first}"
                    if args.update:
                        rewritten[start + first + shift:start + last + shift] = actual
                        shift += len(actual) - (last - first)
                        updated += 1
                        print(f"updated {where}: $ {command.splitlines()[0]}")
                        continue
                    failures += 1
                    print(f"{where}: the output of `{command}` differs from the page:")
                    sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(
                        normalized(expected), actual, "the page", "census prints", lineterm="", n=2))
            if args.update and rewritten != lines:
                path.write_text("\n".join(rewritten) + "\n")
            if args.python_path:
                f, t = python_examples(path, text, str(pathlib.Path(args.python_path).resolve()))
                python_failures += f
                python_tried += t
            elif "```python" in text:
                python_skipped.append(path.name)

    print(f"{checked} command examples in {len(files)} pages: {failures} differ" +
          (f", {updated} rewritten" if args.update else ""))
    if args.python_path:
        print(f"{python_tried} Python examples: {python_failures} failed")
    elif python_skipped:
        print("Python examples not run (no --python-path): " + ", ".join(python_skipped))
    if failures or python_failures:
        print("to regenerate the command examples: python3 tests/docs/check_examples.py --census build/census --update")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
