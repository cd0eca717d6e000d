#!/usr/bin/env python3
"""What a DOCX file says of its own title and headings, as python-docx reads it, for
bench/pdf/doc-headings: one JSON object on stdout,

    {"core_title": "...",        # docProps/core.xml's dc:title as written ("" when none; read
                                 # from the part itself: python-docx makes up "Word Document"
                                 # for a package without one)
     "headings": ["...", ...],   # the text of every paragraph that is a heading (below)
     "title_paragraphs": [...],  # paragraphs in the Title style
     "first_paragraphs": [[text, is_heading, style name], ...]}  # the first 40 non-empty ones

A paragraph is a heading when Word would put it in the navigation pane: its own outline level
(`w:pPr/w:outlineLvl`, 0-8; 9 is body text) if it has one, else the first of its style and the
styles that style is based on (`basedOn`, as python-docx's `base_style` follows it) that is
named `Heading 1`-`Heading 9` or `Title`, or that sets an outline level (0-8 a heading, 9 not).
Every paragraph of the main document part counts, those in tables and text boxes too. A
paragraph's text is all its `w:t`, tracked insertions (`w:ins`) included, which python-docx's
`Paragraph.text` leaves out; a text box's paragraphs are their own. Needs
python-docx (`pip install python-docx`, e.g. into a venv).

    python3 bench/pdf/docx_reference.py FILE.docx
"""
import json
import re
import sys
import zipfile

import docx
from docx.oxml.ns import qn
from docx.text.paragraph import Paragraph

HEADING_NAME = re.compile(r"^(heading [1-9]|title)$", re.I)


def outline_of(ppr):
    if ppr is None:
        return None
    o = ppr.find(qn("w:outlineLvl"))
    if o is None:
        return None
    try:
        return int(o.get(qn("w:val")))
    except (TypeError, ValueError):
        return None


def is_heading(par):
    own = outline_of(par._p.pPr)
    if own is not None:
        return own < 9
    style = par.style
    seen = 0
    while style is not None and seen < 16:
        if style.name and HEADING_NAME.match(style.name):
            return True
        level = outline_of(style.element.pPr)
        if level is not None:
            return level < 9
        style = style.base_style
        seen += 1
    return False


def text_of(p):
    """The paragraph's words: every w:t whose nearest paragraph is p, tabs and breaks as spaces."""
    out = []
    for el in p.iter(qn("w:t"), qn("w:tab"), qn("w:br"), qn("w:cr")):
        owner = el.getparent()
        while owner is not None and owner.tag != qn("w:p"):
            owner = owner.getparent()
        if owner is p:
            out.append(el.text or "" if el.tag == qn("w:t") else " ")
    return " ".join("".join(out).split())


def core_title(path):
    with zipfile.ZipFile(path) as z:
        if "docProps/core.xml" not in z.namelist():
            return ""
        xml = z.read("docProps/core.xml").decode("utf-8", "replace")
    m = re.search(r"<dc:title[^>]*>(.*?)</dc:title>", xml, re.S)
    if not m:
        return ""
    import html

    return html.unescape(m.group(1))


def main():
    path = sys.argv[1]
    d = docx.Document(path)
    headings, titles, first = [], [], []
    for p in d.element.body.iter(qn("w:p")):
        par = Paragraph(p, d._body)
        text = text_of(p)
        if not text:
            continue
        try:
            heading = is_heading(par)
            name = par.style.name if par.style is not None else ""
        except (KeyError, AttributeError):
            heading, name = False, ""
        if len(first) < 40:
            first.append([text, heading, name])
        if heading:
            headings.append(text)
        if name.lower() == "title":
            titles.append(text)
    json.dump(
        {"core_title": core_title(path), "headings": headings, "title_paragraphs": titles, "first_paragraphs": first},
        sys.stdout,
        ensure_ascii=False,
    )


if __name__ == "__main__":
    main()
