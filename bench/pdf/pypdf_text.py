"""pypdf's reading of a PDF, beside bench/pdf's Rust extractors (`bench/pdf/fidelity`,
`bench/pdf/headings`). Needs pypdf (PyPI), e.g. in a venv:
`python3 -m venv V && V/bin/pip install pypdf cryptography` (cryptography: for AES-encrypted
files, which pypdf otherwise refuses).

    V/bin/python bench/pdf/pypdf_text.py FILE.pdf            # its text, pages split by form feeds
    V/bin/python bench/pdf/pypdf_text.py --outline FILE.pdf  # its outline (bookmarks), a title a line

The text is `PageObject.extract_text()` (pypdf's default, not its layout mode), as
`ragctx-bench-pdf` prints pages: joined by a line holding a form feed. A page pypdf cannot
read is left empty and named on stderr; a file it cannot open at all exits 1.
"""
import sys
import time

import pypdf


def outline_titles(items):
    for item in items:
        if isinstance(item, list):
            yield from outline_titles(item)
        else:
            title = getattr(item, "title", None)
            if title:
                yield " ".join(str(title).split())


def main():
    args = sys.argv[1:]
    outline = args[:1] == ["--outline"]
    path = args[-1]
    started = time.perf_counter()
    reader = pypdf.PdfReader(path, strict=False)
    if outline:
        try:
            titles = list(outline_titles(reader.outline))
        except Exception as e:  # a broken outline reads as none
            print(f"outline unreadable: {e}", file=sys.stderr)
            titles = []
        print("\n".join(titles))
        return
    pages = []
    for i, page in enumerate(reader.pages):
        try:
            pages.append(page.extract_text() or "")
        except Exception as e:
            print(f"page {i + 1}: {type(e).__name__}: {e}", file=sys.stderr)
            pages.append("")
    seconds = time.perf_counter() - started
    print(f"{len(pages)} pages in {seconds:.4f} s", file=sys.stderr)
    sys.stdout.write("\n\x0c\n".join(pages))


if __name__ == "__main__":
    main()
