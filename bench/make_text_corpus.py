"""Rebuild the text plugin's bundled English corpus ``austen.txt.gz`` (one sentence per line).

Source: Debian's ``r-cran-janeaustenr`` package (Julia Silge's janeaustenr 1.0.0: Jane
Austen's six novels as Project Gutenberg texts, one vector element per printed line; the novels
are in the public domain, the package is MIT). This script, with no R needed:

1. takes the ``.deb`` given with ``--deb`` or fetches it with ``apt-get download
   r-cran-janeaustenr`` (Debian mirrors only);
2. unpacks the R lazy-load database ``janeaustenr/data/Rdata.{rdx,rdb}`` from it (ar, then
   tar, then R's XDR serialization: a reader for the few types used is below);
3. for each novel in ``--novels`` (in that order): drops everything before the first chapter
   heading, drops headings (``Chapter 1``, ``CHAPTER I``, ``VOLUME II``, ``THE END``...), joins
   each paragraph's lines, removes Gutenberg's ``_italic_`` underscores, and splits paragraphs
   into sentences after ``.``, ``!`` or ``?`` (with closing quotes / brackets) followed by a
   space and an upper-case letter or an opening quote, except after the honorifics and
   abbreviations in ``ABBREVIATIONS`` or a single initial (``E.``);
4. writes one sentence per line, UTF-8, gzip with a zero timestamp, so the file is identical
   on every run.

    python bench/make_text_corpus.py [--deb r-cran-janeaustenr_1.0.0-1_all.deb]
        [--novels prideprejudice sensesensibility persuasion northangerabbey]
        [--out plugins/genodiff-text/src/genodiff_text/corpus/austen.txt.gz]
"""

from __future__ import annotations

import argparse
import gzip
import io
import lzma
import re
import struct
import subprocess
import tarfile
import tempfile
import zlib
from pathlib import Path

# The text plugin's package data (genodiff_text.resources.CORPUS).
CORPUS = Path("plugins/genodiff-text/src/genodiff_text/corpus/austen.txt.gz")
PACKAGE = "r-cran-janeaustenr"
RDATA = "usr/lib/R/site-library/janeaustenr/data/Rdata"
NOVELS = ("prideprejudice", "sensesensibility", "persuasion", "northangerabbey")
ABBREVIATIONS = {
    "Mr", "Mrs", "Ms", "Dr", "St", "Col", "Capt", "Lt", "Gen", "Adm", "Rev", "Messrs",
    "Esq", "Sir", "Mme", "Mlle", "No", "viz", "etc", "i.e", "e.g", "Co",
}  # fmt: skip
HEADING = re.compile(
    r"^(chapter|volume|vol\.|book)\s+[ivxlc\d]+\.?$|^(the\s+)?end\.?$|^finis\.?$", re.I
)
# A sentence ends at . ! ? (plus closing quotes / brackets) before a space and a capital or an
# opening quote / bracket.
BOUNDARY = re.compile(r"([.!?][\"')\]]*)\s+(?=[\"'(\[]*[A-Z])")


# ------------------------------------------------------------------ reading the package


def ar_members(data: bytes) -> dict[str, bytes]:
    """Members of a Unix ``ar`` archive (a .deb)."""
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not a Debian package (no ar header)")
    members, pos = {}, 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        members[name] = data[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size % 2)
    return members


def deb_files(deb: Path, wanted: list[str]) -> dict[str, bytes]:
    """The files ``wanted`` (paths without a leading ./) from the data tarball of ``deb``."""
    members = ar_members(deb.read_bytes())
    name = next(n for n in members if n.startswith("data.tar"))
    raw = members[name]
    if name.endswith(".xz"):
        raw = lzma.decompress(raw)
    elif name.endswith(".gz"):
        raw = gzip.decompress(raw)
    elif name.endswith(".zst"):
        raise ValueError(f"{deb} uses zstd; unpack it with dpkg-deb -x and adapt this script")
    out = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for member in tar.getmembers():
            path = member.name.removeprefix("./")
            if path in wanted:
                out[path] = tar.extractfile(member).read()
    missing = set(wanted) - set(out)
    if missing:
        raise ValueError(f"{deb} lacks {sorted(missing)}")
    return out


