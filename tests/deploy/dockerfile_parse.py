"""A small Dockerfile reader: instructions (continuations joined, comments dropped) grouped by stage."""
import re
import shlex
from dataclasses import dataclass, field


@dataclass
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    args: str
    line: int


@dataclass
class Stage:
    image: str  # global ARGs substituted
    name: str
    instructions: list = field(default_factory=list)

    def all(self, keyword):
        return [i for i in self.instructions if i.keyword == keyword]


def instructions(text):
    """Every instruction of a Dockerfile, in order."""
    out, buf, start = [], "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        keyword, _, args = buf.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
        buf = ""
    return out


def stages(text):
    """The build stages, with the global ARG defaults (before the first FROM) substituted in FROM."""
    args, result = {}, []
    for ins in instructions(text):
        if ins.keyword == "ARG" and not result:
            name, _, default = ins.args.partition("=")
            args[name] = default
        elif ins.keyword == "FROM":
            words = [w for w in ins.args.split() if not w.startswith("--platform")]
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], words[0])
            name = words[2] if len(words) == 3 and words[1].lower() == "as" else ""
            result.append(Stage(image, name))
        elif result:
            result[-1].instructions.append(ins)
    return result


@dataclass
class Copy:
    sources: list
    dest: str
    from_stage: str  # "" for the build context


def copies(stage):
    """The stage's COPY instructions."""
    out = []
    for ins in stage.all("COPY"):
        words = shlex.split(ins.args)
        flags = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words if w.startswith("--") and "=" in w}
        paths = [w for w in words if not w.startswith("--")]
        out.append(Copy(paths[:-1], paths[-1], flags.get("--from", "")))
    return out


def env(stage):
    """The stage's ENV variables (KEY=VALUE form)."""
    out = {}
    for ins in stage.all("ENV"):
        for word in shlex.split(ins.args):
            key, _, value = word.partition("=")
            out[key] = value
    return out


def commands(run_args):
    """A RUN's shell commands as word lists (split at && || ; |, quotes respected)."""
    lexer = shlex.shlex(run_args, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    out, words = [], []
    for token in lexer:
        if token in ("&&", "||", ";", "|"):
            out.append(words)
            words = []
        else:
            words.append(token)
    return out + [words]


def apt_installs(stage):
    """The package names of every `apt-get install` / `apt install` in the stage's RUN instructions."""
    names = []
    for ins in stage.all("RUN"):
        for words in commands(ins.args):
            words = [w for w in words if not re.match(r"^[A-Z_][A-Z0-9_]*=", w)]  # VAR=value prefixes
            if len(words) >= 2 and words[0] in ("apt-get", "apt") and "install" in words:
                names += [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
    return names
