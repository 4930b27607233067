"""The Docker build context: the repository's files that .dockerignore does not exclude (Docker's rules:
patterns relative to the root, `*` and `?` within one path element, `**` across elements, `!` re-includes,
the last matching pattern wins, a pattern matching a directory excludes what is inside)."""
import os
import re


def _regex(pattern):
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"  # any number of directories, none included
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def load(root):
    """The .dockerignore of `root` as [(regex, excludes?)]."""
    rules = []
    with open(os.path.join(root, ".dockerignore")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            pattern = os.path.normpath(line.lstrip("!").strip("/"))
            rules.append((_regex(pattern), not negate))
    return rules


def excluded(rules, path):
    """Whether `path` (relative to the root, '/'-separated) stays out of the build context."""
    parts = path.strip("/").split("/")
    result = False
    for regex, excludes in rules:
        # A pattern excludes a path when it matches the path or one of its parent directories.
        if any(regex.match("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            result = excludes
    return result


def context_files(root):
    """Every file of the build context, relative to `root`."""
    rules = load(root)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        rel = "" if rel == "." else rel + "/"
        dirnames[:] = [d for d in dirnames if not excluded(rules, rel + d)]
        out += [rel + f for f in filenames if not excluded(rules, rel + f)]
    return out