class RUnserializer:
    """R's XDR serialization (format 2 or 3), for the types a data package's vectors use."""

    def __init__(self, data: bytes) -> None:
        if data[:2] != b"X\n":
            raise ValueError("not an XDR-serialized R object")
        self.data, self.pos, self.refs = data, 2, []
        version = self.int()
        self.int(), self.int()  # writer and minimal reader versions
        if version == 3:
            length = self.int()  # then the native encoding's name
            self.pos += length

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def read(self):  # noqa: C901 - one branch per R type
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & 0x200, flags & 0x400
        if kind == 254:  # NILVALUE_SXP
            return None
        if kind == 255:  # REFSXP
            index = flags >> 8
            return self.refs[(index or self.int()) - 1]
        if kind == 1:  # SYMSXP
            symbol = ("symbol", self.read())
            self.refs.append(symbol)
            return symbol
        if kind == 9:  # CHARSXP
            length = self.int()
            if length == -1:
                return None  # NA_character_
            raw = self.data[self.pos : self.pos + length]
            self.pos += length
            return raw.decode("latin-1" if flags & (1 << 13) else "utf-8")
        if kind == 2:  # LISTSXP (pairlist): attributes
            attributes = self.read() if has_attr else None
            tag = self.read() if has_tag else None
            del attributes
            head, rest = (tag, self.read()), self.read()
            return [head, *(rest or [])]
        if kind in (10, 13, 14, 16, 19):  # logical, integer, double, character, list
            length = self.int()
            if kind in (16, 19):
                values = [self.read() for _ in range(length)]
            else:
                code, width = ("i", 4) if kind in (10, 13) else ("d", 8)
                values = list(struct.unpack_from(f">{length}{code}", self.data, self.pos))
                self.pos += width * length
            attributes = self.read() if has_attr else None
            names = None
            for tag, value in attributes or []:
                if tag == ("symbol", "names"):
                    names = value
            return dict(zip(names, values, strict=True)) if names else values
        raise ValueError(f"unsupported R type {kind}")


def lazyload_objects(rdx: bytes, rdb: bytes) -> dict[str, object]:
    """The objects of an R lazy-load database (``.rdx`` index + ``.rdb`` data)."""
    index = RUnserializer(gzip.decompress(rdx)).read()  # the index is gzip-compressed
    objects = {}
    for name, (offset, length) in index["variables"].items():
        chunk = rdb[offset : offset + length]
        objects[name] = RUnserializer(zlib.decompress(chunk[4:])).read()
    return objects


# ------------------------------------------------------------------ text -> sentences


def paragraphs(lines: list[str]) -> list[str]:
    """Paragraphs of a novel from its first chapter on, headings dropped, lines joined."""
    start = next(i for i, line in enumerate(lines) if re.match(r"^chapter\s", line.strip(), re.I))
    out, current = [], []
    for line in [*lines[start:], ""]:
        line = line.strip()
        if line:
            current.append(line)
            continue
        if current:
            text = " ".join(current)
            if not HEADING.match(text):
                out.append(text)
            current = []
    return out


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph (see the module docstring for the rule)."""
    text = re.sub(r"\s+", " ", paragraph.replace("_", "")).strip()
    sentences, start = [], 0
    for match in BOUNDARY.finditer(text):
        end = match.end(1)
        word = text[start:end].rstrip("\"')]").rsplit(" ", 1)[-1].lstrip("\"'([")
        stem = word[:-1] if word.endswith(".") else None
        if stem is not None and (stem in ABBREVIATIONS or re.fullmatch(r"[A-Z]", stem)):
            continue
        sentences.append(text[start:end].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


def build(novels: dict[str, list[str]], order: list[str]) -> list[str]:
    sentences = []
    for name in order:
        for paragraph in paragraphs(novels[name]):
            sentences += split_sentences(paragraph)
    return sentences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deb", type=Path, help=f"the {PACKAGE} .deb (default: apt-get download)")
    parser.add_argument("--novels", nargs="+", default=list(NOVELS))
    parser.add_argument("--out", type=Path, default=CORPUS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        deb = args.deb
        if deb is None:
            subprocess.run(["apt-get", "download", PACKAGE], cwd=tmp, check=True)
            deb = next(Path(tmp).glob(f"{PACKAGE}_*.deb"))
        files = deb_files(deb, [RDATA + ".rdx", RDATA + ".rdb"])
        deb_name = deb.name
    objects = lazyload_objects(files[RDATA + ".rdx"], files[RDATA + ".rdb"])
    novels = {
        name: ["" if line is None else line for line in lines] for name, lines in objects.items()
    }
    unknown = set(args.novels) - set(novels)
    if unknown:
        raise SystemExit(f"unknown novels {sorted(unknown)}; the package has {sorted(novels)}")
    sentences = build(novels, args.novels)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = ("\n".join(sentences) + "\n").encode("utf-8")
    with (
        open(args.out, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as out,
    ):
        out.write(payload)
    print(
        f"{deb_name}: {len(sentences)} sentences, {len(payload):,} bytes of text "
        f"({', '.join(args.novels)}) -> {args.out} ({args.out.stat().st_size:,} bytes)"
    )


if __name__ == "__main__":
    main()
